"""One memory-mapped, pre-sized segment file named by its 20-digit start offset.

Positions (all relative to the file start, 0 <= flushed <= wrote <= file_size):

* ``wrote_position``: bytes appended so far (RocketMQ's wrotePosition; with no
  transient store pool the committed position is the same, see ``committed_position``);
* ``flushed_position``: bytes known to be on stable storage (after ``fdatasync``).

Thread-safety: ``append``/``write_at`` are called only under the CommitLog's put lock
(or by the single HA/recovery writer); ``flush`` only by the one flusher thread;
readers use ``view`` without locks: bytes below ``wrote_position`` never change until
the file is truncated or destroyed, which happens only with the writer stopped.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path

from mqstore import _platform
from mqstore.config import OS_PAGE_SIZE
from mqstore.errors import SegmentLoadError

NAME_DIGITS = 20
_ZERO_CHUNK_LEN = 64 * 1024
_ZERO_CHUNK = bytes(_ZERO_CHUNK_LEN)
_QUIET_CHUNKS = 16


def offset_to_name(offset: int) -> str:
    """20-digit zero-padded file name of a start offset.

    >>> offset_to_name(1073741824)
    '00000000001073741824'
    """
    return f"{offset:0{NAME_DIGITS}d}"


def name_to_offset(name: str) -> int:
    """Start offset from a segment file name.

    Raises:
        SegmentLoadError: the name is not 20 decimal digits.
    """
    if len(name) != NAME_DIGITS or not name.isdigit():
        raise SegmentLoadError(f"not a segment file name: {name!r}")
    return int(name)


class MappedFile:
    """A fixed-size file mapped read-write for its whole length."""

    __slots__ = (
        "_closed",
        "_fd",
        "_mm",
        "file_from_offset",
        "file_size",
        "flushed_position",
        "last_store_timestamp",
        "mapping",
        "path",
        "view",
        "wrote_position",
    )

    def __init__(self, path: Path, file_size: int, *, create: bool) -> None:
        """Open (or create, allocating every byte) a segment.

        Raises:
            SegmentLoadError: an existing file has the wrong size or name.
            OSError: creation failed (ENOSPC from allocation, permissions, ...).
        """
        self.path = path
        self.file_size = file_size
        self.file_from_offset = name_to_offset(path.name)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o644)
        try:
            if create:
                try:
                    _platform.allocate(fd, file_size)
                except OSError:
                    os.close(fd)
                    fd = -1
                    path.unlink(missing_ok=True)
                    raise
            else:
                actual = os.fstat(fd).st_size
                if actual != file_size:
                    raise SegmentLoadError(
                        f"{path}: size {actual} != configured segment size {file_size}"
                    )
            self._mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        self._fd = fd
        self.view = memoryview(self._mm)
        # The writable mapping itself, for the put fast path: the put-lock holder
        # packs a record in place at ``wrote_position``, then moves the position.
        self.mapping = self._mm
        self._closed = False
        # A loaded file starts "full"; recovery corrects the positions (as RocketMQ).
        start = 0 if create else file_size
        self.wrote_position = start
        self.flushed_position = start
        self.last_store_timestamp = 0

    # ------------------------------------------------------------------ writing

    @property
    def committed_position(self) -> int:
        """Same as ``wrote_position``: there is no transient write buffer."""
        return self.wrote_position

    @property
    def free(self) -> int:
        """Bytes left after the write position."""
        return self.file_size - self.wrote_position

    @property
    def is_full(self) -> bool:
        """True once the write position reached the end (after a blank record)."""
        return self.wrote_position >= self.file_size

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at the write position; return the position it was written at.

        Caller holds the put lock and has checked that it fits.
        """
        pos = self.wrote_position
        end = pos + len(data)
        self._mm[pos:end] = data
        self.wrote_position = end
        return pos

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Overwrite bytes at ``pos`` without moving the write position (recovery only)."""
        self._mm[pos : pos + len(data)] = data

    def mark_full(self) -> None:
        """Move the write position to the end (after writing a blank record)."""
        self.wrote_position = self.file_size

    # ----------------------------------------------------------------- flushing

    def pages_to_flush(self) -> int:
        """Page boundaries crossed since the last flush (RocketMQ ``isAbleToFlush``)."""
        return self.wrote_position // OS_PAGE_SIZE - self.flushed_position // OS_PAGE_SIZE

    def able_to_flush(self, least_pages: int) -> bool:
        """Whether a flush is due: a full file always; else ``least_pages`` crossed."""
        if self.flushed_position >= self.wrote_position:
            return False
        if self.is_full:
            return True
        if least_pages > 0:
            return self.pages_to_flush() >= least_pages
        return True

    def flush(self) -> int:
        """``fdatasync`` what is written; return the new flushed position.

        Raises:
            OSError: the sync failed; ``flushed_position`` is left unchanged.
        """
        target = self.wrote_position
        if target > self.flushed_position:
            _platform.fdatasync(self._fd, what=str(self.path))
            self.flushed_position = target
        return self.flushed_position

    def sync(self) -> None:
        """``fdatasync`` the whole file whatever the positions say (after zeroing a cut).

        Raises:
            OSError: the sync failed.
        """
        _platform.fdatasync(self._fd, what=str(self.path))

    # ------------------------------------------------------------ truncation

    def truncate_to(self, pos: int) -> int:
        """Cut the file at ``pos``: zero stale bytes after it and move both positions there.

        Zeroing makes a later scan stop exactly at ``pos`` (all-zero = never written),
        so an old record beyond the cut can never be read back as data once new
        records end next to it. Only the dirty region is touched: the scan goes in
        64 KiB chunks and stops after 1 MiB of consecutive zero chunks, because
        segments are written front to back and a torn tail is contiguous except for
        pages the power loss dropped. Returns the bytes from ``pos`` to the end of
        the last non-zero chunk found (the "torn" size).
        """
        chunk = _ZERO_CHUNK_LEN
        zero = _ZERO_CHUNK
        torn_end = pos
        quiet = 0
        a = pos
        size = self.file_size
        while a < size and quiet < _QUIET_CHUNKS:
            b = min(size, (a // chunk + 1) * chunk)
            if self._mm[a:b] == zero[: b - a]:  # mmap slices compare by memcmp
                quiet += 1
            else:
                quiet = 0
                self._mm[a:b] = zero[: b - a]
                torn_end = b
            a = b
        self.wrote_position = pos
        self.flushed_position = min(self.flushed_position, pos)
        return torn_end - pos

    def set_positions(self, pos: int) -> None:
        """Set write and flushed positions (recovery: what is on disk is flushed)."""
        self.wrote_position = pos
        self.flushed_position = pos

    # ------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Unmap and close. Views handed out earlier become invalid."""
        if self._closed:
            return
        self._closed = True
        self.view.release()
        # A reader still holding an exported view keeps the mapping alive: leave it
        # to the GC rather than invalidating memory under it.
        with contextlib.suppress(BufferError):
            self._mm.close()
        os.close(self._fd)

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return (
            f"MappedFile({self.path.name}, wrote={self.wrote_position}, "
            f"flushed={self.flushed_position}, size={self.file_size})"
        )
