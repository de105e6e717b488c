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
    # Down to one entry a file: a message's keys (up to 4) then span up to 4 files.
    entries = draw(st.integers(2, 40))
    batch = draw(st.sampled_from([0, 1, 3, 8, 64]))
    replay_batch = draw(st.sampled_from([0, 2, 64]))
    point = draw(st.sampled_from(["index_entries_written", "index_slots_written"]))
    hit = draw(st.integers(1, 30))
    return msgs, slots, entries, batch, replay_batch, point, hit


def cut_then_index_again(
    root: Path,
    msgs: list[Msg],
    slots: int,
    entries: int,
    batch: int,
    replay_batch: int,
    hooks: dict[str, faults.Hook],
) -> None:
    """Index ``msgs`` with ``hooks`` installed (one raises :class:`Cut`), load the files
    again, index the same messages (the skip rule drops those already in); then each
    key finds each of its messages once and the files are those of an uncut index."""
    ref = service(root / "ref", slots, entries)
    index(ref, msgs, 0)
    ref.flush()
    ref.close()
    cut = service(root / "cut", slots, entries)
    for name, hook in hooks.items():
        faults.register(name, hook)
    try:
        index(cut, msgs, batch)
    except Cut:
        pass
    finally:
        for name in hooks:
            faults.clear(name)
    cut.join_flushers()
    cut.close()  # no flush: the header of the file being written stays as it was
    again = service(root / "cut", slots, entries)
    index(again, msgs, replay_batch)
    again.flush()
    for phys, _ts, keys in msgs:
        for k in set(keys):
            found = again.query("T", k.removeprefix("T#"), 1 << 20, 0, LONG_MAX).phy_offsets
            assert found.count(phys) == 1, (k, phys, found)
    again.close()
    assert files(root / "cut") == files(root / "ref")


def nth(hit: int, before: faults.Hook | None = None) -> faults.Hook:
    """A hook that raises :class:`Cut` at its ``hit``-th call (after ``before``)."""
    calls = [0]

    def hook(**at: object) -> None:
        calls[0] += 1
        if calls[0] == hit:
            if before is not None:
                before(**at)
            raise Cut

    return hook


# No shrinking: every step writes index files, and a failure took minutes to shrink;
# the generated example is printed as it is.
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@SETTINGS
@given(scenarios())
def test_put_cut_short_then_indexed_again_equals_an_uncut_index(
    tmp_path_factory: pytest.TempPathFactory,
    scenario: tuple[list[Msg], int, int, int, int, str, int],
) -> None:
    """The ``hit``-th put (one message's keys, or a batch's part of a file) cut after
    its entries, or after its entries and slot heads."""
    msgs, slots, entries, batch, replay_batch, point, hit = scenario
    root = tmp_path_factory.mktemp("cut")
    cut_then_index_again(root, msgs, slots, entries, batch, replay_batch, {point: nth(hit)})


@SETTINGS
@given(scenarios(), st.sets(st.integers(0, 15), max_size=16), st.sampled_from([1, 3, 8, 64]))
def test_batch_cut_with_only_some_of_its_slot_heads_written(
    tmp_path_factory: pytest.TempPathFactory,
    scenario: tuple[list[Msg], int, int, int, int, str, int],
    unwritten: set[int],
    batch: int,
) -> None:
    """A batch's slot heads are written by one numpy assignment, which a kill can stop
    part way: the slots in ``unwritten`` still hold their value from before the put."""
    msgs, slots, entries, _batch, replay_batch, _point, hit = scenario
    root = tmp_path_factory.mktemp("cut")
    before: dict[str, bytes] = {}

    def snapshot(what: str, **_: object) -> None:
        with open(what, "rb") as f:
            f.seek(ifmt.HEADER_SIZE)
            before[what] = f.read(slots * ifmt.SLOT_SIZE)

    def put_back(what: str, **_: object) -> None:
        with open(what, "r+b") as f:
            for slot in sorted(unwritten):
                if slot < slots:
                    f.seek(ifmt.HEADER_SIZE + slot * ifmt.SLOT_SIZE)
                    f.write(before[what][slot * ifmt.SLOT_SIZE : (slot + 1) * ifmt.SLOT_SIZE])

    hooks = {"index_entries_written": snapshot, "index_slots_written": nth(hit, put_back)}
    cut_then_index_again(root, msgs, slots, entries, batch, replay_batch, hooks)
