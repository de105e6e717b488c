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

Thread-safety: one writer; structural changes (put, truncate, expiry) take the
queue's lock; readers use :meth:`units_from` / :meth:`unit_at` without it and get
``None`` when a file vanished under them.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from mqstore.commitlog.mapped_file import MappedFile
from mqstore.commitlog.segments import Segments
from mqstore.consumequeue.follow import FollowingMixin, is_blank
from mqstore.consumequeue.format import BLANK_UNIT, UNIT_SIZE, encode_unit, unpack_unit
from mqstore.consumequeue.upkeep import UnitCheck, UpkeepMixin

log = logging.getLogger(__name__)


class ConsumeQueue(FollowingMixin, UpkeepMixin):
    """The consume queue of one topic/queue in ``directory`` (read by another process
    while its dispatcher child writes it: :class:`~mqstore.consumequeue.follow.FollowingMixin`)."""

    def __init__(self, directory: Path, topic: str, queue_id: int, file_size: int) -> None:
        if file_size <= 0 or file_size % UNIT_SIZE:
            raise ValueError(f"consume queue file size {file_size} is not a multiple of 20")
        self.topic = topic
        self.queue_id = queue_id
        self.directory = directory
        self.file_size = file_size
        self.units_per_file = file_size // UNIT_SIZE
        self.segments = Segments(directory, file_size)
        self.min_logic_offset = 0
        self.max_physic_offset = 0
        self.followed = -1
        """The dispatched offset :meth:`follow` last caught up with (-1: never)."""
        self._min_basis: tuple[int, int, int] = (-1, -1, -1)
        """Following: (CommitLog start, first file held, max offset) the minimum was
        computed from (:meth:`follow_min`)."""
        self._lock = threading.Lock()

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

    def recover(self) -> int:
        """Find the end of the valid units and cut what follows; return the end (bytes).

        The scan starts at the third-to-last file (older files were flushed long
        ago) and stops at the first unit with ``offset < 0`` or ``size <= 0``; a
        fully valid file continues into the next. Files after the end are deleted
        and the rest of the containing file is zeroed.
        """
        files = self.segments.files
        if not files:
            return 0
        index = max(0, len(files) - 3)
        end = files[index].file_from_offset
        max_phys = 0
        while index < len(files):
            mf = files[index]
            pos = 0
            view = mf.view
            size = self.file_size
            while pos < size:
                phys, sz, tags = unpack_unit(view, pos)
                if phys < 0 or sz <= 0:
                    break
                if not is_blank(phys, sz, tags):
                    max_phys = phys + sz
                pos += UNIT_SIZE
            end = mf.file_from_offset + pos
            if pos < size:
                break
            index += 1
        self.segments.truncate_to(end)
        last = self.segments.last
        if last is not None and last.file_from_offset <= end:
            last.set_positions(end - last.file_from_offset)
        self.segments.flushed_where = end
        if max_phys == 0:
            max_phys = self._last_real_end()
        self.max_physic_offset = max_phys
        self.min_logic_offset = min(max(self.min_logic_offset, self.segments.min_offset), end)
        return end

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
            segs = self.segments
            mf = segs.last_for_write(expected)
            if mf.wrote_position == 0 and len(segs.files) == 1:
                if expected >= mf.file_from_offset + self.file_size:
                    # An empty only file (left by a truncation) before the unit's file:
                    # start the queue at the right file instead of padding up to it.
                    segs.truncate_to(mf.file_from_offset - 1)
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
            mf.append(encode_unit(physical_offset, size, tags_code))
            self.max_physic_offset = physical_offset + size
        return True

    def _fill_blank(self, mf: MappedFile, until: int) -> None:
        mf.append(BLANK_UNIT * ((until - mf.wrote_position) // UNIT_SIZE))

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
            return unpack_unit(mf.view, pos)
        except ValueError:  # the file was closed under us (expired)
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
            return mf.view[pos:end]
        except ValueError:
            return None

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

    @property
    def flushed_all(self) -> bool:
        """True when every written unit is on disk."""
        return self.segments.flushed_where >= self.segments.max_offset

    def close(self) -> None:
        """Unmap the files."""
        self.segments.close()

    def destroy(self) -> None:
        """Delete every file of the queue (a CommitLog with no files)."""
        with self._lock:
            for mf in list(self.segments.files):
                mf.destroy()
            self.segments.files.clear()
            self.segments.close()
            self.segments = Segments(self.directory, self.file_size)
            self.min_logic_offset = 0
            self.max_physic_offset = 0

    def __repr__(self) -> str:
        return (
            f"ConsumeQueue({self.topic}-{self.queue_id}, min={self.min_offset}, "
            f"max={self.max_offset}, files={len(self.segments.files)})"
        )


__all__ = ["ConsumeQueue", "UnitCheck", "is_blank"]
