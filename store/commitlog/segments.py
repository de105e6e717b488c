"""The ordered list of segments of one log (RocketMQ ``MappedFileQueue``).

Segments are contiguous: segment *i* starts at ``first.start + i * file_size``. The
last segment is the only one written to. ``flushed_where`` is the log-wide offset up
to which data is durable; a flush works on the one segment containing it (as
RocketMQ does), and moves on to the next segment once that one is full and flushed.

Thread-safety: structural changes (roll, truncate, delete) happen under the owner's
put lock; ``find`` may race with ``delete_expired``, which is why readers copy bytes
out (``read``) or tolerate ``None``.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from mqstore import _platform
from mqstore.commitlog.mapped_file import MappedFile, name_to_offset, offset_to_name
from mqstore.errors import SegmentLoadError

log = logging.getLogger(__name__)


class Segments:
    """Ordered segments of one directory, all ``file_size`` bytes.

    ``reserve_chunk`` (0: allocate each file in full when created) makes new files
    sparse, reserving at most that much ahead of writes (:class:`MappedFile`); ``lazy``
    opens files unmapped, for an owner that maps them on use, and maps them without
    readahead (consume queues: many small files, a few units touched in each).
    """

    # Slots keep a queue's Segments small (a store may hold 100,000); "__dict__" still
    # lets a test replace a method on one instance (its dict is made only then).
    __slots__ = (
        "__dict__",
        "_starts",
        "directory",
        "durable_entries",
        "file_size",
        "files",
        "fill_gaps",
        "flushed_store_timestamp",
        "flushed_where",
        "lazy",
        "on_create",
        "patched",
        "reserve_chunk",
    )

    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        reserve_chunk: int = 0,
        lazy: bool = False,
        durable_entries: bool = False,
        fill_gaps: bool = False,
        on_create: Callable[[], object] | None = None,
    ) -> None:
        self.directory = directory
        self.file_size = file_size
        self.reserve_chunk = reserve_chunk
        self.lazy = lazy
        self.files: list[MappedFile] = []
        self._starts: list[int] = []
        self.flushed_where = 0
        self.flushed_store_timestamp = 0
        self.on_create = on_create
        """Called after a segment is created (the store's disk check: per file, not per put)."""
        self.durable_entries = durable_entries
        """Sync the directory (and create it durably) when a segment file is created: on
        for the CommitLog, whose acknowledged data must be reachable after a power loss;
        off for files that recovery rebuilds (consume queues)."""
        self.patched: list[int] = []
        """Starts of the files :meth:`load` extended or created with zeros (recovery
        scans from the first, so what they lost is found)."""
        self.fill_gaps = fill_gaps
        """At load, put a zero-filled file where a segment is missing between two others
        (logged), so the log opens and recovery fences that range off, instead of
        refusing to open (the CommitLog with ``recovery_policy`` KEEP)."""

    # ------------------------------------------------------------------ loading

    def load(self) -> None:
        """Map every segment file, sorted by name; positions start at "full".

        A zero-length *last* file (a crash during creation) is deleted; with
        ``durable_entries`` and ``fill_gaps`` a file cut short by a power loss is extended
        with zeros;
        with ``fill_gaps`` a missing file between two others is created zero-filled.

        Raises:
            SegmentLoadError: a file with a bad name or size, or a gap between files.
        """
        entries = self._listing()
        for i, entry in enumerate(entries):
            name = entry.name
            path = self.directory / name
            if not entry.is_file():
                continue
            if not (len(name) == 20 and name.isdigit()):
                raise SegmentLoadError(f"{path}: unexpected file in segment directory")
            st: os.stat_result | None = entry.stat()  # one stat: the MappedFile takes it
            size = entry.stat().st_size
            if i == len(entries) - 1 and size == 0:
                path.unlink()
                continue
            if size < self.file_size and self.durable_entries and self.fill_gaps:
                # A power loss can leave a segment shorter than it was allocated: its size
                # is metadata, durable only through a sync. What is there is what was
                # synced; the rest reads as never written, and recovery cuts the log
                # where the records stop (or, past damage, fences it off). RocketMQ's
                # policy (no fill_gaps) refuses such a file instead.
                log.warning(
                    "%s: %d bytes, not %d: extended with zeros (power loss?)",
                    path,
                    size,
                    self.file_size,
                )
                os.truncate(path, self.file_size)
                self.patched.append(name_to_offset(name))
                st = None
            if self.fill_gaps and self.files:
                self._fill_gap(self.files[-1].file_from_offset + self.file_size,
                               name_to_offset(name))  # fmt: skip
            mf = self._open(path, create=False, st=st)
            if (
                self.files
                and mf.file_from_offset != self.files[-1].file_from_offset + self.file_size
            ):
                mf.close()
                raise SegmentLoadError(
                    f"{path}: starts at {mf.file_from_offset}, expected "
                    f"{self.files[-1].file_from_offset + self.file_size} (a segment is missing)"
                )
            if mf.file_from_offset % self.file_size:
                mf.close()
                raise SegmentLoadError(f"{path}: start is not a multiple of {self.file_size}")
            self._add(mf)

    def _listing(self) -> list[os.DirEntry[str]]:
        """The directory's entries by name (hidden ones left out), creating it if
        needed; an existing directory of files not kept durable costs one scandir."""
        if self.durable_entries:
            self._make_directory()
        try:
            with os.scandir(self.directory) as it:
                entries = [e for e in it if not e.name.startswith(".")]
        except FileNotFoundError:
            self._make_directory()
            entries = []
        return sorted(entries, key=_entry_name)

    def _fill_gap(self, expected: int, start: int) -> None:
        """Create zero-filled (sparse) segments for [``expected``, ``start``), if any."""
        if start <= expected or (start - expected) % self.file_size:
            return
        log.warning(
            "CommitLog segments missing from %d to %d (%d files): zero-filled files put in "
            "their place, recovery fences the range off", expected, start,
            (start - expected) // self.file_size,
        )  # fmt: skip
        for offset in range(expected, start, self.file_size):
            path = self.directory / offset_to_name(offset)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.ftruncate(fd, self.file_size)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._add(self._open(path, create=False))
            self.patched.append(offset)
        _platform.fsync_dir(self.directory)

    def _open(self, path: Path, *, create: bool, st: os.stat_result | None = None) -> MappedFile:
        lazy = self.lazy
        return MappedFile(path, self.file_size, create=create, reserve_chunk=self.reserve_chunk,
                          mapped=not lazy, random_access=lazy, st=st)  # fmt: skip

    def _add(self, mf: MappedFile) -> None:
        self.files.append(mf)
        self._starts.append(mf.file_from_offset)

    # ------------------------------------------------------------------ access

    @property
    def last(self) -> MappedFile | None:
        """The segment being written, if any."""
        return self.files[-1] if self.files else None

    @property
    def min_offset(self) -> int:
        """Start of the first segment (0 when empty)."""
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """One past the last written byte."""
        last = self.last
        return last.file_from_offset + last.wrote_position if last else 0

    def roll_next_offset(self, offset: int) -> int:
        """Start of the segment after the one containing ``offset``."""
        return offset + self.file_size - offset % self.file_size

    def find(self, offset: int) -> MappedFile | None:
        """The segment containing log offset ``offset``, or None."""
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        try:
            mf = self.files[i]
        except IndexError:
            return None
        if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
            return mf
        return None

    def find_cut(self, offset: int) -> MappedFile | None:
        """The segment a cut at ``offset`` falls in: the one containing it, else the
        last one when ``offset`` is its end (a full last segment); None otherwise."""
        cut = self.find(offset)
        if cut is None and self.files:
            last = self.files[-1]
            if offset == last.file_from_offset + self.file_size:
                return last
        return cut

    def create(self, start_offset: int) -> MappedFile:
        """Create and append a new segment starting at ``start_offset`` (allocated in
        full, or sparse with ``reserve_chunk``).

        Raises:
            OSError: allocation failed (the partial file is removed).
        """
        if start_offset % self.file_size:
            raise ValueError(f"segment start {start_offset} is not a multiple of {self.file_size}")
        if self.files and start_offset != self.files[-1].file_from_offset + self.file_size:
            raise ValueError(f"segment start {start_offset} would leave a gap")
        self._make_directory()
        mf = self._open(self.directory / offset_to_name(start_offset), create=True)
        if self.durable_entries:  # before any acknowledgement can rest on the new file
            _platform.fsync_dir(self.directory)
        self._add(mf)
        if self.on_create is not None:
            self.on_create()
        return mf

    def _make_directory(self) -> None:
        if self.durable_entries:
            _platform.make_dirs_durable(self.directory)
        else:
            self.directory.mkdir(parents=True, exist_ok=True)

    def last_for_write(self, start_offset: int = 0) -> MappedFile:
        """The last segment if it has room, else a newly created next one.

        With no segments, the first starts at ``start_offset`` rounded down to a
        segment boundary.
        """
        last = self.last
        if last is None:
            return self.create(start_offset - start_offset % self.file_size)
        if last.is_full:
            return self.create(last.file_from_offset + self.file_size)
        return last

    # ----------------------------------------------------------------- flushing

    def flush(self, least_pages: int) -> bool:
        """Flush the segment containing ``flushed_where`` if due; True if progress.

        Raises:
            OSError: from ``fdatasync``; ``flushed_where`` does not move.
        """
        mf = self.find(self.flushed_where)
        if mf is None:
            mf = self.files[0] if self.files and self.flushed_where < self.min_offset else None
            if mf is None:
                return False
        if not mf.able_to_flush(least_pages):
            if (
                mf.is_full
                and mf.flushed_position >= mf.file_size
                and self.flushed_where < mf.file_from_offset + mf.file_size
            ):
                self.flushed_where = mf.file_from_offset + mf.file_size
                return True
            return False
        ts = mf.last_store_timestamp
        pos = mf.flush()
        before = self.flushed_where
        self.flushed_where = mf.file_from_offset + pos
        if least_pages == 0 and ts:
            self.flushed_store_timestamp = ts
        return self.flushed_where > before

    def flush_all(self) -> None:
        """Flush until everything written is durable (shutdown, thorough flush), and
        take the last record's store time as the flushed one: the checkpoint's
        physicMsgTimestamp must cover every record once all are synced, also when the
        periodic flushes (``least_pages`` > 0, which leave the time alone) had already
        synced the last bytes, or recovery would take the records after a missing or
        damaged range for a torn tail."""
        while self.flushed_where < self.max_offset and self.flush(0):
            pass
        # The time first, the end second: a put between them moves the end past what was
        # flushed, and its time is then not taken.
        ts = next(
            (f.last_store_timestamp for f in reversed(self.files) if f.last_store_timestamp), 0
        )
        if ts > self.flushed_store_timestamp and self.flushed_where >= self.max_offset:
            self.flushed_store_timestamp = ts

    # --------------------------------------------------------------- truncation

    def truncate_to(self, offset: int) -> int:
        """Drop everything at and after ``offset``; return roughly the bytes dropped.

        Segments starting after ``offset`` are deleted (counted whole); the
        containing segment is zeroed from the cut (counted up to its last non-zero
        chunk) and its positions set there.
        """
        dropped = 0
        while self.files and self.files[-1].file_from_offset > offset:
            mf = self.files.pop()
            self._starts.pop()
            dropped += mf.file_size
            mf.destroy()
        cut = self.find_cut(offset)
        if cut is not None:
            dropped += cut.truncate_to(offset - cut.file_from_offset)
        self.flushed_where = min(self.flushed_where, offset)
        return dropped

    def delete_expired(
        self,
        *,
        expired_before_ms: int,
        keep_last: int = 1,
        max_delete: int = 10,
        can_delete: Callable[[MappedFile], bool] | None = None,
    ) -> list[Path]:
        """Delete the oldest segments last modified before ``expired_before_ms``.

        The last ``keep_last`` segments are never deleted. ``can_delete`` lets the
        caller veto a file (e.g. still being read). Returns the deleted paths.
        """
        deleted: list[Path] = []
        while len(self.files) > keep_last and len(deleted) < max_delete:
            mf = self.files[0]
            mtime_ms = int(os.stat(mf.path).st_mtime * 1000)
            if mtime_ms >= expired_before_ms or (can_delete is not None and not can_delete(mf)):
                break
            self.files.pop(0)
            self._starts.pop(0)
            mf.destroy()
            deleted.append(mf.path)
        return deleted

    # ------------------------------------------------- another process writes

    def map_new_files(self, *, position: int | None = None, max_files: int | None = None) -> int:
        """Map segment files another process created after the last one held.

        For a reader whose writer is another process (``dispatch_process``): the
        files after the last one mapped, in order and contiguous, each at the
        configured size (a file still being created is left for the next call), at
        most ``max_files`` of them. With none held, listed files deleted meanwhile are
        skipped. New files start at ``position`` (default: full).
        Nothing is ever deleted. Returns the number of files mapped.
        """
        try:
            names = sorted(n for n in os.listdir(self.directory) if len(n) == 20 and n.isdigit())
        except FileNotFoundError:
            return 0
        added = 0
        for name in names:
            if max_files is not None and added >= max_files:
                break
            start = name_to_offset(name)
            if self.files and start <= self.files[-1].file_from_offset:
                continue
            if self.files and start != self.files[-1].file_from_offset + self.file_size:
                break
            path = self.directory / name
            try:
                if os.stat(path).st_size != self.file_size:
                    break
                mf = self._open(path, create=False)
            except FileNotFoundError:
                if self.files:
                    break
                # Deleted since listed (expired: the writer deletes oldest first):
                # with nothing held yet, the next file listed is the first one left.
                continue
            except (OSError, SegmentLoadError):
                break
            if position is not None:
                mf.set_positions(position)
            self._add(mf)
            added += 1
        return added

    def forget_before(self, offset: int, *, keep: int = 1) -> int:
        """Unmap (never delete) leading files that end at or before ``offset``, or
        whose file another process deleted, keeping the last ``keep``. Returns files
        dropped."""
        dropped = 0
        while len(self.files) > keep and (
            self.files[0].file_from_offset + self.file_size <= offset
            or not self.files[0].path.exists()
        ):
            self._starts.pop(0)
            self.files.pop(0).close()
            dropped += 1
        return dropped

    def close(self) -> None:
        """Unmap every segment."""
        for mf in self.files:
            mf.close()
        self.files.clear()
        self._starts.clear()

    def names(self) -> list[str]:
        """File names in order (diagnostics)."""
        return [mf.path.name for mf in self.files]


def _entry_name(entry: os.DirEntry[str]) -> str:
    return entry.name


def now_ms() -> int:
    """Wall-clock milliseconds, as RocketMQ stores timestamps."""
    return time.time_ns() // 1_000_000


__all__ = ["Segments", "name_to_offset", "now_ms", "offset_to_name"]
