"""The numpy index writer of reindex against the store's own IndexService, byte for byte."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.index import IndexService
from mqstore.index import format as ifmt
from mqstore.tools.spark._reindex_index import index_names, write_index_files

BASE_TS = 1_700_000_000_000

message = st.tuples(
    st.integers(1, 5_000),  # offset step
    st.integers(-1_500, 4_000),  # store time step (ms; may go back)
    st.lists(st.integers(0, 40), max_size=4),  # keys, as small numbers (slot collisions)
)


def _service_files(folder: Path, msgs: list[tuple[int, int, list[str]]], slots: int, num: int,
                   names: list[str]) -> dict[str, bytes]:  # fmt: skip
    planned = iter([ifmt.name_to_millis(n) for n in names])
    service = IndexService(folder, slots, num, clock=lambda: next(planned, BASE_TS))
    service.load(last_exit_ok=True, index_msg_timestamp=0)
    for off, ts, keys in msgs:
        service.build("t", off, ts, None, keys)
    service.flush()
    service.close()
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _numpy_files(folder: Path, msgs: list[tuple[int, int, list[str]]], slots: int, num: int,
                 names: list[str]) -> dict[str, bytes]:  # fmt: skip
    rows = [(off, i, ts, ifmt.key_hash(f"t#{k}")) for i, (off, ts, keys) in enumerate(msgs)
            for k in keys]  # fmt: skip
    cols = np.array(rows, np.int64).reshape(-1, 4).T
    folder.mkdir()
    write_index_files(folder, names, slots, num, *cols, clock=lambda: BASE_TS)
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@settings(max_examples=100, deadline=None)
@given(
    steps=st.lists(message, max_size=60),
    slots=st.integers(1, 13),
    num=st.integers(2, 30),
    start_ts=st.sampled_from([0, 500, BASE_TS]),
    given_names=st.integers(0, 3),
)
def test_numpy_index_files_equal_the_index_service(
    tmp_path_factory, steps, slots, num, start_ts, given_names
):
    """Any key sequence (collisions, files filling mid-message, times going back, store
    times at 0) gives the same files, names included, as IndexService.build."""
    msgs, off, ts = [], 0, start_ts
    for step, dt, keys in steps:
        off, ts = off + step, max(0, ts + dt)
        msgs.append((off, ts, [f"k{k}" for k in keys]))
    names = [ifmt.file_name(BASE_TS - 10_000 + i * 7) for i in range(given_names)]
    tmp = tmp_path_factory.mktemp("idx")
    expected = _service_files(tmp / "service", msgs, slots, num, names)
    got = _numpy_files(tmp / "numpy", msgs, slots, num, names)
    assert list(got) == list(expected)
    for name, data in expected.items():
        assert got[name] == data, name


def test_later_names_follow_the_clock_after_the_given_ones():
    """Names beyond the given ones come from the clock, each after the previous name."""
    given_name = ifmt.file_name(BASE_TS)
    names = index_names([given_name], 3, clock=lambda: BASE_TS - 5)
    assert names == [given_name, ifmt.file_name(BASE_TS + 1), ifmt.file_name(BASE_TS + 2)]
