"""The slave's record-continuity check: pure, fed with real CommitLog bytes in memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store import Message, MessageStore, StoreConfig
from store.ha.continuity import DivergenceError, LogContinuity
from store.ha.protocol import chunk
from tests.ha.procs import log_bytes

FILE = 8192


def _log(root: Path, sizes: list[int]) -> tuple[bytes, list[int]]:
    """A real log over 8 KiB files (several blank-padded ends); returns bytes, record starts."""
    cfg = StoreConfig(root_dir=root, commitlog_file_size=FILE, compress_msg_body_over=1 << 20)
    with MessageStore.open(cfg) as s:
        starts = [
            s.put_message(Message(topic="t", body=b"b" * n, queue_id=i % 3)).physical_offset
            for i, n in enumerate(sizes)
        ]
        return log_bytes(s, 0, s.max_physical_offset), starts


@pytest.fixture(scope="module")
def master_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, list[int]]:
    return _log(tmp_path_factory.mktemp("m"), [100 + (i * 37) % 900 for i in range(60)])


def feed(check: LogContinuity, data: bytes, start: int, pieces: list[tuple[int, int]]) -> None:
    for offset, length in pieces:
        check.check(offset, data[offset - start : offset - start + length])


@given(max_transfer=st.integers(1, 3000))
def test_the_masters_own_stream_always_passes(master_log, max_transfer: int):
    data, _ = master_log
    check = LogContinuity(FILE, None)
    feed(check, data, 0, list(chunk(0, len(data), FILE, max_transfer)))
    assert check.next_record == len(data)


@given(split=st.integers(0, 59), max_transfer=st.integers(1, 5000))
def test_resuming_at_any_record_boundary_passes(master_log, split: int, max_transfer: int):
    data, starts = master_log
    at = starts[split]
    check = LogContinuity(FILE, at)
    feed(check, data, 0, list(chunk(at, len(data), FILE, max_transfer)))
    assert check.next_record == len(data)


def test_resuming_inside_a_master_record_is_divergence(master_log):
    data, starts = master_log
    at = starts[10] + 50  # the slave thinks a record starts here; the master's does not
    check = LogContinuity(FILE, at)
    with pytest.raises(DivergenceError, match=f"offset {at}"):
        feed(check, data, 0, list(chunk(at, len(data), FILE, 32 * 1024)))


def test_a_record_at_the_wrong_physical_offset_is_divergence(master_log):
    data, starts = master_log
    at = starts[20]
    record = data[at : starts[21]]
    check = LogContinuity(FILE, at + FILE)  # the same bytes one file later: a valid header...
    with pytest.raises(DivergenceError, match=f"says it was written at {at}"):
        check.check(at + FILE, record)  # ...that names another offset


def test_a_header_cut_between_frames_is_checked_when_complete(master_log):
    data, starts = master_log
    at = starts[5]
    check = LogContinuity(FILE, at)
    check.check(at, data[at : at + 3])  # not even size+magic yet: nothing to judge
    check.check(at + 3, data[at + 3 : at + 20])  # magic fine, physical offset not yet here
    check.check(at + 20, data[at + 20 : starts[6] + 1])
    assert check.next_record == starts[6]  # its header is still incomplete


def test_garbage_at_a_record_start_is_divergence():
    check = LogContinuity(FILE, 0)
    with pytest.raises(DivergenceError, match="not a record"):
        check.check(0, b"\x00\x00\x01\x00garbage!" + bytes(300))
