"""One consume queue: the 20-byte units of one (topic, queueId), over a :class:`Segments`.

Unit N (queue offset N) sits at logical byte N x 20, in the file named by its first
logical byte (``mqstore.consumequeue.format``); files are ``file_size`` bytes and
contiguous, so the queue is an array indexed by queue offset whose head may be
deleted (expired) and whose first file may start with blank pre-fill units.

Invariants (RocketMQ ``ConsumeQueue``):

* ``max_offset`` = (last file start + its write position) / 20: the next unit's number.
* ``min_offset`` = ``min_logic_offset`` / 20: the first unit pointing at a message the
  CommitLog still holds (``correct_min_offset``) or the first real unit after the
  pre-fill.
* Units are written in queue-offset order by one writer (the dispatcher, or recovery
  before it starts). A unit that is already there is skipped, so re-dispatching a
  stretch of the CommitLog is harmless (:meth:`put`).
* Real units point at strictly increasing physical offsets, which is what the binary
  searches (``correct_min_offset``, ``offset_by_time``) rely on. Blank units
  ``(0, 0x7FFFFFFF, 0)`` point at nothing and only ever precede real ones.

Deviations from RocketMQ, each to keep "unit N at byte N x 20" and "a blank is not a
message" true: a gap between the expected and the current write position is padded
with blank units (RocketMQ logs and appends at the current position, shifting every
later unit); blank units never count towards ``max_physic_offset`` (in RocketMQ a
blank gives 0x7FFFFFFF, which would make later puts look like duplicates) nor as the
minimum offset.

Two roles over the same state, never both in one process: the *writer* (the
dispatcher, or recovery before it starts) puts units and does the structural repairs
(:meth:`ConsumeQueue.truncate_dirty`, :meth:`ConsumeQueue.delete_expired`,
:meth:`ConsumeQueue.correct_min_offset`); a *follower* (a process whose dispatcher
runs in a child, ``mqstore.consumequeue.process``) never writes a unit and advances
over what the child wrote (:meth:`ConsumeQueue.follow`,
:meth:`ConsumeQueue.follow_min`).

Cost: a queue is cheap to hold. Its files are sparse (sized, allocated as units are
written: ``RESERVE_CHUNK`` is reserved ahead of the write position, so a full disk is
an ``OSError`` from :meth:`ConsumeQueue.put`, never SIGBUS) and opened unmapped;
every access to their bytes goes through the store's :class:`MappingPool`, which
keeps a bounded number of files mapped. An idle queue holds no mapping and no
descriptor.

Thread-safety: one writer; structural changes (put, truncate, expiry, following)
take the queue's lock; readers use :meth:`ConsumeQueue.units_from` /
:meth:`ConsumeQueue.unit_at` without it and get ``None`` when a file vanished under
them.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mqstore.commitlog.dispatch_rule import UNIT_DTYPE
from mqstore.commitlog.mapped_file import MappedFile
from mqstore.commitlog.segments import Segments
from mqstore.config import OS_PAGE_SIZE
from mqstore.consumequeue.format import (
    BLANK_SIZE,
    BLANK_UNIT,
    UNIT_SIZE,
    encode_unit,
    is_blank,
    iter_units,
    pack_unit,
    unpack_unit,
)
from mqstore.consumequeue.mappings import MappingPool
from mqstore.consumequeue.summary import QueueSummary

log = logging.getLogger(__name__)

assert UNIT_DTYPE.itemsize == UNIT_SIZE
RESERVE_CHUNK = OS_PAGE_SIZE
"""Disk reserved ahead of a queue file's write position (one page: 204 units)."""

UnitCheck = Callable[["ConsumeQueue", int, tuple[int, int, int]], bool]
"""(queue, queue offset, unit) -> whether the unit matches its CommitLog record."""


def _written_part(mf: MappedFile) -> bytes:
    """The file's bytes up to its first hole, whole units only (``pread``)."""
    fd = os.open(mf.path, os.O_RDONLY)
    try:
        try:
            length = os.lseek(fd, 0, os.SEEK_HOLE)
        except OSError:
            length = mf.file_size
        length = min(length, mf.file_size)
        data = os.pread(fd, length, 0)
    finally:
        os.close(fd)
    return data[: len(data) - len(data) % UNIT_SIZE]


