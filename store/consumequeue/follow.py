"""Following: a consume queue read by this process while another process writes it.

A mixin: :class:`~mqstore.consumequeue.queue.ConsumeQueue` inherits
:class:`FollowingMixin` and provides the queue state it uses (segments, lock,
offsets, ``unit_at``, ``_first_at_or_after``). When the dispatcher runs in a child
(``mqstore.consumequeue.process``) this process never writes a queue; it follows:

* :meth:`FollowingMixin.follow` advances the write position over the units the
  child wrote, up to the CommitLog offset it published as dispatched, mapping the
  queue's new files one at a time;
* :meth:`FollowingMixin.follow_min` recomputes the minimum from the units held,
  never from a previous minimum (files change under a reader that does not own them).

Contract: both take the queue's lock, run on the reading process only, and never
write a unit; a unit that is not whole yet (its record past the dispatched offset)
is not followed.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from mqstore.commitlog.mapped_file import MappedFile
from mqstore.commitlog.segments import Segments
from mqstore.consumequeue.format import BLANK_SIZE, UNIT_SIZE, unpack_unit

log = logging.getLogger("mqstore.consumequeue.queue")  # the queue's messages, as before


def is_blank(phys: int, size: int, tags: int) -> bool:
    return phys == 0 and size == BLANK_SIZE and tags == 0


class FollowingMixin:
    """follow and follow_min (mixed into ConsumeQueue)."""

    topic: str
    queue_id: int
    file_size: int
    segments: Segments
    min_logic_offset: int
    max_physic_offset: int
    followed: int
    _min_basis: tuple[int, int, int]
    _lock: threading.Lock

    if TYPE_CHECKING:  # provided by ConsumeQueue

        @property
        def max_offset(self) -> int: ...

        def unit_at(self, queue_offset: int) -> tuple[int, int, int] | None: ...

        def _first_at_or_after(self, low: int, high: int, physical_offset: int) -> int: ...

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
                view = last.view
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
            self.followed = dispatched

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
        phys, sz, _tags = unpack_unit(last.view, size - UNIT_SIZE)
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


__all__ = ["FollowingMixin", "is_blank"]
