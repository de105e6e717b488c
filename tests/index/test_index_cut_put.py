"""A put cut short (its writer gone between writing entries or slot heads and the header),
then the index loaded again and the same messages indexed again: the files end up byte
for byte as an index that was never interrupted.

The cut is an exception raised from a fault point inside the put: what it leaves in the
mapped file is what a SIGKILL at that point leaves (the page cache keeps every store
made through the mapping). ``tests/crash/test_killed_batch_dispatch.py`` kills a real
process at the same points.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from mqstore import faults
from mqstore.index import format as ifmt
from mqstore.index.service import LONG_MAX, IndexService

Msg = tuple[int, int, list[str]]  # physical offset, store time, keys ("topic#key")


class Cut(Exception):
    """The writer "dies" here."""


def service(d: Path, slots: int, entries: int) -> IndexService:
    s = IndexService(d, slots, entries)
    s.load(last_exit_ok=True, index_msg_timestamp=0)
    return s


def index(s: IndexService, msgs: list[Msg], batch: int) -> None:
    """Index ``msgs`` one by one (``batch`` 0) or ``batch`` messages per build_batch."""
    if not batch:
        for phys, ts, keys in msgs:
            s.build("T", phys, ts, None, [k.removeprefix("T#") for k in keys])
        return
    for lo in range(0, len(msgs), batch):
        part = msgs[lo : lo + batch]
        rec = [i for i, (_, _, keys) in enumerate(part) for _ in keys]
        hashes = [ifmt.key_hash(k) for _, _, keys in part for k in keys]
        stop = s.build_batch(
            np.array([m[0] for m in part], np.int64),
            np.array([m[1] for m in part], np.int64),
            np.array(rec, np.int64),
            np.array(hashes, np.int32),
        )
        assert stop is None


def files(d: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(d.iterdir())]


def messages(draw: st.DrawFn) -> list[Msg]:
    n = draw(st.integers(1, 60))
    pool = [f"T#k{i}" for i in range(draw(st.integers(1, 12)))]
    out: list[Msg] = []
    phys, ts = 0, 1_700_000_000_000
    for _ in range(n):
        keys = draw(st.lists(st.sampled_from(pool), max_size=4, unique=True))
        out.append((phys, ts, keys))
        phys += draw(st.integers(1, 500))
        ts += draw(st.integers(0, 3000))
    return out


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Msg], int, int, int, int, str, int]:
    msgs = messages(draw)
    slots = draw(st.integers(1, 16))
    # At least 5 entries a file: a message (at most 4 keys) spans at most two files, as
    # the service's completion of the last indexed message assumes (it looks there).
    entries = draw(st.integers(6, 40))
    batch = draw(st.sampled_from([0, 1, 3, 8, 64]))
    replay_batch = draw(st.sampled_from([0, 2, 64]))
    point = draw(st.sampled_from(["index_entries_written", "index_slots_written"]))
    hit = draw(st.integers(1, 30))
    return msgs, slots, entries, batch, replay_batch, point, hit


# No shrinking: every step writes index files, and a failure took minutes to shrink;
# the generated example is printed as it is.
@settings(
    max_examples=150,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(scenarios())
def test_put_cut_short_then_indexed_again_equals_an_uncut_index(
    tmp_path_factory: pytest.TempPathFactory,
    scenario: tuple[list[Msg], int, int, int, int, str, int],
) -> None:
    """Index messages (one by one or in batches), cut the ``hit``-th put at ``point``,
    load the files again and index the same messages (the skip rule drops those
    already in): every key finds each of its messages once, and the files are those
    of an index never cut."""
    msgs, slots, entries, batch, replay_batch, point, hit = scenario
    root = tmp_path_factory.mktemp("cut")
    ref = service(root / "ref", slots, entries)
    index(ref, msgs, 0)
    ref.flush()
    ref.close()

    calls = [0]

    def die(**_: object) -> None:
        calls[0] += 1
        if calls[0] == hit:
            raise Cut

    cut = service(root / "cut", slots, entries)
    try:
        with faults.inject(point, die):
            index(cut, msgs, batch)
    except Cut:
        pass
    cut.join_flushers()
    cut.close()  # no flush: the header of the file being written stays as it was
    again = service(root / "cut", slots, entries)
    index(again, msgs, replay_batch)  # messages already indexed are skipped
    again.flush()
    for phys, _ts, keys in msgs:  # each message found once under each of its keys
        for k in set(keys):
            found = again.query("T", k.removeprefix("T#"), 1 << 20, 0, LONG_MAX).phy_offsets
            assert found.count(phys) == 1, (k, phys, found)
    again.close()
    assert files(root / "cut") == files(root / "ref")
