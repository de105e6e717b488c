"""One memory-mapped, fixed-size segment file named by its 20-digit start offset.

Allocation: a segment is either allocated in full when created (``reserve_chunk``
0) or sparse (RocketMQ's way: the file is sized, blocks are allocated as they are
written). A sparse segment still never writes through its mapping into an
unallocated hole, because on a full disk that is SIGBUS, not an exception:
``reserved`` is how far the file is known to be allocated, and every write past it
first reserves (``posix_fallocate``) a chunk beyond its end, so ENOSPC surfaces as an
``OSError`` from the write call, before any byte is written. Writers that pack
straight into ``mapping`` check ``reserved``, not ``file_size``.

The chunk grows with the file: as much again as the file already holds, at least
:data:`RESERVE_FLOOR` and at most ``reserve_chunk``
(:func:`mqstore._platform.reserve_ahead`). A store
of ten messages so reserves 1 MiB, not ``reserve_chunk``'s 64 MiB, while a busy
segment reaches full-size chunks after a handful of reservations (1, 2, 4, ... MiB):
the number of ``fallocate`` calls per segment grows by about log2(64) = 6.

Mapping: a segment may be opened unmapped (``mapped=False``) and mapped on first
use (:meth:`MappedFile.map`); :meth:`MappedFile.unmap` gives the mapping and the
file descriptor back while positions stay, so a store with many small files can
keep only the ones in use mapped (``mqstore.consumequeue.mappings``). Unmapping
never invalidates a view a reader already took: it only drops this object's
references, and the mapping goes when the last view of it does.

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
import errno
import mmap
import os
from pathlib import Path

from mqstore import _platform, faults
from mqstore.config import OS_PAGE_SIZE
from mqstore.errors import SegmentLoadError

NAME_DIGITS = 20
_ZERO_CHUNK_LEN = 64 * 1024
_ZERO_CHUNK = bytes(_ZERO_CHUNK_LEN)
UNMAPPED = memoryview(b"")
UNMAPPED.release()
"""``view`` of an unmapped file: any access raises ``ValueError`` (as a closed file's)."""


RESERVE_FLOOR = 1 << 20
"""The least a sparse segment reserves ahead of a write (when ``reserve_chunk`` allows)."""


def allocate_range(fd: int, offset: int, length: int, *, what: str = "") -> None:
    """:func:`mqstore._platform.allocate_range` with the fault point ``before_reserve``.

    Raises:
        OSError: ENOSPC (or EDQUOT) when the disk cannot back the range.
    """
    _platform.allocate_range(fd, offset, length, point="before_reserve", what=what)


def _reserve_range(fd: int, start: int, end: int, stop: int, *, what: str) -> int:
    """Allocate ``[start, stop)``, at least ``[start, end)``; return where allocation
    is now known to reach.

    Short of space for the whole chunk, a range that is already allocated (some
    filesystems, tmpfs among them, refuse ``fallocate`` of a range they would not have
    room for even when its blocks exist) or just the pages up to ``end`` will do.

    Raises:
        OSError: ENOSPC (or EDQUOT) when not even ``[start, end)`` can be backed.
    """
    try:
        allocate_range(fd, start, stop - start, what=what)
        return stop
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        st = os.fstat(fd)
        if st.st_blocks * 512 >= st.st_size:  # every block of the file exists
            return stop
        try:
            hole = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError:
            hole = start
        if hole >= end:
            return min(hole, stop)
        page_end = min(stop, -(-end // OS_PAGE_SIZE) * OS_PAGE_SIZE)
        if page_end < stop:
            allocate_range(fd, start, page_end - start, what=what)
            return page_end
        raise


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
        "random_access",
        "reserve_chunk",
        "reserved",
        "used_at",
        "view",
        "wrote_position",
    )

    def __init__(
        self,
        path: Path,
        file_size: int,
        *,
        create: bool,
        reserve_chunk: int = 0,
        mapped: bool = True,
        random_access: bool = False,
        st: os.stat_result | None = None,
    ) -> None:
        """Open (or create) a segment.

        ``reserve_chunk`` 0 allocates every byte at creation; otherwise the file is
        created sparse and space is reserved ahead of each write past ``reserved``,
        at most that far (:func:`~mqstore._platform.reserve_ahead`). ``mapped`` False
        opens nothing yet (:meth:`map` does, on use).
        ``random_access`` maps without readahead (small, scattered accesses). ``st``:
        the existing file's ``stat`` if the caller has it.

        Raises:
            SegmentLoadError: an existing file has the wrong size or name.
            OSError: creation failed (ENOSPC from allocation, permissions, ...).
        """
        self.path = path
        self.file_size = file_size
        self.file_from_offset = name_to_offset(path.name)
        self.reserve_chunk = reserve_chunk
        self.random_access = random_access
        self.used_at = 0
        self._closed = False
        self._fd = -1
        self._mm: mmap.mmap | None = None
        self.view = UNMAPPED
        if create:
            self._create()
            self.reserved = 0 if reserve_chunk else file_size
        else:
            if st is None:
                st = os.stat(path)
            if st.st_size != file_size:
                raise SegmentLoadError(
                    f"{path}: size {st.st_size} != configured segment size {file_size}"
                )
            # A file with holes (created sparse, by this run's settings or not) has
            # what was written allocated; what follows is reserved on use.
            self.reserved = file_size if st.st_blocks * 512 >= file_size else 0
        if mapped:
            self.map()
        # A loaded file starts "full"; recovery corrects the positions (as RocketMQ).
        start = 0 if create else file_size
        self.wrote_position = start
        self.flushed_position = start
        self.last_store_timestamp = 0

    def _create(self) -> None:
        """Create the file; its descriptor stays open for the first :meth:`map` (a
        file is created to be written)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _platform.allocate(fd, self.file_size, sparse=bool(self.reserve_chunk))
        except BaseException:
            os.close(fd)
            self.path.unlink(missing_ok=True)
            raise
        self._fd = fd

    # ------------------------------------------------------------------ mapping

    @property
    def is_mapped(self) -> bool:
        """Whether the file is mapped now."""
        return self._mm is not None

    def map(self) -> memoryview:
        """Map the file (if it is not) and return its view.

        Raises:
            OSError: the file cannot be opened or mapped (deleted meanwhile, ...).
            ValueError: the file was closed.
        """
        if self._closed:
            raise ValueError(f"{self.path} is closed")
        if self._mm is None:
            fd = self._fd if self._fd >= 0 else os.open(self.path, os.O_RDWR)
            self._fd = -1
            try:
                mm = mmap.mmap(fd, self.file_size, mmap.MAP_SHARED,
                               mmap.PROT_READ | mmap.PROT_WRITE)  # fmt: skip
            except BaseException:
                os.close(fd)
                raise
            if self.random_access:
                # No readahead on faults: a fault in a file of mostly holes otherwise
                # zero-fills a whole readahead window, costing milliseconds per page.
                mm.madvise(mmap.MADV_RANDOM)
                # A file another thread may unmap keeps no descriptor (mmap holds its
                # own): reserve/flush open theirs, so none is closed under them.
                os.close(fd)
                fd = -1
            self._fd = fd
            self._mm = mm
            self.view = memoryview(mm)
            # The writable mapping itself, for the put fast path: the put-lock holder
            # packs a record in place at ``wrote_position``, then moves the position.
            self.mapping = mm
        return self.view

    def unmap(self) -> None:
        """Give back the mapping and the descriptor; positions stay, data stays in the
        page cache (a later :meth:`flush` syncs it through a new descriptor). Views
        taken before stay valid: the mapping goes with the last of them."""
        if self._mm is None:
            return
        self.view = UNMAPPED
        self._mm = None
        with contextlib.suppress(AttributeError):
            del self.mapping
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    # ------------------------------------------------------------- allocation

    def reserve(self, end: int) -> None:
        """Make sure bytes up to ``end`` are allocated, and a chunk ahead
        (:func:`~mqstore._platform.reserve_ahead`).

        Raises:
            OSError: ENOSPC (nothing was written; ``reserved`` does not move).
        """
        if end <= self.reserved:
            return
        start = max(self.reserved, self.wrote_position) // OS_PAGE_SIZE * OS_PAGE_SIZE
        chunk = self.reserve_chunk
        page_end = -(-end // OS_PAGE_SIZE) * OS_PAGE_SIZE
        ahead = start + _platform.reserve_ahead(start, chunk, RESERVE_FLOOR)
        ahead = ahead // OS_PAGE_SIZE * OS_PAGE_SIZE
        stop = min(self.file_size, max(page_end, ahead)) if chunk else self.file_size
        shared = self._shared_fd()
        fd = shared if shared >= 0 else os.open(self.path, os.O_RDWR)
        try:
            self.reserved = _reserve_range(fd, start, end, stop, what=str(self.path))
        finally:
            if shared < 0:
                os.close(fd)

    def _shared_fd(self) -> int:
        """The file's own descriptor if no other thread can close it (-1: open one).

        Files mapped on use (``random_access``) are unmapped by whichever thread needs
        a mapping, so their descriptor is never borrowed."""
        return -1 if self.random_access else self._fd

    def allocated_bytes(self) -> int:
        """Bytes the file really occupies on disk (``st_blocks``; 0 if it is gone)."""
        try:
            return os.stat(self.path).st_blocks * 512
        except FileNotFoundError:
            return 0

    def write_unmapped(self, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at the write position with ``pwrite``, for a file that is not
        mapped (a new consume-queue file's first units: mapping a file to write one
        unit costs several system calls more than writing it). The write allocates
        its pages itself (a full disk is an ``OSError`` from it, position unchanged);
        the descriptor creation left open is used and closed.

        Raises:
            OSError: the write failed (ENOSPC, ...).
            ValueError: the file is mapped or closed.
        """
        if self._mm is not None or self._closed:
            raise ValueError(f"{self.path} is mapped or closed")
        pos = self.wrote_position
        faults.point("before_reserve", offset=pos, size=len(data), what=str(self.path))
        fd, self._fd = self._fd, -1
        if fd < 0:
            fd = os.open(self.path, os.O_RDWR)
        try:
            written = os.pwrite(fd, data, pos)
        finally:
            os.close(fd)
        end = pos + len(data)
        if written != len(data):
            raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)})", str(self.path))
        self.reserved = max(
            self.reserved, min(self.file_size, -(-end // OS_PAGE_SIZE) * OS_PAGE_SIZE)
        )
        self.wrote_position = end

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
        if end > self.reserved:
            self.reserve(end)
        mm = self._mm if self._mm is not None else self._mapped()
        mm[pos:end] = data
        self.wrote_position = end
        return pos

    def _mapped(self) -> mmap.mmap:
        self.map()
        assert self._mm is not None
        return self._mm

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Overwrite bytes at ``pos`` without moving the write position (recovery only).

        Raises:
            OSError: ENOSPC reserving the bytes.
        """
        if pos + len(data) > self.reserved:
            self.reserve(pos + len(data))
        mm = self._mm if self._mm is not None else self._mapped()
        mm[pos : pos + len(data)] = data

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
            self._fdatasync()
            self.flushed_position = target
        return self.flushed_position

    def _fdatasync(self) -> None:
        shared = self._shared_fd()
        if shared >= 0:
            _platform.fdatasync(shared, what=str(self.path))
            return
        # Unmapped: the pages written through an earlier mapping are the file's, any
        # descriptor syncs them.
        fd = os.open(self.path, os.O_RDWR)
        try:
            _platform.fdatasync(fd, what=str(self.path))
        finally:
            os.close(fd)

    def sync(self) -> None:
        """``fdatasync`` the whole file whatever the positions say (after zeroing a cut).

        Raises:
            OSError: the sync failed.
        """
        self._fdatasync()

    # ------------------------------------------------------------ truncation

    def truncate_to(self, pos: int) -> int:
        """Cut the file at ``pos``: zero every byte after it and move both positions there.

        Zeroing makes a later scan stop exactly at ``pos`` (all-zero = never written),
        so an old record beyond the cut can never be read back as data once new
        records end next to it. It covers the whole rest of the file: a power loss can
        drop any run of unsynced pages (megabytes of them, background writeback does
        not go front to back) and keep the pages after it, so no run of zeros means
        that nothing follows. Holes (``SEEK_DATA``) are skipped and chunks already
        zero are only read, not written. Returns the bytes from ``pos`` to the end of
        the last non-zero chunk found (the "torn" size).
        """
        chunk = _ZERO_CHUNK_LEN
        zero = _ZERO_CHUNK
        torn_end = pos
        a = pos
        size = self.file_size
        mm = self._mm if self._mm is not None else self._mapped()
        while a < size:
            data = self._next_data(a)  # a hole reads as zeros: jump over it
            if data >= size:
                break
            a = max(a, data - data % chunk)
            b = min(size, (a // chunk + 1) * chunk)
            if mm[a:b] != zero[: b - a]:  # mmap slices compare by memcmp
                mm[a:b] = zero[: b - a]  # non-zero bytes are allocated: no hole is hit
                torn_end = b
            a = b
        self.wrote_position = pos
        self.flushed_position = min(self.flushed_position, pos)
        return torn_end - pos

    def _next_data(self, pos: int) -> int:
        """Where the first byte that may be non-zero at or after ``pos`` is (``SEEK_DATA``;
        ``file_size`` when only holes follow, ``pos`` where holes cannot be told)."""
        if pos >= self.file_size:
            return self.file_size
        shared = self._shared_fd()
        try:
            fd = shared if shared >= 0 else os.open(self.path, os.O_RDONLY)
        except OSError:
            return pos
        try:
            return os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            return self.file_size if e.errno == errno.ENXIO else pos
        finally:
            if shared < 0:
                os.close(fd)

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
        mm = self._mm
        if mm is None:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            return
        self.view.release()
        # A reader still holding an exported view keeps the mapping alive: leave it
        # to the GC rather than invalidating memory under it.
        with contextlib.suppress(BufferError):
            mm.close()
        self.unmap()

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return (
            f"MappedFile({self.path.name}, wrote={self.wrote_position}, "
            f"flushed={self.flushed_position}, size={self.file_size})"
        )
