"""The timer service: timer messages into the wheel, and out when due.

One thread does RocketMQ 5's whole pipeline (``TimerMessageStore``'s enqueue-get,
enqueue-put, dequeue-get and dequeue-put services; docs/timer.md §3), round after round:

1. **Enqueue.** Read ``rmq_sys_wheel_timer`` queue 0 from the timer-queue offset. A
   record due before the write time (the current precision slot) is delivered at once
   (``TIMER_ENQUEUE_MS`` = ``Long.MAX_VALUE``); any other becomes a timer-log unit
   linked into its slot's chain (the unit names the slot's previous last unit; the
   slot's last position, count and, for a new slot, first position are updated). A
   due time two days (``timer_roll_window_slot`` slots) or more ahead waits in a slot
   at the window's end (half of it when the remainder would be under a third) with the
   roll magic.
2. **Dequeue.** While the read time is before the write time: walk the read-time slot's
   chain back from its last unit, then put each record in enqueue order: to its real
   topic, or, for a rolling unit, back into the timer topic (enqueued again later).
   The read time moves on one precision once every unit of the slot is put.
3. **Checkpoint** every ``timer_flush_interval_ms`` (1 s) and at stop: the timer log and
   the wheel are synced and ``timercheck`` written (read time, timer-log end, queue
   offset, and mqstore's extension: the CommitLog end, see below).
4. **Cleanup** every 30 s: a full timer-log file whose units were all due before the
   read time is deleted (RocketMQ deletes one once the CommitLog records it names are).

Crash recovery, so that nothing due is lost or put twice: the wheel, the log and the
checkpoint are consistent at each checkpoint, and the thread's work after one is
redone from it:

* the timer log is scanned from the checkpointed end; units found there (written after
  the checkpoint) are re-linked into their slots idempotently and the timer-queue offset
  moves past the records they name; a torn tail is cut;
* every put the timer service made after the checkpoint is a record at or after the
  checkpointed CommitLog end carrying ``TIMER_DEQUEUE_MS``. Their keys
  (:func:`~mqstore.timer.transform.delivery_key`) are counted, and while the redone
  work catches up with where the crash stopped it, a put whose key is counted is not
  made again (the count goes down instead). RocketMQ has no such step: it delivers
  the slots after the checkpoint again (at least once).

A checkpoint without the extension (a RocketMQ broker's) recovers RocketMQ's way.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mqstore.commitlog import format as fmt
from mqstore.errors import IllegalMessageError, IllegalTopicError
from mqstore.failures import FailureCounter
from mqstore.message import PROPERTY_REAL_TOPIC, Message
from mqstore.service import ServiceThread
from mqstore.status import PutStatus
from mqstore.timer import format as tf
from mqstore.timer.files import CheckpointFile, TimerLog, TimerWheel
from mqstore.timer.transform import (
    LONG_MAX,
    TIMER_OUT_MS,
    DeliveryKey,
    delivery_key,
    due_message,
)

log = logging.getLogger(__name__)

CLEANUP_INTERVAL_S = 30.0
"""How often timer-log files whose units are all past are looked for (RocketMQ: 30 s)."""
ENQUEUE_BATCH = 2048
"""Timer-queue records enqueued per round at most (so due slots are not kept waiting)."""
_RETRY_LATER = frozenset({
    PutStatus.SERVICE_NOT_AVAILABLE, PutStatus.CREATE_MAPPED_FILE_FAILED,
    PutStatus.OS_PAGE_CACHE_BUSY, PutStatus.UNKNOWN_ERROR,
})  # fmt: skip
"""``doPut``'s PUT_NEED_RETRY statuses; any other refusal drops the message (logged)."""


@dataclass(frozen=True, slots=True)
class TimerSettings:
    """Where the files are and RocketMQ's timer settings."""

    root: Path
    precision_ms: int = 1000
    roll_window_slots: int = 2 * 24 * 3600
    timer_log_file_size: int = 100 * 1024 * 1024
    flush_interval_ms: int = 1000


