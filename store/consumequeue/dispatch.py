"""The dispatcher (RocketMQ ``ReputMessageService``): CommitLog -> consume queues + index.

:class:`Dispatcher` handles one record: a unit in its consume queue (NOT and COMMIT
transaction types only: PREPARED and ROLLBACK records have no queue offset), its
keys in the index (everything but ROLLBACK), then an :class:`Arrival` for long
polling. The unit's tags code is the TAGS hash, except for ``SCHEDULE_TOPIC_XXXX``
records with DELAY, whose code is the deliver time (rocketmq-facts 4.3).

:class:`ReputService` is the thread that feeds it: from ``reput_from`` it reads
records up to a limit (the flushed offset under SYNC_FLUSH, so consumers only ever
see durable messages; the written end under ASYNC_FLUSH), dispatches them and
advances. It polls every millisecond, as RocketMQ's does, and :meth:`stop` drains
up to the limit before returning, so a clean shutdown leaves nothing undispatched.

Dispatching is idempotent (already-present units and index entries are skipped), so
recovery may replay any stretch of the log through the same :class:`Dispatcher`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from store.commitlog import format as fmt
from store.commitlog.segments import Segments
from store.consumequeue.store import ConsumeQueueStore
from store.index.service import IndexService
from store.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    string_to_properties,
    tags_code,
)
from store.schedule import SCHEDULE_TOPIC, DelayLevels
from store.service import ServiceThread

log = logging.getLogger(__name__)

_IN_QUEUE = frozenset((fmt.TRANSACTION_NOT_TYPE, fmt.TRANSACTION_COMMIT_TYPE))
_TX_MASK = fmt.TRANSACTION_MASK
_ROLLBACK = fmt.TRANSACTION_ROLLBACK_TYPE
CHUNK = 1024
"""Records dispatched between two looks at the stop flag (and progress notifications)."""


class Arrival(NamedTuple):
    """A message that just became pullable: the next offset to pull is ``queue_offset + 1``."""

    topic: str
    queue_id: int
    queue_offset: int
    tags_code: int
    store_timestamp: int


ArrivalListener = Callable[[Arrival], None]


class Dispatcher:
    """Builds the consume-queue unit and index entries of one record."""

    def __init__(
        self,
        queues: ConsumeQueueStore,
        index: IndexService | None,
        delay_levels: DelayLevels,
    ) -> None:
        self.queues = queues
        self.index = index
        self.delay_levels = delay_levels
        self.listeners: list[ArrivalListener] = []

    def tags_code_of(self, topic: str, props: dict[str, str], store_timestamp: int) -> int:
        """The unit's tags code: TAGS hash, or the deliver time of a delayed record."""
        if topic == SCHEDULE_TOPIC:
            level = props.get(PROPERTY_DELAY_TIME_LEVEL)
            if level is not None and level.strip().lstrip("-").isdigit():
                code = self.delay_levels.deliver_timestamp(int(level), store_timestamp)
                if code is not None:
                    return code
        return tags_code(props.get(PROPERTY_TAGS))

    def __call__(self, info: fmt.RecordInfo, _size: int = 0) -> None:
        """Dispatch one record (the signature of a recovery ``on_record`` callback).

        Raises:
            OSError: a queue or index file could not be created; nothing is lost,
                dispatching the record again completes it.
        """
        # One tuple unpack instead of a dozen NamedTuple attribute lookups.
        (size, _v, _crc, qid, _flag, qoff, phys, sys_flag, _born, _bh, store_ts, _sh,
         _rt, _pt, _bp, _bl, topic, props_string) = info  # fmt: skip
        tx = sys_flag & _TX_MASK
        props = string_to_properties(props_string)
        code = 0
        in_queue = tx in _IN_QUEUE
        if in_queue:
            code = self.tags_code_of(topic, props, store_ts)
            self.queues.put(topic, qid, phys, size, code, qoff, store_ts)
        if self.index is not None and tx != _ROLLBACK:
            keys = props.get(PROPERTY_KEYS)
            self.index.build(
                topic,
                phys,
                store_ts,
                props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                keys.split(" ") if keys else (),
            )
        if in_queue and self.listeners:
            arrival = Arrival(topic, qid, qoff, code, store_ts)
            for listener in self.listeners:
                try:
                    listener(arrival)
                except Exception:  # a listener must not stop dispatching
                    log.exception("arrival listener %r failed", listener)


class ReputService(ServiceThread):
    """The thread that dispatches the CommitLog from ``reput_from`` up to ``limit()``."""

    name = "reput"

    def __init__(
        self,
        segments: Segments,
        dispatch: Callable[[fmt.RecordInfo, int], None],
        *,
        reput_from: int,
        limit: Callable[[], int],
        interval: float = 0.001,
    ) -> None:
        super().__init__(interval)
        self._segments = segments
        self._dispatch = dispatch
        self.limit = limit
        self.reput_from = reput_from
        self.skipped_bytes = 0
        self.last_error: BaseException | None = None
        self._progress = threading.Condition()

    @property
    def behind(self) -> int:
        """Bytes written to the CommitLog but not dispatched (``dispatchBehindBytes``)."""
        return max(0, self._segments.max_offset - self.reput_from)

    def run_once(self) -> None:
        self.do_reput(interruptible=True)

    def do_reput(self, *, interruptible: bool = False) -> int:
        """Dispatch everything up to the limit now; return the records dispatched.

        A record whose dispatch raises OSError stays undispatched (retried next
        round); the error is kept in :attr:`last_error`. ``interruptible``: give up
        between chunks of records once :meth:`stop` was called (the thread's own
        rounds; a drain runs to the end).
        """
        done = 0
        segs = self._segments
        while not (interruptible and self._stopped.is_set()):
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
                n, stuck = self._dispatch_file(
                    mf.view, mf.file_from_offset, mf.file_size, limit, mf.wrote_position
                )
            except ValueError:  # the file was deleted while we read it
                continue
            done += n
            if n:
                with self._progress:
                    self._progress.notify_all()
            if stuck:
                break
        return done

    def _dispatch_file(
        self, view: memoryview, base: int, file_size: int, limit: int, wrote: int
    ) -> tuple[int, bool]:
        """Dispatch records of one file from ``reput_from``; (records, must stop)."""
        pos = self.reput_from - base
        end = min(wrote, limit - base)
        done = 0
        dispatch = self._dispatch
        info_type = fmt.RecordInfo
        while pos < end:
            r = fmt.scan(view, pos, end, check_crc=False)
            if type(r) is info_type:
                try:
                    dispatch(r, r.size)
                except OSError as e:
                    if self.last_error is None or str(e) != str(self.last_error):
                        log.error("dispatch of the record at %d failed: %s", base + pos, e)
                    self.last_error = e
                    return done, True
                pos += r.size
                self.reput_from = base + pos
                done += 1
                if done >= CHUNK:
                    return done, False
            elif isinstance(r, fmt.EndOfSegment):
                self.reput_from = base + file_size
                return done, False
            else:
                assert isinstance(r, fmt.Corrupt)
                skip = r.size if 0 < r.size <= end - pos else end - pos
                log.error(
                    "[BUG] undispatchable record at %d (%s: %s); skipping %d bytes",
                    base + pos,
                    r.kind.value,
                    r.detail,
                    skip,
                )
                self.skipped_bytes += skip
                pos += skip
                self.reput_from = base + pos
        return done, pos >= wrote < file_size or base + pos >= limit

    def wait_until(self, offset: int, timeout: float) -> bool:
        """Block until everything before ``offset`` is dispatched; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._progress:
            while self.reput_from < offset:
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
