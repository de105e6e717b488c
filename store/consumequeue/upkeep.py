"""Upkeep of a consume queue its process writes: cutting a dirty tail, expiring files.

A mixin: :class:`~mqstore.consumequeue.queue.ConsumeQueue` inherits
:class:`UpkeepMixin` and provides the queue state it uses (segments, lock, offsets,
``unit_at``, ``_first_at_or_after``, ``_last_real_end``). These are the writer's
structural repairs, run by recovery (:meth:`UpkeepMixin.truncate_dirty`) and by
cleanup or the dispatcher child (:meth:`UpkeepMixin.delete_expired`,
:meth:`UpkeepMixin.correct_min_offset`); each takes the queue's lock. A process that
only follows the queue (``mqstore.consumequeue.follow``) never calls them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from mqstore.commitlog.mapped_file import MappedFile
from mqstore.commitlog.segments import Segments
from mqstore.consumequeue.follow import is_blank
from mqstore.consumequeue.format import UNIT_SIZE, unpack_unit

if TYPE_CHECKING:
    from mqstore.consumequeue.queue import ConsumeQueue

log = logging.getLogger("mqstore.consumequeue.queue")  # the queue's messages, as before

UnitCheck = Callable[["ConsumeQueue", int, tuple[int, int, int]], bool]
"""(queue, queue offset, unit) -> whether the unit matches its CommitLog record."""


class UpkeepMixin:
    """truncate_dirty, delete_expired and correct_min_offset (mixed into ConsumeQueue)."""

    topic: str
    queue_id: int
    file_size: int
    segments: Segments
    min_logic_offset: int
    max_physic_offset: int
    _lock: threading.Lock

    if TYPE_CHECKING:  # provided by ConsumeQueue

        @property
        def max_offset(self) -> int: ...

        @property
        def min_offset(self) -> int: ...

        def unit_at(self, queue_offset: int) -> tuple[int, int, int] | None: ...

        def _first_at_or_after(self, low: int, high: int, physical_offset: int) -> int: ...

        def _last_real_end(self) -> int: ...

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
            top = self.max_offset
            low = self.segments.min_offset // UNIT_SIZE
            cut = top
            torn = False
            while cut > low:
                u = self.unit_at(cut - 1)
                if u is None or is_blank(*u):
                    break
                if u[0] < physical_offset:
                    if verify is None or verify(cast("ConsumeQueue", self), cut - 1, u):
                        break
                    torn = True
                cut -= 1
            if cut < top:
                self.segments.truncate_to(cut * UNIT_SIZE)
            self.max_physic_offset = self._last_real_end()
            self.min_logic_offset = min(self.min_logic_offset, cut * UNIT_SIZE)
        if torn:
            log.warning(
                "consume queue %s-%d: torn units cut from %d", self.topic, self.queue_id, cut
            )
            return self.max_physic_offset
        return None

    def delete_expired(self, min_physical_offset: int) -> int:
        """Delete leading files whose last unit points below ``min_physical_offset``,
        always keeping the last file; then correct the minimum. Returns files deleted."""

        def expired(mf: MappedFile) -> bool:
            if mf.wrote_position < self.file_size:
                return False
            try:
                phys, _size, _tags = unpack_unit(mf.view, self.file_size - UNIT_SIZE)
            except ValueError:
                return False
            return phys < min_physical_offset

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