@dataclass(frozen=True, slots=True)
class TimerQueue:
    """How the service reads the store: the timer queue and the CommitLog."""

    bounds: Callable[[], tuple[int, int] | None]
    """(min, max) offsets of ``rmq_sys_wheel_timer`` queue 0, None before it exists."""
    unit_at: Callable[[int], tuple[int, int, int] | None]
    """Its unit (phys, size, tags code) at a queue offset."""
    read: Callable[[int, int], fmt.MessageRecord | None]
    """A CommitLog record by (offset, size)."""
    put: Callable[[Message], PutStatus]
    """The store's put."""
    log_end: Callable[[], int]
    """The CommitLog's end (max offset)."""
    scan_log: Callable[[int, int, Callable[[fmt.RecordInfo, int], None]], object]
    """Walk the CommitLog's records in [start, end)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TimerService(ServiceThread):
    """Timer messages from the timer queue into the wheel, and out to their topics."""

    name = "timer"

    def __init__(
        self, settings: TimerSettings, queue: TimerQueue, clock: Callable[[], int] = _now_ms
    ) -> None:
        """Open and recover the files if they exist (else on the first timer message).

        Raises:
            SegmentLoadError: a timer file has a bad name or size.
            OSError: the files cannot be opened.
        """
        super().__init__(0.1 * settings.precision_ms / 1000)
        self.s = settings
        self.q = queue
        self.clock = clock
        self.precision = settings.precision_ms
        self.log: TimerLog | None = None
        self.wheel: TimerWheel | None = None
        self.checkpoint_file = CheckpointFile(settings.root / "config" / "timercheck")
        self.read_ms = 0
        """The slot being read (``currReadTimeMs``): slots before it are done."""
        self.write_ms = 0
        """The current slot (``currWriteTimeMs``): what is due before it goes at once."""
        self.queue_offset = 0
        """The next timer-queue offset to enqueue (``currQueueOffset``)."""
        self.log_from = -1
        """The CommitLog end at the last checkpoint (the extension field)."""
        self._slot_done = 0
        """Units of the slot at ``read_ms`` already put (a round stopped inside it)."""
        self._done: Counter[DeliveryKey] = Counter()
        """Puts found made after the checkpoint: not to be made again."""
        self._catch_up: tuple[int, int] | None = None
        """(read time, queue offset) the redone work must reach before ``_done`` is dropped."""
        self._last_checkpoint = 0.0
        self._dirty = False
        """Units or slots written since the last checkpoint (the files need a sync)."""
        self._last_cleanup = 0.0
        self._file_due: dict[str, int] = {}
        """Latest due time of each full timer-log file (its name), once read."""
        self._counter = 0
        self.enqueued = 0
        self.delivered = 0
        self.rolled = 0
        self.skipped_after_crash = 0
        self.failures = FailureCounter(log, self.name)
        if (settings.root / "timerwheel").exists():
            self._open(recover=True)

    # ------------------------------------------------------------------ files

    def _floor(self, ms: int) -> int:
        return ms // self.precision * self.precision

    def _open(self, *, recover: bool) -> None:
        s = self.s
        self.log = TimerLog(s.root / "timerlog", s.timer_log_file_size)
        self.wheel = TimerWheel(s.root / "timerwheel", self.precision)
        now = self._floor(self.clock())
        self.write_ms = now
        if not recover:
            bounds = self.q.bounds()
            self.read_ms = now
            self.queue_offset = bounds[0] if bounds else 0
            self.log_from = self.q.log_end()
            self.checkpoint()
            return
        self.log.load()
        self._dirty = True  # the recovery may re-link units and cut a torn tail
        cp = self.checkpoint_file.read() or tf.Checkpoint(last_read_ms=now)
        self._counter = cp.version_counter
        self.queue_offset = cp.queue_offset
        for pos, unit in self.log.recover_from(cp.timer_log_flush_pos):
            self._relink(pos, unit)
            rec = self.q.read(unit.offset_py, unit.size_py)
            if rec is not None and rec.topic == "rmq_sys_wheel_timer":
                self.queue_offset = max(self.queue_offset, rec.queue_offset + 1)
        bounds = self.q.bounds()
        if bounds is not None:
            self.queue_offset = min(max(self.queue_offset, bounds[0]), bounds[1])
        oldest = now - (tf.SLOTS_TOTAL - 60) * self.precision  # TIMER_BLANK_SLOTS
        self.read_ms = max(cp.last_read_ms, oldest)
        self.log_from = cp.log_from
        if cp.log_from >= 0:
            end = self.q.log_end()
            self.q.scan_log(cp.log_from, end, self._count_put)
            if self._done:
                self._catch_up = (now, bounds[1] if bounds else self.queue_offset)
        made = sum(self._done.values())
        log.info("timer recovered: read time %d, queue offset %d, %d puts made after the "
                 "checkpoint", self.read_ms, self.queue_offset, made)  # fmt: skip

    def _count_put(self, rec: fmt.RecordInfo, _size: int) -> None:
        key = delivery_key(rec.topic, rec.properties)
        if key is not None:
            self._done[key] += 1

    def _relink(self, pos: int, unit: tf.Unit) -> None:
        """Make ``unit`` at ``pos`` its slot's last unit, unless it already is or was."""
        assert self.wheel is not None
        slot = self.wheel.get(unit.due_ms)
        if slot is tf.EMPTY_SLOT:
            self.wheel.put(tf.Slot(self._floor(unit.due_ms), pos, pos, 1))
        elif pos > slot.last_pos:
            self.wheel.put(slot._replace(last_pos=pos, num=slot.num + 1))

    # ------------------------------------------------------------------ rounds

    def run_once(self) -> None:
        if self.log is None:
            bounds = self.q.bounds()
            if bounds is None or bounds[1] <= bounds[0]:
                return
            self._open(recover=False)
        try:
            self.write_ms = max(self.write_ms, self._floor(self.clock()))
            self._enqueue()
            self._dequeue()
            if self._catch_up is not None:
                read_to, queue_to = self._catch_up
                if self.read_ms >= read_to and self.queue_offset >= queue_to:
                    self._done.clear()
                    self._catch_up = None
        except Exception as e:  # the round stops; the next starts from the same state
            self.failures.record("a timer round", e)
        if time.monotonic() - self._last_cleanup >= CLEANUP_INTERVAL_S:
            self._last_cleanup = time.monotonic()
            try:
                if self.log is not None:
                    self.log.delete_done(self.read_ms, self._file_due)
            except OSError as e:
                self.failures.record("deleting done timer-log files", e)
        if time.monotonic() - self._last_checkpoint >= self.s.flush_interval_ms / 1000:
            try:
                self.checkpoint()
            except OSError as e:
                self.failures.record("writing the timer checkpoint", e)

    def _enqueue(self) -> None:
        bounds = self.q.bounds()
        if bounds is None:
            return
        low, high = bounds
        offset = max(self.queue_offset, low)
        stop = min(high, offset + ENQUEUE_BATCH)
        while offset < stop and not self._stopped.is_set():
            unit = self.q.unit_at(offset)
            if unit is None:
                break
            phys, size, _tags = unit
            rec = self.q.read(phys, size)
            if rec is not None and not self._enqueue_one(rec, phys, size):
                break
            offset += 1
            self.queue_offset = offset
        self.queue_offset = max(self.queue_offset, offset)

    def _enqueue_one(self, rec: fmt.MessageRecord, phys: int, size: int) -> bool:
        """Link one timer record into the wheel (or put it now); False: retry later."""
        try:
            due = int(rec.properties.get(TIMER_OUT_MS, ""))
        except ValueError:
            log.warning("timer: record at %d has no TIMER_OUT_MS: skipped", phys)
            return True
        if due < self.write_ms:
            msg = due_message(rec, enqueue_ms=LONG_MAX, now_ms=self.clock(), roll=False)
            return self._put(msg, phys)
        assert self.log is not None and self.wheel is not None
        write = self.write_ms
        window = self.s.roll_window_slots * self.precision
        magic = tf.MAGIC_DEFAULT
        if due - write >= window:
            magic |= tf.MAGIC_ROLL
            if due - write - window < self.s.roll_window_slots // 3 * self.precision:
                due = write + self.s.roll_window_slots // 2 * self.precision
            else:
                due = write + window
        slot = self.wheel.get(due)
        real = rec.properties.get(PROPERTY_REAL_TOPIC, "")
        unit = tf.Unit(
            slot.last_pos, magic, write, due - write, phys, size, tf.java_string_hash(real)
        )
        self._dirty = True
        pos = self.log.append(tf.encode_unit(unit))
        first = pos if slot.first_pos == tf.NO_POS else slot.first_pos
        self.wheel.put(tf.Slot(self._floor(due), first, pos, slot.num + 1, slot.magic))
        self.enqueued += 1
        return True

    def _dequeue(self) -> None:
        while self.read_ms < self.write_ms and not self._stopped.is_set():
            if not self._dequeue_slot(self.read_ms):
                return
            self.read_ms += self.precision
            self._slot_done = 0

    def _dequeue_slot(self, time_ms: int) -> bool:
        """Put every unit of the slot (from the ``_slot_done``-th); False: retry later."""
        assert self.log is not None and self.wheel is not None
        slot = self.wheel.get(time_ms)
        if slot is tf.EMPTY_SLOT:
            return True
        chain: list[tf.Unit] = []
        pos = slot.last_pos
        while pos != tf.NO_POS:
            unit = self.log.unit_at(pos)
            if unit is None:
                log.warning("timer: slot %d names no unit at %d", time_ms, pos)
                break
            chain.append(unit)
            pos = unit.prev_pos
        chain.reverse()
        for unit in chain[self._slot_done :]:
            rec = self.q.read(unit.offset_py, unit.size_py)
            if rec is not None:
                msg = due_message(rec, enqueue_ms=unit.write_ms, now_ms=self.clock(),
                                  roll=unit.rolls)  # fmt: skip
                if not self._put(msg, unit.offset_py):
                    return False
            self._slot_done += 1
        return True

    def _put(self, msg: Message | None, phys: int) -> bool:
        """Put a due (or rolling) message; False: the store refuses puts for now."""
        if msg is None:
            log.warning("timer: record at %d names no real topic: dropped", phys)
            return True
        key = delivery_key(msg.topic, msg.properties)
        if key is not None and self._done[key] > 0:
            self._done[key] -= 1
            self.skipped_after_crash += 1
            return True
        try:
            status = self.q.put(msg)
        except (IllegalTopicError, IllegalMessageError) as e:
            self.failures.record("putting a due timer message", e, phys)
            return True
        if status.stored:
            if msg.topic == "rmq_sys_wheel_timer":
                self.rolled += 1
            else:
                self.delivered += 1
            return True
        if status in _RETRY_LATER:
            return False
        log.warning("timer: put of the record at %d refused (%s): dropped", phys, status)
        return True

    # ------------------------------------------------------------- checkpoint

    def checkpoint(self) -> None:
        """Sync the timer log and the wheel, then write ``timercheck`` (synced too when
        units or slots were written since the last one; an idle wheel only moves its read
        time, which an older checkpoint also recovers from).

        Raises:
            OSError: a sync or the write failed.
        """
        self._last_checkpoint = time.monotonic()
        if self.log is None or self.wheel is None:
            return
        dirty, self._dirty = self._dirty, False
        if dirty:
            self.log.flush()
            self.wheel.flush()
        if self._catch_up is None:
            self.log_from = self.q.log_end()
        self._counter += 1
        cp = tf.Checkpoint(self.read_ms, self.log.end, self.queue_offset, self.queue_offset,
                           0, self.clock(), self._counter, self.log_from)  # fmt: skip
        self.checkpoint_file.write(cp, sync=dirty)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop, write a last checkpoint, close the files."""
        super().stop(timeout)
        try:
            self.checkpoint()
        except OSError as e:
            log.error("writing the timer checkpoint at stop failed: %s", e)
        self.close()

    def close(self) -> None:
        """Close the files without a checkpoint (a simulated crash, or after stop)."""
        if self.log is not None:
            self.log.close()
            self.log = None
        if self.wheel is not None:
            self.wheel.close()
            self.wheel = None
