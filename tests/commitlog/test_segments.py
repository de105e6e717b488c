"""MappedFile and Segments: naming, roll, lookup, flush positions, truncation, loading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mqstore.commitlog.mapped_file import MappedFile, name_to_offset, offset_to_name
from mqstore.commitlog.segments import Segments
from mqstore.errors import SegmentLoadError

SIZE = 64 * 1024


def test_file_names_are_twenty_digit_start_offsets():
    assert offset_to_name(1073741824) == "00000000001073741824"
    assert name_to_offset("00000000001073741824") == 1073741824


def test_bad_file_name_is_refused():
    with pytest.raises(SegmentLoadError):
        name_to_offset("123")


def test_new_segment_is_allocated_to_full_size_and_empty(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    mf = segs.last_for_write(0)
    assert os.path.getsize(mf.path) == SIZE
    assert (mf.wrote_position, mf.flushed_position) == (0, 0)
    segs.close()


def test_first_segment_starts_at_boundary_below_requested_offset(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    mf = segs.last_for_write(SIZE * 3 + 100)
    assert mf.file_from_offset == SIZE * 3
    segs.close()


def test_full_segment_rolls_to_next_start(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    mf = segs.last_for_write(0)
    mf.append(b"x" * 10)
    mf.mark_full()
    nxt = segs.last_for_write()
    assert nxt.file_from_offset == SIZE
    assert segs.names() == [offset_to_name(0), offset_to_name(SIZE)]
    segs.close()


def test_find_returns_segment_containing_offset(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    a = segs.create(0)
    b = segs.create(SIZE)
    assert segs.find(0) is a
    assert segs.find(SIZE - 1) is a
    assert segs.find(SIZE) is b
    assert segs.find(2 * SIZE) is None
    segs.close()


def test_flush_with_least_pages_waits_for_page_boundaries(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    mf = segs.last_for_write(0)
    mf.append(b"x" * 5000)  # crosses one page boundary
    assert not segs.flush(2)
    assert segs.flushed_where == 0
    mf.append(b"x" * 4000)  # now two boundaries
    assert segs.flush(2)
    assert segs.flushed_where == 9000
    segs.close()


def test_flush_zero_least_pages_flushes_any_new_byte(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    segs.last_for_write(0).append(b"y")
    assert segs.flush(0)
    assert segs.flushed_where == 1
    segs.close()


def test_flush_moves_to_next_segment_after_full_one(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    a = segs.last_for_write(0)
    a.append(b"a" * 100)
    a.mark_full()
    segs.last_for_write().append(b"b" * 10)
    segs.flush_all()
    assert segs.flushed_where == SIZE + 10
    segs.close()


def test_truncate_zeroes_stale_bytes_and_deletes_later_segments(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    a = segs.last_for_write(0)
    a.append(b"a" * 1000)
    a.mark_full()
    b = segs.last_for_write()
    b.append(b"b" * 100)
    segs.truncate_to(500)
    assert segs.names() == [offset_to_name(0)]
    assert a.wrote_position == 500
    assert bytes(a.view[500:1000]) == bytes(500)
    assert bytes(a.view[:500]) == b"a" * 500
    segs.close()


def test_load_maps_existing_segments_in_order(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    segs.create(0).append(b"1")
    segs.create(SIZE)
    segs.close()
    again = Segments(tmp_path, SIZE)
    again.load()
    assert [m.file_from_offset for m in again.files] == [0, SIZE]
    again.close()


def test_load_refuses_segment_of_wrong_size(tmp_path: Path):
    (tmp_path / offset_to_name(0)).write_bytes(b"\0" * 100)
    (tmp_path / offset_to_name(SIZE)).write_bytes(b"\0" * SIZE)
    segs = Segments(tmp_path, SIZE)
    with pytest.raises(SegmentLoadError, match="size 100"):
        segs.load()


def test_load_deletes_empty_last_segment(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    segs.create(0)
    segs.close()
    (tmp_path / offset_to_name(SIZE)).write_bytes(b"")
    again = Segments(tmp_path, SIZE)
    again.load()
    assert again.names() == [offset_to_name(0)]
    assert not (tmp_path / offset_to_name(SIZE)).exists()
    again.close()


def test_load_refuses_gap_between_segments(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    segs.create(0)
    segs.close()
    MappedFile(tmp_path / offset_to_name(2 * SIZE), SIZE, create=True).close()
    again = Segments(tmp_path, SIZE)
    with pytest.raises(SegmentLoadError, match="missing"):
        again.load()


def test_delete_expired_keeps_last_segment(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    segs.create(0)
    segs.create(SIZE)
    deleted = segs.delete_expired(expired_before_ms=2**62)
    assert [p.name for p in deleted] == [offset_to_name(0)]
    assert segs.names() == [offset_to_name(SIZE)]
    assert segs.min_offset == SIZE
    segs.close()


def test_a_full_flush_records_the_last_store_time_though_a_periodic_flush_synced_it(
    tmp_path: Path,
):
    """The periodic flush (least pages > 0) syncs the bytes but leaves the flushed store
    time alone; the shutdown's flush, finding nothing left to sync, must still record
    it, or recovery would judge later records not durable."""
    segs = Segments(tmp_path, SIZE)
    mf = segs.last_for_write(0)
    mf.wrote_position = 2 * 4096
    mf.last_store_timestamp = 1_700_000_000_123
    assert segs.flush(1)
    assert segs.flushed_store_timestamp == 0
    segs.flush_all()
    assert segs.flushed_store_timestamp == 1_700_000_000_123
    segs.close()


def test_a_full_flush_does_not_take_the_time_of_bytes_it_did_not_sync(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    mf = segs.last_for_write(0)
    mf.wrote_position = 4096
    mf.last_store_timestamp = 5
    segs.flush_all()
    mf.wrote_position = 8192  # a put after the flush: its time is not flushed
    mf.last_store_timestamp = 9
    assert segs.flushed_where < segs.max_offset
    assert segs.flushed_store_timestamp == 5
    segs.close()
