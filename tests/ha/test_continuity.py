"""The slave's record walk (divergence check, whole-record appends): pure, real log bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore import Message, MessageStore, StoreConfig
from mqstore.ha.continuity import DivergenceError, LogContinuity
from mqstore.ha.protocol import chunk
from tests.ha.procs import log_bytes

FILE = 8192


@pytest.fixture(scope="module")
def master_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, list[int]]:
    """A real log over 8 KiB files (several blank-padded ends); its bytes and record starts."""
    root = tmp_path_factory.mktemp("m")
    cfg = StoreConfig(root_dir=root, commitlog_file_size=FILE, compress_msg_body_over=1 << 20)
    with MessageStore.open(cfg) as s:
        starts = [
            s.put_message(Message(topic="t", body=b"b" * (100 + i * 37 % 900))).physical_offset
            for i in range(60)
        ]
        return log_bytes(s, 0, s.max_physical_offset), starts


def boundaries(data: bytes, starts: list[int]) -> set[int]:
    """Offsets where whole records end: record starts and ends (a blank starts at one)."""
    ends = {s + int.from_bytes(data[s : s + 4], "big") for s in starts}
    return {*starts, *ends, *range(0, len(data) + 1, FILE)}


def replay(
    check: LogContinuity, data: bytes, start: int, max_transfer: int
) -> list[tuple[int, bytes]]:
    """Feed ``data[start:]`` in protocol-sized frames; return the released pieces."""
    out = []
    for offset, length in chunk(start, len(data), FILE, max_transfer):
        at, ready = check.feed(offset, data[offset : offset + length])
        if ready:
            out.append((at, bytes(ready)))
    return out


@given(max_transfer=st.integers(1, 3000), split=st.integers(0, 59))
def test_released_pieces_rebuild_the_stream_and_end_on_record_boundaries(
    master_log, max_transfer: int, split: int
):
    data, starts = master_log
    at = starts[split]
    check = LogContinuity(FILE, at)
    pieces = replay(check, data, at, max_transfer)
    assert b"".join(p for _, p in pieces) == data[at:]
    ends = boundaries(data, starts)
    position = at
    for offset, piece in pieces:
        assert offset == position
        position += len(piece)
        assert position in ends
        assert offset // FILE == (position - 1) // FILE  # one file per piece
    assert check.start == len(data) and check.pending == 0


def test_an_empty_slave_starts_where_the_first_frame_does(master_log):
    data, _ = master_log
    check = LogContinuity(FILE, None)
    assert replay(check, data[: 2 * FILE], FILE, 32 * 1024)[0][0] == FILE


def test_a_cut_record_is_held_back_until_complete(master_log):
    data, starts = master_log
    at, nxt = starts[5], starts[6]
    check = LogContinuity(FILE, at)
    assert check.feed(at, data[at : at + 3]) == (at, b"")  # not even size+magic
    assert check.feed(at + 3, data[at + 3 : nxt - 1]) == (at, b"")  # one byte short
    assert check.pending == nxt - 1 - at
    released_at, ready = check.feed(nxt - 1, data[nxt - 1 : nxt + 10])
    assert (released_at, bytes(ready)) == (at, data[at:nxt])
    assert check.start == nxt and check.pending == 10


def test_reset_drops_what_was_held_back(master_log):
    data, starts = master_log
    check = LogContinuity(FILE, starts[3])
    check.feed(starts[3], data[starts[3] : starts[3] + 50])
    check.reset(starts[3])
    assert check.pending == 0
    with pytest.raises(ValueError, match="does not continue"):
        check.feed(starts[3] + 50, data[starts[3] + 50 : starts[4]])


def test_resuming_inside_a_master_record_is_divergence(master_log):
    data, starts = master_log
    at = starts[10] + 50  # the slave thinks a record starts here; the master's does not
    with pytest.raises(DivergenceError, match=f"offset {at}"):
        replay(LogContinuity(FILE, at), data, at, 32 * 1024)


def test_a_record_at_the_wrong_physical_offset_is_divergence(master_log):
    data, starts = master_log
    at = starts[20]
    check = LogContinuity(FILE, at + FILE)  # the same bytes one file later: a valid header...
    with pytest.raises(DivergenceError, match=f"says it was written at {at}"):
        check.feed(at + FILE, data[at : starts[21]])  # ...that names another offset


def test_garbage_at_a_record_start_is_divergence():
    with pytest.raises(DivergenceError, match="not a record"):
        LogContinuity(FILE, 0).feed(0, b"\x00\x00\x01\x00garbage!" + bytes(300))


def test_nothing_is_released_before_a_divergence_is_found(master_log):
    data, starts = master_log
    check = LogContinuity(FILE, starts[2])
    _, ok = check.feed(starts[2], data[starts[2] : starts[3]])
    assert bytes(ok) == data[starts[2] : starts[3]]
    with pytest.raises(DivergenceError):
        check.feed(starts[3], b"\xff" * 64)
    assert check.start == starts[3]
