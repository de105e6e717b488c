"""Everything derived from the CommitLog: consume queues, index, and their services.

:class:`Logics` is the part of the composition root that owns the "logic" files
(RocketMQ's name for consume queues) and the threads around them, so that
``message_store.py`` stays a short list of steps. Its methods are steps of the open and
close sequence narrated in docs/store.md §1.8: :meth:`Logics.load`, :meth:`Logics.recover`,
:meth:`Logics.redispatch_around_damage`, :meth:`Logics.after_log_recovery`,
:meth:`Logics.start`, :meth:`Logics.stop`; each docstring states its contract.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable

from mqstore.checkpoint import Checkpoint
from mqstore.cleanup import CleanupService, DiskGuard
from mqstore.commitlog import dispatch_rule as rule
from mqstore.commitlog import format as fmt
from mqstore.commitlog.recovery import (
    OnRecord,
    RecoveryResult,
    abnormal_start_index,
    dispatch_kept,
    scan_headers,
)
from mqstore.commitlog.segments import Segments
from mqstore.config import StoreConfig
from mqstore.consumequeue import shared
from mqstore.consumequeue.dispatch import Dispatcher, DispatchProgress, ReputService
from mqstore.consumequeue.filter_bits import FilterBits
from mqstore.consumequeue.flush import ConsumeQueueFlusher
from mqstore.consumequeue.process import DispatchProcess
from mqstore.consumequeue.queue import ConsumeQueue
from mqstore.consumequeue.store import ConsumeQueueStore
from mqstore.index.service import IndexService
from mqstore.message import Message
from mqstore.schedule import SCHEDULE_TOPIC, DelayLevels, ScheduleService, queue_id_of
from mqstore.service import ServiceThread
from mqstore.status import PutStatus
from mqstore.timer.service import TimerQueue, TimerService, TimerSettings
from mqstore.timer.transform import TIMER_TOPIC

log = logging.getLogger(__name__)

ErrorHandler = Callable[[BaseException], None]


class Logics:
    """Consume queues, index, dispatcher and the services around them."""

    def __init__(
        self,
        cfg: StoreConfig,
        segments: Segments,
        checkpoint: Checkpoint,
        *,
        disk_check: Callable[[], object] | None = None,
        fenced: Callable[[int], bool] | None = None,
    ) -> None:
        """``disk_check``: the store's disk check, run per created index file and when
        the index runs out of space; ``fenced``: whether a CommitLog offset lies in a
        range recovery fenced off (no key lookup serves it)."""
        self.cfg = cfg
        self.segments = segments
        self.checkpoint = checkpoint
        self.queues = ConsumeQueueStore(
            cfg.consume_queue_path,
            cfg.consume_queue_file_size,
            max_mapped_files=cfg.max_mapped_consume_queue_files,
            log_start=lambda: segments.min_offset,
        )
        self.index = IndexService.for_store(
            cfg,
            self._index_file_full,
            on_new_file=disk_check,
            fenced=fenced,
        )
        self.delay_levels = DelayLevels.parse(cfg.message_delay_level)
        self.filter_bits: FilterBits | None = None
        """The SQL92 verdicts written at dispatch (None with ``dispatch_process``: the
        dispatcher process writes none, and its files are dropped so that no entry older
        than a unit the process wrote is ever read)."""
        bits_dir = cfg.root / "filterbits"
        if cfg.dispatch_process:
            shutil.rmtree(bits_dir, ignore_errors=True)
        else:
            self.filter_bits = FilterBits(bits_dir, self._properties_at, self._min_offset)
        self.dispatcher = Dispatcher(
            self.queues,
            self.index,
            self.delay_levels,
            filter_bits=self.filter_bits,
            on_no_space=disk_check,
        )
        self._index_rebuild_from: int | None = None
        self._index_from: int | None = None
        self.reput = ReputService(
            segments,
            self.dispatcher,
            reput_from=0,
            limit=lambda: 0,
            dispatch_fields=self.dispatcher.dispatch_one,
        )
        self.flusher: ConsumeQueueFlusher | None = None
        self.schedule: ScheduleService | None = None
        self.timer: TimerService | None = None
        self.cleanup: CleanupService | None = None
        self.process: DispatchProcess | None = None
        """The dispatcher process (``cfg.dispatch_process``), once started."""

    @property
    def progress(self) -> DispatchProgress:
        """Whatever dispatches: the dispatcher process, else the reput thread."""
        return self.process if self.process is not None else self.reput

    @property
    def index_disabled(self) -> str | None:
        """Why the index is not being built (no space for it), or None."""
        if self.process is not None:
            return self.process.index_disabled
        return self.dispatcher.index_disabled

    def _index_file_full(self, end_timestamp: int) -> None:
        self.checkpoint.note(index=end_timestamp)
        try:
            self.checkpoint.flush()
        except OSError as e:
            log.error("checkpoint flush after an index file filled failed: %s", e)

    # ------------------------------------------------------------- open sequence

    def load(self, *, last_exit_ok: bool, closed_cleanly: bool = False) -> None:
        """Map queues and index files (``closed_cleanly``: the clean close's
        record matched, see ``IndexService.load``).

        Raises:
            SegmentLoadError: a queue file has a bad name or size.
            CorruptIndexError: an index file has the wrong size.
        """
        self.queues.load(clean=last_exit_ok)
        if self.index is not None:
            self._index_rebuild_from = self.index.load(
                last_exit_ok=last_exit_ok,
                index_msg_timestamp=self.checkpoint.index_msg_timestamp,
                closed_cleanly=closed_cleanly,
            )

    def recover(self, *, last_exit_ok: bool) -> OnRecord | None:
        """Recover queues; returns the CommitLog recovery's record callback (None after a
        clean exit).

        After a crash, abnormal CommitLog recovery replays every record from a
        checkpoint-chosen file; the queue units from there on (and a torn unit just
        before) are cut first, so the replay writes them afresh instead of keeping
        whatever a power loss left.
        """
        self.queues.recover(clean=last_exit_ok)
        if last_exit_ok or not self.segments.files:
            return None
        start = self.segments.files[abnormal_start_index(self.segments, self.checkpoint)]
        replay = self.queues.truncate_dirty(start.file_from_offset, self._unit_matches_log)
        self._cut_filter_bits()
        if self.index is not None:
            # The index is rebuilt after open, from the reput thread (IndexCatchUp):
            # from the destroyed files' stretch, the replay start, or the last message
            # indexed (a crash during an earlier catch-up), whichever is first.
            last = self.index.files[-1].end_phy_offset if self.index.files else 0
            starts = (self._index_rebuild_from, start.file_from_offset, last)
            self._index_from = max(
                min(s for s in starts if s is not None), self.segments.min_offset
            )
            self.dispatcher.defer_indexing()
        if replay is not None:  # what the CommitLog's replay will not cover: dispatch it now
            begin = max(replay, self.segments.min_offset)
            if begin < start.file_from_offset:
                scan_headers(self.segments, begin, start.file_from_offset, self.dispatcher)
        return self.dispatcher

    def _cut_filter_bits(self) -> None:
        """Cut the SQL92 verdicts at each queue's recovered end (``FilterBits.cut``)."""
        if self.filter_bits is not None:
            self.filter_bits.cut(self._max_offset)

    def _max_offset(self, topic: str, queue_id: int) -> int | None:
        cq = self.queues.find(topic, queue_id)
        return None if cq is None else cq.max_offset

    def _min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.find(topic, queue_id)
        return 0 if cq is None else cq.min_offset

    def _properties_at(self, phys: int, size: int) -> str | None:
        """The properties of the record at ``phys`` (just dispatched), or None."""
        mf = self.segments.find(phys)
        if mf is None:
            return None
        rel = phys - mf.file_from_offset
        try:
            info = fmt.scan(mf.view, rel, min(rel + size, mf.wrote_position), check_crc=False)
        except ValueError:  # unmapped meanwhile
            return None
        return info.properties_string if type(info) is fmt.RecordInfo else None

    def _unit_matches_log(
        self, cq: ConsumeQueue, queue_offset: int, unit: tuple[int, int, int]
    ) -> bool:
        """The unit is what dispatching its record gives: same record, size, tags code."""
        phys, size, tags = unit
        mf = self.segments.find(phys)
        if mf is None:
            return phys < self.segments.min_offset  # expired: nothing to compare with
        rel = phys - mf.file_from_offset
        r = fmt.scan(mf.view, rel, min(rel + size, mf.file_size), check_crc=False)
        return (
            isinstance(r, fmt.RecordInfo)
            and r.size == size
            and (r.topic, r.queue_id, r.queue_offset) == (cq.topic, cq.queue_id, queue_offset)
            and tags
            == rule.tags_code_of(r.topic, r.properties, r.store_timestamp, self.delay_levels)
        )

    def redispatch_around_damage(self, recovery: RecoveryResult) -> None:
        """After a normal recovery that fenced damage off: it re-dispatched
        nothing, so queue units built before the damage point into it. Cut the queues
        at the first damaged byte and dispatch the kept records from there, units only
        (the index already has them; its lookups leave fenced records out)."""
        first = recovery.damaged[0].start
        self.queues.truncate_dirty(first)
        units_only = Dispatcher(self.queues, None, self.delay_levels, filter_bits=self.filter_bits)
        begin = max(min(self.queues.max_physic_offset, first), self.segments.min_offset)
        dispatch_kept(self.segments, begin, recovery, units_only)

    def after_log_recovery(self, *, end: int, last_exit_ok: bool) -> dict[str, int]:
        """Cut, correct, catch up; return the topic-queue offset table."""
        if not self.segments.files:
            self.queues.destroy()
            if self.index is not None:
                self.index.destroy()
            self._cut_filter_bits()  # no queue left: no verdict either
            return {}
        self.queues.check_log_end(end)
        if self.queues.max_physic_offset > end:
            self.queues.truncate_dirty(end)
        self.queues.correct_min_offset(self.segments.min_offset)
        self._cut_filter_bits()
        if last_exit_ok:
            start = min(max(self.queues.max_physic_offset, self.segments.min_offset), end)
        else:
            start = end  # abnormal recovery dispatched everything it scanned
        self.reput.start_at(start, lambda: end)
        self.reput.do_reput()
        if self._index_from is not None:
            self.reput.index_from(self._index_from)
        if self.reput.reput_from < end:
            log.error(
                "dispatch stopped at %d of %d: %s",
                self.reput.reput_from,
                end,
                self.reput.last_error,
            )
        return self.queues.topic_queue_table()

    # ------------------------------------------------------------------ services

    def start(
        self,
        *,
        limit: Callable[[], int],
        put: Callable[[Message], PutStatus],
        read: Callable[[int, int], fmt.MessageRecord | None],
        on_error: ErrorHandler,
        master: bool,
        disk_guard: DiskGuard | None = None,
        lock_fd: int = -1,
    ) -> None:
        """Start the background services (``lock_fd``: the store's locked
        ``lock`` file, shared with a dispatcher process)."""
        cfg = self.cfg
        self.reput.limit_to(limit)
        if cfg.dispatch_process and not shared.supported():
            log.warning("dispatch_process needs Linux on x86-64: dispatching in a thread")
        if cfg.dispatch_process and shared.supported():
            self._start_process(limit, on_error, lock_fd)
        else:
            self.reput.start()
            self.flusher = ConsumeQueueFlusher(
                self.queues,
                self.checkpoint,
                interval_ms=cfg.flush_interval_consume_queue_ms,
                least_pages=cfg.flush_consume_queue_least_pages,
                thorough_interval_ms=cfg.flush_consume_queue_thorough_interval_ms,
                on_error=on_error,
            )
            self.flusher.start()
        if master:
            self.schedule = ScheduleService(
                self.delay_levels,
                cfg.root / "config" / "delayOffset.json",
                queue_bounds=self._schedule_bounds,
                unit_at=self._schedule_unit,
                read=read,
                put=put,
                flush_interval_ms=cfg.flush_delay_offset_interval_ms,
            )
            self.schedule.start()
            self.timer = self._timer_service(put, read)
            self.timer.start()
        self.cleanup = CleanupService(
            cfg,
            self.segments,
            self.queues,
            self.index,
            dispatched_offset=lambda: self.progress.reput_from,
            guard=disk_guard,
        )
        self.cleanup.start()

    def _start_process(
        self, limit: Callable[[], int], on_error: ErrorHandler, lock_fd: int
    ) -> None:
        """Hand queues and index to a dispatcher process; ours become readers.

        Raises:
            DispatchProcessError: the child did not start.
        """
        index_from = self.reput.hand_over_index()  # the child rebuilds the index instead
        proc = DispatchProcess(
            self.cfg,
            self.segments,
            self.checkpoint,
            self.dispatcher,
            limit=limit,
            lock_fd=lock_fd,
            on_error=on_error,
        )
        self.queues.follow(lambda: proc.state.get(shared.Slot.DISPATCHED),
                           lambda: self.segments.min_offset)  # fmt: skip
        if self.index is not None:
            self.index.follow()
        try:
            proc.start(self.reput.reput_from, index_from)
        except BaseException:
            proc.close()
            raise
        self.process = proc

    def _timer_service(
        self,
        put: Callable[[Message], PutStatus],
        read: Callable[[int, int], fmt.MessageRecord | None],
    ) -> TimerService:
        """The timer service over ``rmq_sys_wheel_timer`` queue 0 (docs/timer.md)."""
        cfg = self.cfg

        def bounds() -> tuple[int, int] | None:
            cq = self.queues.find(TIMER_TOPIC, 0)
            return None if cq is None else (cq.min_offset, cq.max_offset)

        def unit_at(offset: int) -> tuple[int, int, int] | None:
            cq = self.queues.find(TIMER_TOPIC, 0)
            return None if cq is None else cq.unit_at(offset)

        def scan_log(start: int, end: int, on_record: OnRecord) -> int:
            return scan_headers(self.segments, max(start, self.segments.min_offset), end,
                                on_record)  # fmt: skip

        settings = TimerSettings(
            cfg.root,
            cfg.timer_precision_ms,
            cfg.timer_roll_window_slot,
            cfg.mapped_file_size_timer_log,
            cfg.timer_flush_interval_ms,
        )
        queue = TimerQueue(bounds, unit_at, read, put, lambda: self.segments.max_offset, scan_log)
        return TimerService(settings, queue)

    def _schedule_bounds(self, level: int) -> tuple[int, int] | None:
        cq = self.queues.find(SCHEDULE_TOPIC, queue_id_of(level))
        return None if cq is None else (cq.min_offset, cq.max_offset)

    def _schedule_unit(self, level: int, offset: int) -> tuple[int, int, int] | None:
        cq = self.queues.find(SCHEDULE_TOPIC, queue_id_of(level))
        return None if cq is None else cq.unit_at(offset)

    def stop_schedule(self) -> None:
        """Stop delivering delayed and timer messages (before puts are refused) and persist."""
        if self.timer is not None:
            self.timer.stop()
            self.timer = None
        if self.schedule is not None:
            try:
                self.schedule.stop()
            except OSError as e:
                log.error("persisting delayOffset.json failed: %s", e)
            self.schedule = None

    def stop(self) -> bool:
        """Drain and flush everything; True when dispatch completed and the
        files are on disk (``abort`` may then go)."""
        self.stop_schedule()
        for svc in (self.cleanup, self.flusher):
            if svc is not None:
                svc.stop()
        if self.process is not None:
            # The child drains, flushes and hands over its checkpoint fields.
            clean = self.process.stop()
            self.close()  # the readers first: they read the shared page
            self.process.close()
            self.process = None
            try:
                self.checkpoint.flush()
            except OSError as e:
                log.error("flushing the checkpoint at shutdown failed: %s", e)
                clean = False
            return clean
        self.reput.stop()  # drains, index catch-up included
        clean = self.reput.behind == 0 and self.reput.indexed
        try:
            self.queues.flush(0)
            if self.index is not None:
                self.index.flush()
            if self.queues.logics_msg_timestamp:
                self.checkpoint.note(logics=self.queues.logics_msg_timestamp)
            self.checkpoint.flush()
        except OSError as e:
            log.error("flushing consume queues / index at shutdown failed: %s", e)
            clean = False
        if clean:
            try:  # the next open reads each queue on first use instead of all at once
                self.queues.save_summary(self.segments.max_offset)
            except OSError as e:
                log.error("writing the consume-queue summary at shutdown failed: %s", e)
        self.close()
        return clean

    def abandon(self) -> None:
        """Stop every thread at once, flushing nothing (a simulated crash)."""
        if self.schedule is not None:
            ServiceThread.stop(self.schedule)
            self.schedule = None
        if self.timer is not None:
            ServiceThread.stop(self.timer)
            self.timer.close()
            self.timer = None
        for svc in (self.cleanup, self.flusher):
            if svc is not None:
                svc.stop()
        self.reput.stop(drain=False)
        if self.process is not None:
            self.process.kill()
            self.close()
            self.process.close()
            self.process = None
        self.close()

    def close(self) -> None:
        """Unmap queue and index files."""
        if self.index is not None:
            self.index.close()
        if self.filter_bits is not None:
            self.filter_bits.close()
        self.queues.close()
