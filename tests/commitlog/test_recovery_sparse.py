"""Recovery of a sparse segment reads the log, not the space reserved after it.

A default segment is 1 GiB, sparse, with 64 MiB reserved (unwritten) ahead of the
write position. After the scan meets the zeros past the last record, the resync that
looks for valid records after damage and the cut of the tail must not read that
reserved space: every open would otherwise read (and map in) megabytes of zeros.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from mqstore import Message, PutStatus
from mqstore.commitlog.recovery_extents import data_runs, has_extent_map
from tests.helpers import make_store, reopen

SEGMENT = 1 << 30  # RocketMQ's default: sparse, so this costs only what is written


def _resident_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total = 0
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and not line[0].isupper():
                inside = head[-1] == str(path)
            elif inside and line.startswith("Rss:"):
                total += int(head[1])
    return total


def _evict(path: Path) -> None:
    """Drop the file's clean pages from the page cache (a cold open)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_open_after_a_clean_close_does_not_read_the_reserved_space(tmp_path: Path):
    s = make_store(tmp_path, commitlog_file_size=SEGMENT, message_index_enable=False)
    for i in range(200):
        r = s.put_message(Message(topic="t", body=b"x" * 100, queue_id=i % 4))
        assert r.status is PutStatus.PUT_OK
    end = s.max_physical_offset
    s.close()
    seg = s.root / "commitlog" / f"{0:020d}"
    if not has_extent_map(seg):
        pytest.skip("no extent map on this file system: reserved space reads as data")
    _evict(seg)
    s = reopen(s.cfg)
    try:
        assert s.recovery is not None and s.recovery.end_offset == end
        assert s.recovery.searched_bytes < 8192  # the rest of the last written page
        assert _resident_kib(seg) < 8 * 1024  # 64 MiB reserved, none of it mapped in
    finally:
        s.close()


def test_data_runs_leave_out_holes_and_unwritten_extents(tmp_path: Path):
    path = tmp_path / "f"
    page = 4096
    with open(path, "wb") as f:
        f.truncate(64 * page)
        f.seek(2 * page)
        f.write(b"\x01" * page)
        f.seek(40 * page)
        f.write(b"\x02" * (2 * page))
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 10 * page, 20 * page)  # reserved, unwritten
    finally:
        os.close(fd)
    if not has_extent_map(path):
        pytest.skip("no extent map on this file system")
    assert data_runs(path, 0, 64 * page) == [(2 * page, 3 * page), (40 * page, 42 * page)]
    assert data_runs(path, 41 * page, 64 * page) == [(41 * page, 42 * page)]
    assert data_runs(path, 50 * page, 64 * page) == []


def test_a_torn_record_in_unsynced_pages_of_reserved_space_is_cut(tmp_path: Path):
    """After a kill the torn tail sits in dirty pages of an unwritten extent: the extent
    map must count them as data (it is asked after a writeback), or the cut is skipped
    and the torn bytes stay after the end."""
    size = 8 << 20  # one unwritten extent from the 64 MiB reservation
    s = make_store(tmp_path, commitlog_file_size=size, message_index_enable=False)
    for _ in range(50):
        assert s.put_message(Message(topic="t", body=b"y" * 200)).status is PutStatus.PUT_OK
    end = s.max_physical_offset
    s.abandon()
    seg = s.root / "commitlog" / f"{0:020d}"
    fd = os.open(seg, os.O_RDWR)
    try:
        head = os.pread(fd, 120, 0)  # a record's first 120 bytes: torn after the header
        with mmap.mmap(fd, size) as mm:
            mm[end : end + len(head)] = head  # dirty in the page cache, never synced
    finally:
        os.close(fd)
    s = reopen(s.cfg)
    try:
        assert s.max_physical_offset == end
        with open(seg, "rb") as f:
            f.seek(end)
            assert f.read(4096) == bytes(4096)
    finally:
        s.close()
