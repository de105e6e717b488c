"""Where a segment can hold data: the runs recovery's resync has to search.

A CommitLog segment is sparse and space is reserved ahead of the write position
(``commitlog_reserve_chunk``): past the last record there are holes and *unwritten*
extents, both of which read as zeros. Searching them for a record would read (and,
through the mapping, make resident) up to the whole segment on every open.

``SEEK_DATA``/``SEEK_HOLE`` alone cannot tell: on ext4 an unwritten extent counts as
data as soon as its pages are in the page cache, and reading the first records through
the mapping brings megabytes of them in by readahead, so each search would widen the
next run. The extent map (``FS_IOC_FIEMAP``) is asked first: it lists written extents
(and delayed allocations) apart from unwritten ones whatever the cache holds, and with
``FIEMAP_FLAG_SYNC`` dirty pages are written back before it answers, so an extent
reported unwritten holds zeros. Where the file system has no extent map (tmpfs), the
runs come from ``SEEK_DATA``/``SEEK_HOLE``, and where neither works the whole file is
one run.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct

FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_LAST = 0x1
FIEMAP_EXTENT_UNWRITTEN = 0x800
_HEAD = struct.Struct("=QQIIII")
"""struct fiemap: fm_start, fm_length, fm_flags, fm_mapped_extents, fm_extent_count,
fm_reserved."""
_EXTENT = struct.Struct("=QQQQQIIII")
"""struct fiemap_extent: fe_logical, fe_physical, fe_length, 2 reserved, fe_flags, 3
reserved."""
_BATCH = 256
"""Extents asked for per ioctl."""

Run = tuple[int, int]
"""[start, end) of a run of bytes that may hold data."""


def data_runs(path: os.PathLike[str] | str, start: int, size: int) -> list[Run]:
    """The runs of ``path`` within [``start``, ``size``) that may hold non-zero bytes,
    in order. Bytes outside them read as zeros. ``[(start, size)]`` when nothing can
    be told (the file cannot be opened, or neither the extent map nor
    ``SEEK_DATA``/``SEEK_HOLE`` is supported)."""
    if start >= size:
        return []
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return [(start, size)]
    try:
        runs = _fiemap_runs(fd, start, size)
        if runs is None:
            runs = _seek_runs(fd, start, size)
        return runs
    finally:
        os.close(fd)


def _fiemap_runs(fd: int, start: int, size: int) -> list[Run] | None:
    """Runs from the extent map: written (or delayed) extents, merged when adjacent;
    None when the file system has no extent map."""
    runs: list[Run] = []
    at = start
    while at < size:
        buf = bytearray(_HEAD.size + _BATCH * _EXTENT.size)
        _HEAD.pack_into(buf, 0, at, size - at, FIEMAP_FLAG_SYNC, 0, _BATCH, 0)
        try:
            fcntl.ioctl(fd, FS_IOC_FIEMAP, buf, True)
        except OSError as e:
            if e.errno in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EINVAL, errno.ENOSYS):
                return None
            raise
        mapped = _HEAD.unpack_from(buf, 0)[3]
        if mapped == 0:
            break
        last = False
        for k in range(mapped):
            logical, _phys, length, _r1, _r2, flags, *_ = _EXTENT.unpack_from(
                buf, _HEAD.size + k * _EXTENT.size
            )
            at = max(at, logical + length)
            last = bool(flags & FIEMAP_EXTENT_LAST)
            if flags & FIEMAP_EXTENT_UNWRITTEN:
                continue
            a, b = max(logical, start), min(logical + length, size)
            if a >= b:
                continue
            if runs and runs[-1][1] >= a:
                runs[-1] = (runs[-1][0], max(runs[-1][1], b))
            else:
                runs.append((a, b))
        if last:
            break
    return runs


def _seek_runs(fd: int, start: int, size: int) -> list[Run]:
    """Runs from ``SEEK_DATA``/``SEEK_HOLE`` (unwritten extents may count as data)."""
    runs: list[Run] = []
    at = start
    while at < size:
        try:
            data = os.lseek(fd, at, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # only holes follow
                break
            return [(start, size)] if not runs else [*runs, (at, size)]
        if data >= size:
            break
        try:
            hole = os.lseek(fd, data, os.SEEK_HOLE)
        except OSError:
            hole = size
        runs.append((data, min(hole, size)))
        at = hole
    return runs


def has_extent_map(path: os.PathLike[str] | str) -> bool:
    """Whether the file system of ``path`` (a file) answers ``FS_IOC_FIEMAP``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return _fiemap_runs(fd, 0, max(1, os.fstat(fd).st_size)) is not None
    finally:
        os.close(fd)