class ConsumeQueue:
    """The consume queue of one topic/queue in ``directory``.

    ``pool`` maps its files on use (the store's shared pool; a queue made on its
    own gets a small private one).
    """

    __slots__ = (
        "_head",
        "_lock",
        "_min_basis",
        "_min_unit",
        "_pool",
        "directory",
        "file_size",
        "followed",
        "max_physic_offset",
        "min_logic_offset",
        "queue_id",
        "segments",
        "topic",
        "units_per_file",
    )

    def __init__(
        self,
        directory: Path,
        topic: str,
        queue_id: int,
        file_size: int,
        pool: MappingPool | None = None,
    ) -> None:
        if file_size <= 0 or file_size % UNIT_SIZE:
            raise ValueError(f"consume queue file size {file_size} is not a multiple of 20")
        self.topic = topic
        self.queue_id = queue_id
        self.directory = directory
        self.file_size = file_size
        self.units_per_file = file_size // UNIT_SIZE
        self._pool = pool if pool is not None else MappingPool(8)
        self.segments = Segments(directory, file_size, reserve_chunk=RESERVE_CHUNK, lazy=True)
        self.min_logic_offset = 0
        self.max_physic_offset = 0
        self.followed = -1
        """The dispatched offset :meth:`follow` last caught up with (-1: never)."""
        self._min_basis: tuple[int, int, int] = (-1, -1, -1)
        """Following: (CommitLog start, first file held, max offset) the minimum was
        computed from (:meth:`follow_min`)."""
        self._lock = threading.Lock()
        self._head: tuple[int, int, int, int] | None = None
        self._min_unit: tuple[int, int] = (-1, -1)
        """(logical offset, physical offset) of a unit known without reading it: the
        minimum's, when the offset still equals ``min_logic_offset`` (for
        :meth:`summary`, which a close calls for every queue)."""
        """(logical offset, unit) of the queue's first unit as :meth:`recover` read it,
        for the :meth:`correct_min_offset` that follows (used once)."""

    def _view(self, mf: MappedFile) -> memoryview:
        """The file's bytes, mapped through the pool (valid even if unmapped later)."""
        return self._pool.view(mf)

    def _write(self, mf: MappedFile, data: bytes) -> None:
        """Append ``data`` at the file's write position, reserving disk first.

        Raises:
            OSError: ENOSPC reserving (nothing written), or the file cannot be mapped.
        """
        if not mf.is_mapped:
            # A file the pool does not map (a new queue's first units, or a queue
            # evicted from the pool: a store with more queues than mapped files, put
            # to round-robin): one pwrite, no mapping. Mapping it would evict another
            # queue's file, which the next put maps again: map, fault and unmap per unit.
            try:
                mf.write_unmapped(data)
                return
            except ValueError:  # a reader mapped it meanwhile: write through the mapping
                pass
        pos = mf.wrote_position
        end = pos + len(data)
        view = self._view(mf)  # mapped first: the reservation then uses its descriptor
        if end > mf.reserved:
            mf.reserve(end)
        view[pos:end] = data
        mf.wrote_position = end

    # ------------------------------------------------------------------ offsets

    @property
    def max_offset(self) -> int:
        """The queue offset the next unit gets (0 for a queue without files)."""
        return self.segments.max_offset // UNIT_SIZE

    @property
    def min_offset(self) -> int:
        """The first queue offset a consumer can read."""
        return self.min_logic_offset // UNIT_SIZE

    def roll_next_file(self, queue_offset: int) -> int:
        """First queue offset of the file after the one holding ``queue_offset``."""
        return queue_offset + self.units_per_file - queue_offset % self.units_per_file

    # ----------------------------------------------------------------- loading

    def load(self) -> None:
        """Map the queue's files (positions start "full"; :meth:`recover` corrects them).

        Raises:
            SegmentLoadError: a file with a bad name or size, or a missing file.
        """
        self.segments.load()
        self.min_logic_offset = self.segments.min_offset

    def recover(self, *, clean: bool = False) -> int:
        """Find the end of the valid units and cut what follows; return the end (bytes).

        The scan starts at the third-to-last file (older files were flushed long
        ago) and stops at the first unit with ``offset < 0`` or ``size <= 0``; a
        fully valid file continues into the next. Files after the end are deleted
        and the rest of the containing file is zeroed, unless the store was closed
        ``clean``-ly (nothing but zeros can follow the end then: units are written in
        order and every cut zeroes what it drops).

        The files are read, not mapped (a store opens thousands of queues), and only
        up to their first hole: what follows it reads as zeros.
        """
        files = self.segments.files
        if not files:
            return 0
        index = max(0, len(files) - 3)
        end = files[index].file_from_offset
        max_phys = 0
        self._head = None
        while index < len(files):
            mf = files[index]
            pos = 0
            size = self.file_size
            for phys, sz, tags in iter_units(_written_part(mf)):
                if phys < 0 or sz <= 0:
                    break
                if pos == 0 and mf is files[0]:
                    self._head = (mf.file_from_offset, phys, sz, tags)
                if not is_blank(phys, sz, tags):
                    max_phys = phys + sz
                pos += UNIT_SIZE
            end = mf.file_from_offset + pos
            if pos < size:
                break
            index += 1
        if not clean or files[-1].file_from_offset > end:
            self._truncate_to(end)
        last = self.segments.last
        if last is not None and last.file_from_offset <= end:
            last.set_positions(end - last.file_from_offset)
        self.segments.flushed_where = end
        if max_phys == 0:
            max_phys = self._last_real_end()
        self.max_physic_offset = max_phys
        self.min_logic_offset = min(max(self.min_logic_offset, self.segments.min_offset), end)
        return end

    def resume(self, end: int, max_physic_offset: int) -> bool:
        """Take the queue's end (logical bytes) and last CommitLog end from a clean
        close's summary instead of reading its files (:meth:`recover`); False, changing
        nothing, when ``end`` does not lie in the last file (the caller recovers)."""
        segs = self.segments
        last = segs.last
        if last is None or not (
            max(last.file_from_offset, segs.min_offset)
            <= end
            <= last.file_from_offset + self.file_size
        ):
            return False
        last.set_positions(end - last.file_from_offset)
        segs.flushed_where = end
        self._head = None
        self.max_physic_offset = max_physic_offset
        self.min_logic_offset = min(max(self.min_logic_offset, segs.min_offset), end)
        return True

    def _last_real_end(self) -> int:
        """End (offset + size) of the last non-blank unit, 0 if there is none."""
        off = self.max_offset - 1
        low = self.segments.min_offset // UNIT_SIZE
        while off >= low:
            u = self.unit_at(off)
            if u is None:
                return 0
            if not is_blank(*u):
                return u[0] + u[1]
            off -= 1
        return 0

    # ------------------------------------------------------------------ writing

    def put(self, physical_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Write the unit for ``queue_offset``; False when it was already there.

        RocketMQ ``putMessagePositionInfo``: a unit whose ``offset + size`` does not
        pass the queue's recorded end, or whose position is below the write
        position, is a re-dispatch and skipped. The first unit of a queue's first
        file that does not start at offset 0 is preceded by blank pre-fill units
        and becomes the minimum offset.

        Raises:
            OSError: a new file could not be created.
        """
        if physical_offset + size <= self.max_physic_offset:
            return False
        expected = queue_offset * UNIT_SIZE
        with self._lock:
            files = self.segments.files
            if files:
                mf = files[-1]
                pos = mf.wrote_position
                if 0 < pos < self.file_size and mf.file_from_offset + pos == expected:
                    # The usual: the next unit, at the end of a started file.
                    self._write(mf, pack_unit(physical_offset, size, tags_code))
                    self.max_physic_offset = physical_offset + size
                    if expected == self.min_logic_offset:
                        self._min_unit = (expected, physical_offset)
                    return True
            segs = self.segments
            mf = segs.last_for_write(expected)
            if mf.wrote_position == 0 and len(segs.files) == 1:
                if expected >= mf.file_from_offset + self.file_size:
                    # An empty only file (left by a truncation) before the unit's file:
                    # start the queue at the right file instead of padding up to it.
                    self._truncate_to(mf.file_from_offset - 1)
                    mf = segs.last_for_write(expected)
                    segs.flushed_where = mf.file_from_offset
                if expected > mf.file_from_offset:
                    self._fill_blank(mf, expected - mf.file_from_offset)
                    self.min_logic_offset = expected
                elif expected == mf.file_from_offset:
                    self.min_logic_offset = max(self.min_logic_offset, expected)
            current = mf.file_from_offset + mf.wrote_position
            if expected < current:
                return False
            if expected > current:
                log.warning(
                    "consume queue %s-%d: unit %d expected at byte %d but the queue ends "
                    "at %d; padding the gap with blank units",
                    self.topic,
                    self.queue_id,
                    queue_offset,
                    expected,
                    current,
                )
                mf = self._pad_to(expected)
            self._write(mf, encode_unit(physical_offset, size, tags_code))
            self.max_physic_offset = physical_offset + size
            if expected == self.min_logic_offset:
                self._min_unit = (expected, physical_offset)
        return True

    def put_units(self, units: NDArray[Any], queue_offsets: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Write many units (``units``: big-endian records of physical offset, size and
        tags code, in queue-offset order); which were written (False: already there).

        The same as :meth:`put` unit after unit, with one write per file for each run of
        units that continues the queue at its end with consecutive offsets (the
        dispatcher's case); a unit that does not (a queue's first unit, with its pre-fill
        and minimum, a gap, a re-dispatch) goes through :meth:`put`, then runs resume.

        Raises:
            OSError: as :meth:`put` (the units before the failing write are written).
        """
        n = int(queue_offsets.size)
        written = np.zeros(n, np.bool_)
        done = 0
        breaks = np.flatnonzero(queue_offsets[1:] - queue_offsets[:-1] != 1) + 1
        for run_end in [*breaks.tolist(), n]:
            while done < run_end:
                k = self._append_run(units, int(queue_offsets[done]), done, run_end)
                if k:
                    written[done : done + k] = True
                    done += k
                    continue
                u = units[done]
                written[done] = self.put(
                    int(u["p"]), int(u["s"]), int(u["t"]), int(queue_offsets[done])
                )
                done += 1
        return written

    def _append_run(self, units: NDArray[Any], first: int, start: int, stop: int) -> int:
        """Append ``units[start:stop]`` (queue offsets ``first``, ``first + 1``, ...) at
        the queue's end, as many as its last file holds, in one write; how many (0 when
        :meth:`put` must judge ``units[start]``: a duplicate, a queue's first unit, a
        unit not at the end)."""
        with self._lock:
            if int(units["p"][start]) + int(units["s"][start]) <= self.max_physic_offset:
                return 0
            segs = self.segments
            expected = first * UNIT_SIZE
            mf = segs.last_for_write(expected)
            if mf.wrote_position == 0 and len(segs.files) == 1:
                return 0
            current = mf.file_from_offset + mf.wrote_position
            if current != expected:
                return 0
            k = min(stop - start, (mf.file_from_offset + self.file_size - current) // UNIT_SIZE)
            last = start + k - 1
            self._write(mf, units[start : start + k].tobytes())
            self.max_physic_offset = int(units["p"][last]) + int(units["s"][last])
            if expected <= self.min_logic_offset < expected + k * UNIT_SIZE:
                at = start + (self.min_logic_offset - expected) // UNIT_SIZE
                self._min_unit = (self.min_logic_offset, int(units["p"][at]))
            return k

    def _fill_blank(self, mf: MappedFile, until: int) -> None:
        self._write(mf, BLANK_UNIT * ((until - mf.wrote_position) // UNIT_SIZE))

    def _pad_to(self, expected: int) -> MappedFile:
        segs = self.segments
        while True:
            mf = segs.last_for_write(expected)
            current = mf.file_from_offset + mf.wrote_position
            stop = min(expected, mf.file_from_offset + self.file_size)
            if current < stop:
                self._fill_blank(mf, stop - mf.file_from_offset)
            if stop == expected:
                return mf

    # ------------------------------------------------------------------ reading

    def _file_of(self, queue_offset: int) -> tuple[MappedFile, int] | None:
        logical = queue_offset * UNIT_SIZE
        mf = self.segments.find(logical)
        if mf is None:
            return None
        return mf, logical - mf.file_from_offset

    def unit_at(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(physical offset, size, tags code) of unit ``queue_offset``; None if not held."""
        found = self._file_of(queue_offset)
        if found is None:
            return None
        mf, pos = found
        if pos + UNIT_SIZE > mf.wrote_position:
            return None
        try:
            return unpack_unit(self._view(mf), pos)
        except (ValueError, OSError):  # the file was closed or deleted under us (expired)
            return None

    def units_from(self, queue_offset: int) -> memoryview | None:
        """The written units from ``queue_offset`` to the end of its file, zero-copy.

        RocketMQ ``getIndexBuffer``: only the file holding ``queue_offset`` is
        returned; None when the offset is below the minimum, its file is gone, or
        nothing is written there. The view stays readable even if the file is
        deleted meanwhile (the mapping lives while views of it do).
        """
        if queue_offset < self.min_offset:
            return None
        found = self._file_of(queue_offset)
        if found is None:
            return None
        mf, pos = found
        end = mf.wrote_position
        if pos >= end:
            return None
        try:
            return self._view(mf)[pos:end]
        except (ValueError, OSError):
            return None

    def known_min_unit(self, logical: int, physical: int) -> None:
        """Record that the unit at logical byte ``logical`` points at ``physical``
        (the summary this queue was read from says so)."""
        self._min_unit = (logical, physical)

    def summary(self) -> QueueSummary:
        """The queue's state for the clean-close summary (``mqstore.consumequeue.summary``).

        The unit at the minimum is known when the queue wrote it or was read from a
        summary; else it is read from the mapping if the file is mapped, else with
        ``pread`` (a close must not map every queue it summarises).
        """
        low, top = self.min_offset, self.max_offset
        min_physical = -1
        known_at, known = self._min_unit
        if low < top and known_at == self.min_logic_offset:
            min_physical = known
        elif low < top:
            found = self._file_of(low)
            if found is not None:
                mf, pos = found
                if mf.is_mapped:
                    u = self.unit_at(low)
                    min_physical = u[0] if u is not None else -1
                else:
                    with open(mf.path, "rb", buffering=0) as f:
                        raw = os.pread(f.fileno(), UNIT_SIZE, pos)
                    if len(raw) == UNIT_SIZE:
                        min_physical = unpack_unit(raw, 0)[0]
        return QueueSummary(
            max_offset=top,
            min_offset=low,
            max_physic_offset=self.max_physic_offset,
            first_file=self.segments.min_offset,
            min_physical=min_physical,
        )

    def last_unit(self) -> tuple[int, int, int] | None:
        """The last unit written, if any."""
        top = self.max_offset
        return self.unit_at(top - 1) if top > 0 else None

    # --------------------------------------------------------------- min offset

    def _first_at_or_after(self, low: int, high: int, physical_offset: int) -> int:
        """Smallest queue offset in [low, high) whose real unit points at or past
        ``physical_offset`` (blank units count as before everything); ``high`` if none."""
        while low < high:
            mid = (low + high) // 2
            u = self.unit_at(mid)
            if u is None or is_blank(*u) or u[0] < physical_offset:
                low = mid + 1
            else:
                high = mid
        return low

    # ----------------------------------------------------------------- following

    def follow(self, dispatched: int) -> None:
        """Advance the write position over units another process wrote (a reader
        whose dispatcher runs in a child, ``mqstore.consumequeue.process``).

        A unit counts once its record ends at or before ``dispatched`` (the child
        publishes that offset after writing the units before it, so such a unit
        is whole); blank units count as they are found. The next file of the
        queue is mapped once the last one is followed to its end, one at a time:
        only the last file may hold units not followed yet (reads of the others
        trust their positions), and a file past the followed units may still be
        deleted by a restarted child cutting its predecessor's unpublished work.
        A new file whose last unit is already dispatched is whole: it is taken
        without scanning its units. When the child has deleted every file held here
        (expired: it deletes oldest first and keeps a queue's last file), following
        resumes at its first file left.
        """
        size = self.file_size
        with self._lock:
            segs = self.segments
            while True:
                last = segs.last
                if last is None or last.wrote_position >= size:
                    if not self._follow_next_file(last, dispatched):
                        break
                    continue
                try:
                    view = self._view(last)
                except FileNotFoundError:
                    # A file followed partly and unmapped since (the pool evicted
                    # it) was deleted by the child (expired, oldest first, so the
                    # files before it went too): resume at the first file left.
                    segs.forget_before(0, keep=0)
                    if segs.last is last:  # a file before it is still there
                        raise
                    continue
                pos = last.wrote_position
                while pos < size:
                    phys, sz, tags = unpack_unit(view, pos)
                    if not (is_blank(phys, sz, tags) or (sz > 0 and phys + sz <= dispatched)):
                        break
                    if sz != BLANK_SIZE:
                        self.max_physic_offset = phys + sz
                    pos += UNIT_SIZE
                last.set_positions(pos)
                if pos < size:
                    break
            if segs.last is not None:
                # Holding no file (every one listed was deleted meanwhile) follows
                # nothing: the next call must look again, at the same progress too.
                self.followed = dispatched

    def forget_deleted_files(self) -> int:
        """Following: unmap (never delete) the leading files the child deleted,
        keeping the last; returns files let go of."""
        with self._lock:
            gone = [m for m in self.segments.files[:-1] if not m.path.exists()]
            self._forget(gone)
            return self.segments.forget_before(0)

    def _follow_next_file(self, last: MappedFile | None, dispatched: int) -> bool:
        """:meth:`follow` past ``last`` (None: no file held, else followed to its end):
        map the queue's next file; False when there is none to follow yet."""
        segs = self.segments
        size = self.file_size
        if not segs.map_new_files(position=0, max_files=1):
            # Nothing follows the last file: not written yet, or every
            # file held here was deleted (checked after the attempt: the
            # child may delete them meanwhile); then resume at the first
            # file left.
            if last is None or last.path.exists():
                return False
            segs.forget_before(0, keep=0)
            return True
        self.min_logic_offset = max(self.min_logic_offset, segs.min_offset)
        last = segs.last
        assert last is not None
        try:
            view = self._view(last)
        except FileNotFoundError:
            # The child deleted it after it was listed (expired; it deletes oldest
            # first, so the files held before it are gone too): resume at the first
            # file left.
            segs.forget_before(0, keep=0)
            return True
        phys, sz, _tags = unpack_unit(view, size - UNIT_SIZE)
        if sz > 0 and sz != BLANK_SIZE and phys + sz <= dispatched:
            self.max_physic_offset = phys + sz
            last.set_positions(size)
        return True

    def follow_min(self, min_physical_offset: int) -> None:
        """Following: the minimum as a function of what is held, recomputed when that
        changed: the first unit (not blank) pointing at or past ``min_physical_offset``
        among the units held, else the maximum (nothing readable).

        Unlike :meth:`correct_min_offset` this never starts from the previous minimum:
        a reader's view of files another process writes and deletes changes under it,
        and a minimum computed from a partial view must not stick. It only searches
        when the CommitLog start or the first file held moved, or when nothing was
        readable and units were added since (new units point past older ones, so
        otherwise the minimum stands).
        """
        with self._lock:
            top = self.max_offset
            head = self.segments.min_offset
            low_phys, low_head, old_top = self._min_basis
            if (
                low_phys == min_physical_offset
                and low_head == head
                and (top == old_top or self.min_logic_offset < old_top * UNIT_SIZE)
            ):
                return
            low = head // UNIT_SIZE
            first = self._first_at_or_after(low, top, min_physical_offset)
            if not self._is_boundary(first, low, top, min_physical_offset):
                # A unit the search probed was not readable (a file changing under
                # it), so its answer may be anywhere, up to the maximum: scan unit by
                # unit instead, and search again next time rather than keep this.
                log.warning(
                    "consume queue %s-%d: minimum search for offset %d met unreadable "
                    "units (files %s, queue offsets %d-%d); scanning",
                    self.topic, self.queue_id, min_physical_offset,
                    [(m.path.name, m.wrote_position) for m in self.segments.files], low, top,
                )  # fmt: skip
                first = self._first_by_scan(low, top, min_physical_offset)
                self.min_logic_offset = first * UNIT_SIZE
                self._min_basis = (-1, -1, -1)
                return
            self.min_logic_offset = first * UNIT_SIZE
            self._min_basis = (min_physical_offset, head, top)

    def _is_boundary(self, q: int, low: int, high: int, physical_offset: int) -> bool:
        """Whether ``q`` is provably the answer of :meth:`_first_at_or_after`: unit
        ``q`` (unless ``high``) is readable and points at or past ``physical_offset``,
        and unit ``q - 1`` (unless ``low``) is readable and a blank or below it."""
        if q < high:
            u = self.unit_at(q)
            if u is None or is_blank(*u) or u[0] < physical_offset:
                return False
        if q > low:
            u = self.unit_at(q - 1)
            if u is None or not (is_blank(*u) or u[0] < physical_offset):
                return False
        return True

    def _first_by_scan(self, low: int, high: int, physical_offset: int) -> int:
        """:meth:`_first_at_or_after` unit by unit (no assumption about unreadable units)."""
        for q in range(low, high):
            u = self.unit_at(q)
            if u is not None and not is_blank(*u) and u[0] >= physical_offset:
                return q
        return high

    # ------------------------------------------------------------------- upkeep

    def correct_min_offset(self, min_physical_offset: int) -> None:
        """Move the minimum to the first unit pointing at or past ``min_physical_offset``.

        If even the last unit points below it the queue has no readable unit and
        the minimum becomes the maximum (RocketMQ 5.x).
        """
        with self._lock:
            top = self.max_offset
            low = max(self.min_offset, self.segments.min_offset // UNIT_SIZE)
            if low >= top:
                self.min_logic_offset = max(self.min_logic_offset, self.segments.min_offset)
                return
            head, self._head = self._head, None
            if head is not None and head[0] == low * UNIT_SIZE:
                u: tuple[int, int, int] | None = head[1:]  # read by recover(): no mapping
            else:
                u = self.unit_at(low)
            if u is not None and not is_blank(*u) and u[0] >= min_physical_offset:
                # Already right. Also the only safe answer when blank units sit in the
                # middle (a CommitLog damaged range fenced off), which the search below
                # takes for the leading pre-fill.
                self.min_logic_offset = low * UNIT_SIZE
                return
            first = self._first_at_or_after(low, top, min_physical_offset)
            self.min_logic_offset = first * UNIT_SIZE

    # ---------------------------------------------------------------- truncation

    def truncate_dirty(self, physical_offset: int, verify: UnitCheck | None = None) -> int | None:
        """Drop every unit pointing at or past ``physical_offset`` (a cut CommitLog tail).

        Units point at increasing offsets, so this cuts a suffix of the queue. With
        ``verify``, the cut also takes the units before it that fail the check, up to
        the first that passes: after a power loss the last unit on disk may be torn
        (sectors of one unit from before and after the write), and a torn unit can
        look valid. Returns, when such units were cut, the CommitLog offset from
        which their records must be dispatched again (the end of the last good
        unit), else None.
        """
        with self._lock:
            self._head = None
            top = self.max_offset
            cut, torn = self._dirty_from(physical_offset, verify)
            if cut < top:
                self._truncate_to(cut * UNIT_SIZE)
            self.max_physic_offset = self._last_real_end()
            self.min_logic_offset = min(self.min_logic_offset, cut * UNIT_SIZE)
        if torn:
            log.warning(
                "consume queue %s-%d: torn units cut from %d", self.topic, self.queue_id, cut
            )
            return self.max_physic_offset
        return None

    def _dirty_from(self, physical_offset: int, verify: UnitCheck | None) -> tuple[int, bool]:
        """Where :meth:`truncate_dirty` cuts, and whether a unit before
        ``physical_offset`` failed ``verify`` on the way.

        The walk back from the last unit stops at the first unit (from the end) that
        is unreadable, blank, or points before ``physical_offset`` and passes
        ``verify``; everything after it goes. A file at a time: its units are read as
        one array and only the units that may stop the walk are looked at one by
        one (after a crash the cut is usually many units back, in an earlier file).
        """
        low = self.segments.min_offset // UNIT_SIZE
        cut = self.max_offset
        torn = False
        while cut > low:
            found = self._file_of(cut - 1)
            if found is None:
                break
            mf, pos = found
            if pos + UNIT_SIZE > mf.wrote_position:
                break
            first = max(low, mf.file_from_offset // UNIT_SIZE)
            start = first * UNIT_SIZE - mf.file_from_offset
            try:
                units = np.frombuffer(
                    self._view(mf), UNIT_DTYPE, (pos + UNIT_SIZE - start) // UNIT_SIZE, start
                )
            except (ValueError, OSError):  # closed or deleted under us (expired)
                break
            try:
                phys, size, tags = (units[f].astype(np.int64) for f in ("p", "s", "t"))
            finally:
                del units  # no buffer export may outlive the read (the pool unmaps)
            blank = (phys == 0) & (size == BLANK_SIZE) & (tags == 0)
            stops = np.flatnonzero(blank | (phys < physical_offset))
            for j in range(stops.size - 1, -1, -1):
                k = int(stops[j])
                if blank[k]:
                    return first + k + 1, torn
                unit = (int(phys[k]), int(size[k]), int(tags[k]))
                if verify is None or verify(self, first + k, unit):
                    return first + k + 1, torn
                torn = True
            cut = first
        return cut, torn

    def delete_expired(self, min_physical_offset: int) -> int:
        """Delete leading files whose last unit points below ``min_physical_offset``,
        always keeping the last file; then correct the minimum. Returns files deleted."""

        def expired(mf: MappedFile) -> bool:
            if mf.wrote_position < self.file_size:
                return False
            try:
                phys, _size, _tags = unpack_unit(self._view(mf), self.file_size - UNIT_SIZE)
            except (ValueError, OSError):
                return False
            if phys < min_physical_offset:
                self._forget([mf])
                return True
            return False

        with self._lock:
            deleted = self.segments.delete_expired(
                expired_before_ms=1 << 62, keep_last=1, max_delete=1 << 30, can_delete=expired
            )
        if deleted:
            log.info(
                "consume queue %s-%d: deleted %d expired files",
                self.topic,
                self.queue_id,
                len(deleted),
            )
        self.correct_min_offset(min_physical_offset)
        return len(deleted)

    # ----------------------------------------------------------------- flushing

    def flush(self, least_pages: int) -> bool:
        """Flush due pages (every file up to the end when ``least_pages`` is 0).

        Raises:
            OSError: from ``fdatasync``.
        """
        segs = self.segments
        progressed = False
        while segs.flush(least_pages):
            progressed = True
            if least_pages and segs.flushed_where >= segs.max_offset:
                break
        return progressed

    def flushed_to(self, end: int) -> None:
        """Record that the queue's bytes up to logical byte ``end`` are on disk (synced
        by the caller for many files at once, ``syncfs``)."""
        with self._lock:
            segs = self.segments
            for mf in segs.files:
                rel = min(end - mf.file_from_offset, mf.wrote_position)
                mf.flushed_position = max(mf.flushed_position, rel)
            segs.flushed_where = max(segs.flushed_where, min(end, segs.max_offset))

    @property
    def flushed_all(self) -> bool:
        """True when every written unit is on disk."""
        return self.segments.flushed_where >= self.segments.max_offset

    def close(self) -> None:
        """Unmap the files (a file never mapped costs nothing here)."""
        self._forget(self.segments.files)
        self.segments.close()

    def _forget(self, files: list[MappedFile]) -> None:
        for mf in files:
            if mf.is_mapped:
                self._pool.forget(mf)

    def destroy(self) -> None:
        """Delete every file of the queue (a CommitLog with no files)."""
        with self._lock:
            self._forget(self.segments.files)
            for mf in list(self.segments.files):
                mf.destroy()
            self.segments.files.clear()
            self.segments.close()
            self.segments = Segments(
                self.directory, self.file_size, reserve_chunk=RESERVE_CHUNK, lazy=True
            )
            self.min_logic_offset = 0
            self.max_physic_offset = 0

    def _truncate_to(self, offset: int) -> None:
        """:meth:`Segments.truncate_to` with the cut file mapped through the pool."""
        segs = self.segments
        doomed = [m for m in segs.files if m.file_from_offset > offset]
        self._forget(doomed)
        cut = segs.find_cut(offset)
        if cut is not None:
            self._view(cut)
        segs.truncate_to(offset)

    def __repr__(self) -> str:
        return (
            f"ConsumeQueue({self.topic}-{self.queue_id}, min={self.min_offset}, "
            f"max={self.max_offset}, files={len(self.segments.files)})"
        )


__all__ = ["ConsumeQueue", "UnitCheck", "is_blank"]
