"""The dispatcher (RocketMQ ``ReputMessageService``): CommitLog -> consume queues + index.

:class:`Dispatcher` handles one record as :mod:`mqstore.commitlog.dispatch_rule` says:
a unit in its consume queue, its keys in the index, then an :class:`Arrival` for long
polling.

:class:`ReputService` is the thread that feeds it: from ``reput_from`` it reads
records up to a limit (the flushed offset under SYNC_FLUSH, so consumers only ever
see durable messages; the written end under ASYNC_FLUSH), dispatches them and
advances. It polls every millisecond, as RocketMQ's does, and :meth:`stop` drains
up to the limit before returning, so a clean shutdown leaves nothing undispatched.

Dispatching is idempotent (already-present units and index entries are skipped), so
recovery may replay any stretch of the log through the same :class:`Dispatcher`.

Out of space: when the index cannot reserve room for a message (ENOSPC/EDQUOT, see
``mqstore.index.file``), indexing is disabled ("index disabled until space is
available", logged once) but units keep flowing into the consume queues, so puts
and pulls go on. The reput thread retries once a second by starting an
:class:`IndexCatchUp` at the first unindexed message; when it catches up, the
index is whole again. A store closed meanwhile keeps ``abort``, so the next open
catches the index up instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from mqstore.commitlog import dispatch_rule as rule
from mqstore.commitlog import format as fmt
from mqstore.commitlog.bulk import PlainRecords
from mqstore.commitlog.cursor import Blank, BufferSegment, Damage, Segment, step
from mqstore.commitlog.segments import Segments
from mqstore.commitlog.walk import FieldDispatch
from mqstore.consumequeue.arrival import Arrival as Arrival  # noqa: PLC0414 (re-export)
from mqstore.consumequeue.arrival import ArrivalListener as ArrivalListener  # noqa: PLC0414
from mqstore.consumequeue.catch_up import IndexCatchUp
from mqstore.consumequeue.dispatch_batch import NO_SPACE, BatchDispatcher
from mqstore.consumequeue.filter_bits import FilterBits
from mqstore.consumequeue.store import ConsumeQueueStore
from mqstore.failures import FailureCounter
from mqstore.index.service import IndexService
from mqstore.message import PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, property_of
from mqstore.schedule import DelayLevels
from mqstore.service import ServiceThread

log = logging.getLogger(__name__)

CHUNK = 1024
"""Records dispatched between two looks at the stop flag (and progress notifications)."""
RUN_RECORDS = 4096
"""At most this many records per batch of :meth:`Dispatcher.dispatch_run`."""
INDEX_RETRY_SECONDS = 1.0
"""How often a disabled (out of space) or failing index catch-up is retried."""


class DispatchProgress(Protocol):
    """What readers ask of whatever dispatches (the reput thread, or the parent's side
    of a dispatcher process, ``mqstore.consumequeue.process``)."""

    @property
    def reput_from(self) -> int: ...

    @property
    def behind(self) -> int: ...

    @property
    def indexed(self) -> bool: ...

    def wait_until(self, offset: int, timeout: float, *, indexed: bool = True) -> bool: ...


class Dispatcher:
    """Builds the consume-queue unit and index entries of one record."""

    def __init__(
        self,
        queues: ConsumeQueueStore,
        index: IndexService | None,
        delay_levels: DelayLevels,
        *,
        filter_bits: FilterBits | None = None,
        on_no_space: Callable[[], object] | None = None,
    ) -> None:
        self.queues = queues
        self.index = index
        self.delay_levels = delay_levels
        self.listeners: list[ArrivalListener] = []
        self.defer_index = False
        """True while an :class:`IndexCatchUp` owns indexing: records get their
        units (and arrivals) only; the catch-up indexes them later, in log order
        (:meth:`defer_indexing`, :meth:`resume_indexing`)."""
        self.index_disabled: str | None = None
        """Why indexing stopped (no space for the index), until a catch-up finishes."""
        self.index_pending_from: int | None = None
        """First message left unindexed when the index ran out of space; the reput
        thread starts an :class:`IndexCatchUp` there once space may be back."""
        self.on_no_space = on_no_space
        """Called when the index runs out of space (the store's disk check)."""
        self.filter_bits = filter_bits
        """Where the verdicts of registered SQL92 expressions are written at dispatch
        (None: none are computed)."""
        self.batch = BatchDispatcher(self)
        """Builds the batches of :meth:`dispatch_run` and :meth:`dispatch_plain` (its
        ``min_records`` decides which runs go record by record)."""

    def defer_indexing(self) -> None:
        """From now on records get their units (and arrivals) only: an
        :class:`IndexCatchUp` indexes them later, in log order, and then calls
        :meth:`resume_indexing`."""
        self.defer_index = True

    def resume_indexing(self) -> None:
        """Index every record dispatched from now on (the catch-up has reached the
        dispatched end)."""
        self.defer_index = False

    def take_pending_index(self) -> int | None:
        """The first message left unindexed for lack of space (None: none), handed to
        the caller, which starts an :class:`IndexCatchUp` there."""
        pending, self.index_pending_from = self.index_pending_from, None
        return pending

    def index_enabled_again(self) -> bool:
        """A catch-up finished: clear :attr:`index_disabled`; True if it was set."""
        was, self.index_disabled = self.index_disabled is not None, None
        return was

    def __call__(self, info: fmt.RecordInfo, _size: int = 0) -> None:
        """Dispatch one record (the signature of a recovery ``on_record`` callback).

        Raises:
            OSError: a queue or index file could not be created; nothing is lost,
                dispatching the record again completes it.
        """
        # One tuple unpack instead of a dozen NamedTuple attribute lookups.
        (size, _v, _crc, qid, _flag, qoff, phys, sys_flag, _born, _bh, store_ts, _sh,
         _rt, _pt, _bp, _bl, topic, props_string) = info  # fmt: skip
        self.dispatch_one(topic, qid, qoff, phys, size, sys_flag, store_ts, props_string)

    def dispatch_one(
        self,
        topic: str,
        qid: int,
        qoff: int,
        phys: int,
        size: int,
        sys_flag: int,
        store_ts: int,
        props_string: str,
    ) -> None:
        """Dispatch one record given the fields it uses (what :meth:`__call__` does).

        Raises:
            OSError: as :meth:`__call__`.
        """
        code = 0
        in_queue = rule.gets_unit(sys_flag)
        if in_queue:
            code = rule.unit_tags_code(topic, props_string, store_ts, self.delay_levels)
            bits = self.filter_bits
            if bits is not None and topic in bits.topics:  # before the unit: see filter_bits
                bits.record(topic, qid, qoff, phys, props_string)
            self.queues.put(topic, qid, phys, size, code, qoff, store_ts)
        if not self.defer_index:
            try:
                self.index_fields(topic, phys, store_ts, sys_flag, props_string)
            except OSError as e:
                if e.errno not in NO_SPACE:
                    raise
                self.index_out_of_space(phys, e)
        if in_queue and self.listeners:
            self.notify(Arrival(topic, qid, qoff, code, store_ts))

    def dispatch_run(self, view: memoryview, start: int, end: int) -> None:
        """Dispatch the whole records ``view[start:end]`` holds, in log order: recovery's
        re-dispatch (``mqstore.commitlog.recovery.RunSink``), which hands over runs of
        records it accepted. Plain records go in batches (:class:`BatchDispatcher`); the
        others, and a batch that fails (dispatched again), record by record.

        Raises:
            OSError: as :meth:`__call__`, for the first record that could not be
                dispatched (the records before it are).
        """
        batch = self.batch
        pos = single_until = start
        seg = BufferSegment(view, 0, len(view))
        while pos < end:
            if pos >= single_until and end - pos >= batch.min_bytes:
                b = batch.read(view, pos, end, RUN_RECORDS)
                if isinstance(b, int):
                    single_until = b
                else:
                    try:
                        batch.apply(b)
                    except Exception:  # again record by record: the same failure
                        single_until = pos + b.length
                    else:
                        pos += b.length
                        continue
            item, after = step(view, pos, end, seg)
            if type(item) is tuple:
                self.dispatch_one(*item)
            pos = after

    def dispatch_plain(self, view: memoryview, recs: PlainRecords, k: int) -> None:
        """Dispatch the first ``k`` records of a bulk scan of ``view``, in log order:
        recovery's re-dispatch (``mqstore.commitlog.recovery.PlainSink``), which hands
        over the records it accepted with the fields it already read, so batches are
        built from them (:meth:`BatchDispatcher.read_plain`) without walking the bytes
        again. Records the batch cannot take, and a batch that fails, go record by
        record (:meth:`dispatch_run` of their bytes).

        Raises:
            OSError: as :meth:`dispatch_run`.
        """
        batch = self.batch
        i = 0
        while i < k:
            j = min(k, i + RUN_RECORDS)
            b = batch.read_plain(view, recs, i, j) if j - i >= batch.min_records else j - i
            if isinstance(b, int):
                count = b
            else:
                count = b.count
                try:
                    batch.apply(b)
                except Exception:  # again record by record: the same failure
                    pass
                else:
                    i += count
                    continue
            last = i + count - 1
            self._one_by_one(
                view, int(recs.position[i]), int(recs.position[last] + recs.size[last])
            )
            i += count

    def _one_by_one(self, view: memoryview, pos: int, end: int) -> None:
        """Dispatch the whole records of ``view[pos:end]`` record by record."""
        seg = BufferSegment(view, 0, len(view))
        while pos < end:
            item, pos = step(view, pos, end, seg)
            if type(item) is tuple:
                self.dispatch_one(*item)

    def notify(self, arrival: Arrival) -> None:
        """Call every arrival listener (a failing listener is logged and skipped)."""
        for listener in self.listeners:
            try:
                listener(arrival)
            except Exception:  # a listener must not stop dispatching
                log.exception("arrival listener %r failed", listener)

    def arrival_of(
        self, topic: str, qid: int, qoff: int, sys_flag: int, store_ts: int, props_string: str
    ) -> Arrival | None:
        """The :class:`Arrival` dispatching this record announces (None: the record
        gets no queue unit): for readers whose dispatcher runs in another process."""
        if not rule.gets_unit(sys_flag):
            return None
        code = rule.unit_tags_code(topic, props_string, store_ts, self.delay_levels)
        return Arrival(topic, qid, qoff, code, store_ts)

    def index_out_of_space(self, phys: int, e: OSError) -> None:
        """The index could not reserve space for the message at ``phys`` (nothing of
        it was written): keep dispatching units, index from ``phys`` later."""
        self.defer_indexing()
        self.index_pending_from = phys
        self.index_disabled = f"index disabled until space is available: {e}"
        log.error(
            "%s; consume queues keep being built, indexing resumes at %d",
            self.index_disabled,
            phys,
        )
        if self.on_no_space is not None:
            self.on_no_space()

    def index_fields(self, topic: str, phys: int, store_ts: int, sys_flag: int, props: str) -> None:
        """Index one record only (its unit is already there): the catch-up's callback.

        Raises:
            OSError: a new index file could not be created.
        """
        index = self.index
        if index is None or not rule.gets_keys(sys_flag):
            return
        keys = property_of(props, PROPERTY_KEYS)
        index.build(
            topic,
            phys,
            store_ts,
            property_of(props, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            keys.split(" ") if keys else (),
        )


class ReputService(ServiceThread):
    """The thread that dispatches the CommitLog from ``reput_from`` up to ``limit()``."""

    name = "reput"

    def __init__(
        self,
        segments: Segments,
        dispatcher: Dispatcher,
        *,
        reput_from: int,
        limit: Callable[[], int],
        interval: float = 0.001,
        dispatch_fields: FieldDispatch | None = None,
        chunk: int = CHUNK,
        batch_records: int | None = None,
        round_budget: int | None = None,
        on_progress: Callable[[int], object] | None = None,
    ) -> None:
        super().__init__(interval)
        self._segments = segments
        self._dispatch_fields = dispatch_fields or dispatcher.dispatch_one
        """What each record's ``DispatchFields`` are given to (by default the
        dispatcher's ``dispatch_one``, whose parameters they are)."""
        self.batch: BatchDispatcher | None = (
            BatchDispatcher(dispatcher)
            if self._dispatch_fields == dispatcher.dispatch_one
            else None
        )
        """Dispatches runs of records at once when a backlog is pending (None: every
        record goes to ``dispatch_fields``, which is then not the dispatcher's own)."""
        self.limit = limit
        self.reput_from = reput_from
        self.skipped_bytes = 0
        self.failures = FailureCounter(log, self.name)
        """Records skipped because their dispatch raised something other than OSError
        (kind ``dispatch``; the first is logged with its offset)."""
        self.last_error: BaseException | None = None
        self.catch_up: IndexCatchUp | None = None
        self._progress = threading.Condition()
        self._dispatcher = dispatcher
        self._catch_up_retry_at = 0.0
        self.chunk = chunk
        """Records dispatched between two progress notifications."""
        self.batch_records = batch_records
        """At most this many records per batch (None: the rest of the chunk). A batch
        is notified as a whole once applied, so a larger value than :attr:`chunk` only
        delays the notification of the records it holds; the dispatcher process, which
        publishes often, sets it because a batch's fixed cost needs many records."""
        self.round_budget = round_budget
        """At most this many records per round of the thread (None: up to the limit);
        the dispatcher process bounds its rounds so it notices commands promptly."""
        self.on_progress = on_progress
        """Called with ``reput_from`` after each chunk (the dispatcher process
        publishes its progress from it)."""

    def start_at(self, offset: int, limit: Callable[[], int]) -> None:
        """Dispatch from ``offset`` up to ``limit()`` from now on: where recovery left
        the queues, before the thread starts (or a synchronous :meth:`do_reput`)."""
        self.reput_from = offset
        self.limit = limit

    def limit_to(self, limit: Callable[[], int]) -> None:
        """Dispatch up to ``limit()`` from now on (the store's limit once it is open,
        after the recovered end during ``open``)."""
        self.limit = limit

    def index_from(self, position: int) -> None:
        """Rebuild the index from ``position`` in the background (an
        :class:`IndexCatchUp`, stepped by this thread); records dispatched meanwhile
        get their units at once and their index entries from the catch-up."""
        self.catch_up = IndexCatchUp(self._segments, self._dispatcher, position)

    def hand_over_index(self) -> int | None:
        """Drop the pending index catch-up and return where it stood (None: none), for
        whoever rebuilds the index instead (the dispatcher process)."""
        cu, self.catch_up = self.catch_up, None
        return None if cu is None else cu.position

    @property
    def behind(self) -> int:
        """Bytes written to the CommitLog but not dispatched (``dispatchBehindBytes``)."""
        return max(0, self._segments.max_offset - self.reput_from)

    @property
    def indexed(self) -> bool:
        """False while an index catch-up is running or pending (out of space)."""
        d = self._dispatcher
        return self.catch_up is None and (d is None or d.index_pending_from is None)

    def run_once(self) -> None:
        self.do_reput(interruptible=True)
        d = self._dispatcher
        if self.catch_up is None and d is not None and d.index_pending_from is not None:
            self._resume_index(d)
        if (
            self.catch_up is not None
            and (not self._catch_up_retry_at or time.monotonic() >= self._catch_up_retry_at)
            and self._catch_up_step(CHUNK)
        ):
            self.wakeup()  # more to index: no pause between chunks

    def _resume_index(self, d: Dispatcher) -> None:
        """Index disabled for lack of space: try again from the first unindexed message
        (the catch-up's first step reserves space or fails, and is retried)."""
        pending = d.take_pending_index()
        assert pending is not None
        self.catch_up = IndexCatchUp(self._segments, d, pending)

    def _catch_up_step(self, max_records: int) -> bool:
        """One catch-up step; True when it indexed something and is not done."""
        cu = self.catch_up
        assert cu is not None
        before = cu.position
        try:
            done = cu.step(self.reput_from, max_records)
        except OSError as e:
            if self.last_error is None or str(e) != str(self.last_error):
                log.error("index catch-up at %d failed: %s", cu.position, e)
            self.last_error = e
            self._catch_up_retry_at = time.monotonic() + INDEX_RETRY_SECONDS
            return False
        self._catch_up_retry_at = 0.0
        if done:
            self.catch_up = None
            d = self._dispatcher
            if d is not None and d.index_enabled_again():
                log.warning("index enabled again: caught up to %d", cu.position)
            with self._progress:
                self._progress.notify_all()
            return False
        return cu.position != before

    def do_reput(self, *, interruptible: bool = False) -> int:
        """Dispatch everything up to the limit now; return the records dispatched.

        A record whose dispatch raises OSError stays undispatched (retried next
        round); the error is kept in :attr:`last_error`. Any other exception is the
        record's own (a bug, a property its consume queue or index cannot take):
        retrying would stop the dispatch of every record after it, so the record is
        counted in :attr:`failures` and skipped. ``interruptible``: give up
        between chunks of records once :meth:`stop` was called (the thread's own
        rounds; a drain runs to the end).
        """
        done = 0
        segs = self._segments
        budget = self.round_budget if interruptible else None
        while not (interruptible and self._stopped.is_set()):
            if budget is not None and done >= budget:
                break
            limit = self.limit()
            off = self.reput_from
            if off >= limit:
                break
            mf = segs.find(off)
            if mf is None:
                if off < segs.min_offset:  # expired under us: continue from the first file
                    self.reput_from = segs.min_offset
                    continue
                break
            try:
                n, stuck = self._dispatch_file(mf, mf.view, limit, mf.wrote_position)
            except ValueError:  # the file was deleted while we read it
                continue
            done += n
            if n:
                if self.on_progress is not None:
                    self.on_progress(self.reput_from)
                with self._progress:
                    self._progress.notify_all()
            if stuck:
                break
        return done

    def _dispatch_file(
        self, mf: Segment, view: memoryview, limit: int, wrote: int
    ) -> tuple[int, bool]:
        """Dispatch records of one file (``view``: its bytes) from ``reput_from`` up to
        the committed end (``limit``, or what the file holds); (records, must stop).

        Records are read by the cursor's step (:func:`mqstore.commitlog.cursor.step`):
        damage is logged, counted in :attr:`skipped_bytes` and skipped to where the
        step goes on (the next record at its own position, else the committed end). A
        backlog of plain records goes through :attr:`batch`; the rest, and any batch
        whose apply raised (replayed from its start, so every failure is judged as it
        would have been), record by record.
        """
        base, file_size = mf.file_from_offset, mf.file_size
        pos = self.reput_from - base
        end = min(wrote, limit - base)
        done = 0
        dispatch, chunk, batch = self._dispatch_fields, self.chunk, self.batch
        single_until = pos  # record by record below this position
        while pos < end:
            if batch is not None and pos >= single_until and end - pos >= batch.min_bytes:
                b = batch.read(view, pos, end, max(chunk - done, self.batch_records or 0))
                if isinstance(b, int):
                    single_until = b
                else:
                    try:
                        batch.apply(b)
                    except Exception:  # replay it record by record: exact semantics
                        single_until = pos + b.length
                    else:
                        done += b.count
                        pos += b.length
                        self.reput_from = base + pos
                        if done >= chunk:
                            return done, False
                        continue
            item, after = step(view, pos, end, mf)
            if type(item) is tuple:  # a record's DispatchFields
                try:
                    dispatch(*item)
                except OSError as e:
                    self._failed(e, base + pos)
                    return done, True
                except Exception as e:  # this record cannot be dispatched: skip it
                    self.failures.record("dispatch", e, base + pos)
                done += 1
            elif type(item) is Blank:
                self.reput_from = base + after
                return done, False
            else:
                assert type(item) is Damage
                self._skip_damage(item, after - pos)
            pos = after
            self.reput_from = base + pos
            if done >= chunk:
                return done, False
        return done, pos >= wrote < file_size or base + pos >= limit

    def _skip_damage(self, d: Damage, skip: int) -> None:
        """Log and count the undispatchable bytes ``d`` (``skip`` of them)."""
        log.error("[BUG] undispatchable record (%s); skipping %d bytes", d.why, skip)
        self.skipped_bytes += skip

    def _failed(self, e: OSError, offset: int) -> None:
        if self.last_error is None or str(e) != str(self.last_error):
            log.error("dispatch of the record at %d failed: %s", offset, e)
        self.last_error = e

    def wait_until(self, offset: int, timeout: float, *, indexed: bool = True) -> bool:
        """Block until everything before ``offset`` is dispatched (and, with
        ``indexed``, any index catch-up is over, unless the index is disabled for lack
        of space: then only what is indexed is answered); False on timeout."""
        deadline = time.monotonic() + timeout
        d = self._dispatcher
        with self._progress:
            while self.reput_from < offset or (
                indexed and self.catch_up is not None and (d is None or d.index_disabled is None)
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._progress.wait(min(left, 0.05))
        return True

    def stop(self, timeout: float = 30.0, *, drain: bool = True) -> None:
        """Stop the thread, then (``drain``, the default) dispatch up to the current
        limit from this thread, so nothing written before the stop is left behind.
        ``drain=False`` is a crash: the thread just stops."""
        super().stop(timeout)
        if drain:
            self.do_reput()
            d = self._dispatcher
            if self.catch_up is None and d is not None and d.index_pending_from is not None:
                self._resume_index(d)  # one last try; failing, the next open catches up
            while self.catch_up is not None and self._catch_up_step(1 << 30):
                pass  # stops when done, or failing (last_error): the next open redoes it
