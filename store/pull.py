"""The store's reader: pulls, offsets, time and key lookups.

:class:`StoreReader` is what :class:`~mqstore.message_store.MessageStore` delegates
its reads to. It reads the components of an open store (the segments and the
logic files: queues, index, dispatcher) and owns none of them. Each method is
thin glue over the component that owns the algorithm: the pull
(``mqstore.consumequeue.get``), tag filtering (``mqstore.consumequeue.filter``), time
search (``ConsumeQueue.offset_by_time``) and key lookup (``IndexService``).

Reads take no lock and are safe from any thread while the store is open.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from mqstore._lifecycle import StoreState
from mqstore.commitlog import format as fmt
from mqstore.commitlog.segments import Segments
from mqstore.compression import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK
from mqstore.config import BrokerRole, StoreConfig
from mqstore.consumequeue.batch_read import MessageBatch, read_fast, read_filtered
from mqstore.consumequeue.dispatch import ArrivalListener
from mqstore.consumequeue.filter import Subscription, parse_subscription
from mqstore.consumequeue.filter_bits import VerdictReader
from mqstore.consumequeue.get import (
    MAX_PULL_MSG_SIZE,
    PullLimits,
    Selection,
    T,
    Take,
    select,
)
from mqstore.consumequeue.match_list import MatchReader
from mqstore.consumequeue.queue import ConsumeQueue
from mqstore.consumequeue.results import GetRawResult, GetResult, QueryResult
from mqstore.consumequeue.search import BoundaryType, offset_by_time
from mqstore.consumequeue.store import ConsumeQueueStore
from mqstore.errors import StoreClosedError
from mqstore.index.service import IndexService
from mqstore.logics import Logics
from mqstore.records import StoredMessage, stored_message

LONG_MAX = (1 << 63) - 1
_EVERY = parse_subscription("*")
"""Every message: the record filter of a match a match list names."""
INDEX_CATCH_UP_WAIT = 300.0
"""Seconds ``query_by_key`` waits for the index rebuild after a crash (then it
answers from what is indexed)."""
_INFO = fmt.RecordInfo
_new = tuple.__new__
log = logging.getLogger(__name__)


def _crc_ok(view: memoryview, queue_offset: int) -> bool:
    """Whether the record in ``view`` checks out, BODYCRC included (``check_crc_on_read``);
    a record that does not is logged and not served."""
    r = fmt.scan(view, 0, len(view), check_crc=True)
    if type(r) is _INFO:
        return True
    log.warning("record at queue offset %d not served: %s", queue_offset, r)
    return False


def _crc_checked_view(view: memoryview, queue_offset: int) -> memoryview | None:
    """A raw pull's record view, or None when it fails its checks (``check_crc_on_read``)."""
    return view if _crc_ok(view, queue_offset) else None


def _may_match(sub: Subscription) -> Callable[[bytes], bool] | None:
    """The SQL92 substring test of a record's bytes (``SqlFilter.may_match``: False only
    for a record the expression can never match, so it is skipped undecoded), or None
    when the subscription has none."""
    return None if sub.sql is None or sub.sql.needles is None else sub.sql.may_match


def _decoder(
    sub: Subscription, check_crc: bool = False
) -> Callable[[memoryview, int], StoredMessage | None]:
    """The record filter + decoder of a decoded pull: exact tag re-check (or the SQL92
    test of the properties), body inflated.

    Records come through consume-queue units, so the dispatcher validated them:
    the common shape (V1, IPv4 hosts, uncompressed) takes ``fmt.unpack_trusted``
    (one header unpack); anything else, or anything that does not add up,
    takes the full ``fmt.scan``, whose verdict stands. With ``check_crc``
    (``check_crc_on_read``) a record whose BODYCRC fails is not served.
    """
    scan = fmt.scan
    trusted = fmt.unpack_trusted
    exact = not sub.matches_all
    matches_props = sub.matches_properties
    may_match = _may_match(sub)
    compressed = COMPRESSED_FLAG

    def take(view: memoryview, queue_offset: int) -> StoredMessage | None:
        if check_crc and not _crc_ok(view, queue_offset):
            return None
        raw = view.tobytes()
        if may_match is not None and not may_match(raw):
            return None
        fields = trusted(raw, queue_offset)
        if fields is None or fields[6] & compressed:
            info = scan(view, 0, len(view), check_crc=False)
            if type(info) is not _INFO:
                return None
            props = info.properties_string
            if exact and not matches_props(props):
                return None
            return stored_message(info, view, queue_offset)
        if exact and not matches_props(fields[12]):
            return None
        return _new(StoredMessage, fields)

    return take


def _raw_filter(
    sub: Subscription, check_crc: bool
) -> Callable[[memoryview, int], memoryview | None] | None:
    """The record filter of a raw (broker) pull: None (every record the tag-code test
    passed) for a tag subscription, as RocketMQ leaves the exact tag check to the
    client; the SQL92 test of the record's properties for a SQL92 one (the broker's
    ``isMatchedByCommitLog``)."""
    if sub.sql is None:
        return _crc_checked_view if check_crc else None
    scan = fmt.scan
    matches_props = sub.matches_properties
    may_match = _may_match(sub)

    def take(view: memoryview, queue_offset: int) -> memoryview | None:
        if check_crc and not _crc_ok(view, queue_offset):
            return None
        if may_match is not None and not may_match(view.tobytes()):
            return None
        info = scan(view, 0, len(view), check_crc=False)
        if type(info) is not _INFO or not matches_props(info.properties_string):
            return None
        return view

    return take


def store_time_at(log: Segments, physical_offset: int) -> int | None:
    """STORETIMESTAMP of the record at ``physical_offset`` (``pickupStoreTimestamp``)."""
    mf = log.find(physical_offset)
    if mf is None:
        return None
    rel = physical_offset - mf.file_from_offset
    try:
        view = mf.view
        if rel + fmt.SYSFLAG_POS + 4 > mf.wrote_position:
            return None
        sys_flag = int.from_bytes(view[rel + fmt.SYSFLAG_POS : rel + fmt.SYSFLAG_POS + 4], "big")
        pos = rel + fmt.store_timestamp_pos(sys_flag)
        if pos + 8 > mf.wrote_position:
            return None
        return int.from_bytes(view[pos : pos + 8], "big", signed=True)
    except ValueError:  # the file was deleted under us
        return None


class StoreReader:
    """get_message, offsets, time and key lookups over one store's files.

    Args:
        cfg: the store's configuration (role, pull limits, index batch size).
        segments: the CommitLog's segments.
        logics: the consume queues, index and dispatch progress.
        state: the lifecycle's open state (pulls and key lookups refuse a closed store).
    """

    def __init__(
        self, cfg: StoreConfig, segments: Segments, logics: Logics, state: StoreState
    ) -> None:
        self._cfg = cfg
        self._segments = segments
        self._logics = logics
        self._state = state
        self._pull_limits = PullLimits.from_config(cfg)
        self.queues: ConsumeQueueStore = logics.queues
        """All consume queues."""
        self.index: IndexService | None = logics.index
        """The index service (None with ``message_index_enable=False``)."""

    def _check_open(self) -> None:
        if self._state.closed:
            raise StoreClosedError("the store is closed")

    def _correct(self, old: int, new: int) -> int:
        """``nextOffsetCorrection``: a SLAVE without offset checks keeps the old offset."""
        if self._cfg.broker_role is BrokerRole.SLAVE and not self._cfg.offset_check_in_slave:
            return old
        return new

    # --------------------------------------------------------------------- pulls

    def _queue_and_sub(
        self, topic: str, queue_id: int, subscription: str | Subscription | None
    ) -> tuple[ConsumeQueue | None, Subscription]:
        self._check_open()
        sub = (
            subscription
            if isinstance(subscription, Subscription)
            else parse_subscription(subscription)
        )
        return self.queues.find(topic, queue_id), sub

    def _verdicts(self, topic: str, queue_id: int, sub: Subscription) -> VerdictReader | None:
        """The verdicts written at dispatch for ``sub``'s SQL92 expression, if it is
        registered for ``topic`` (``mqstore.consumequeue.filter_bits``)."""
        bits = self._logics.filter_bits
        if bits is None or sub.sql is None:
            return None
        return bits.reader(topic, queue_id, sub)

    def _matches(self, topic: str, queue_id: int, sub: Subscription) -> MatchReader | None:
        """The match list of ``sub``'s SQL92 expression, if it is registered for
        ``topic`` (``mqstore.consumequeue.match_list``)."""
        bits = self._logics.filter_bits
        if bits is None or sub.sql is None:
            return None
        return bits.match_reader(topic, queue_id, sub)

    def _matches_taking(
        self, topic: str, queue_id: int, sub: Subscription, take: Take[T]
    ) -> tuple[MatchReader, Take[T]] | None:
        """The match list of ``sub`` with ``take`` for its listed matches (which the
        dispatch found TRUE: ``take`` reads them without testing the expression)."""
        reader = self._matches(topic, queue_id, sub)
        return None if reader is None else (reader, take)

    def register_sql_filter(self, topic: str, expression: str) -> int | None:
        """Register a SQL92 subscription of ``topic``: each message of the topic
        dispatched from now on is evaluated once, and filtered reads with this
        expression (``get_message``, ``get_message_raw``, ``read_batch``) take the
        verdict instead of reading and evaluating the message. Returns the
        expression's slot, or None when none is free (at most
        ``filter_bits.MAX_SLOTS`` per topic) or the store dispatches in a separate
        process; the reads answer the same either way.

        Raises:
            SqlParseError: the expression does not compile.
            OSError: the registration could not be saved.
        """
        bits = self._logics.filter_bits
        return None if bits is None else bits.register(topic, expression)

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        subscription: str | Subscription | None = "*",
        *,
        max_bytes: int = MAX_PULL_MSG_SIZE,
    ) -> GetResult:
        """Pull up to ``max_count`` messages of (topic, queue_id) from queue ``offset``.

        Statuses and ``next_begin_offset`` follow RocketMQ exactly (the table in
        ``mqstore.consumequeue.get``). ``subscription`` is ``"*"`` or ``"A || B"``;
        messages pass the tag-code filter and then an exact TAGS check, so a tag
        whose hash collides with a subscribed one is not returned. Bodies are
        decompressed. ``group`` is accepted for API compatibility (RocketMQ uses it
        for statistics only).

        Raises:
            StoreClosedError: the store is closed.
        """
        cq, sub = self._queue_and_sub(topic, queue_id, subscription)
        sel = select(
            cq, self._segments, offset, max_count, sub, self._pull_limits,
            _decoder(sub, self._cfg.check_crc_on_read),
            max_bytes=max_bytes, correct=self._correct,
            verdicts=self._verdicts(topic, queue_id, sub),
            matches=self._matches_taking(
                topic, queue_id, sub, _decoder(_EVERY, self._cfg.check_crc_on_read)
            ),
        )  # fmt: skip
        return GetResult(
            sel.status,
            sel.next_begin_offset,
            sel.min_offset,
            sel.max_offset,
            tuple(sel.items),
            sel.suggest_pulling_from_slave,
        )

    def read_batch(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 1024,
        *,
        tags: bool = False,
        subscription: str | Subscription | None = None,
    ) -> MessageBatch:
        """Up to ``max_count`` messages of (topic, queue_id) from queue ``offset`` as
        columns: queue offsets, bodies and, with ``tags``, each message's tags; nothing
        else is decoded. Statuses and offsets as :meth:`get_message`'s, without a pull's
        transfer limits (32 messages "in memory"): an embedded consumer's read. The
        common records take the columnar path (``mqstore.consumequeue.batch_read``); any
        other batch (compressed or IPv6 records, blank units, a batch across files,
        ``check_crc_on_read``) is read through :meth:`get_message`, up to its limits,
        with the same results.

        ``subscription`` (a tag expression or a parsed subscription, SQL92 included;
        None or ``"*"``: every message) delivers what :meth:`get_message` delivers, but
        examines units to the end of the offset's consume-queue file, not a pull's
        16,000 bytes of them, and decodes only the candidates that the tag codes and
        the expression's substring bound leave (``read_filtered``). A batch that
        examined units and found no match is NO_MATCHED_MESSAGE with the offset after
        them.

        Raises:
            StoreClosedError: the store is closed.
        """
        self._check_open()
        cq = self.queues.find(topic, queue_id)
        sub = (
            subscription
            if isinstance(subscription, Subscription)
            else parse_subscription(subscription)
        )
        if cq is not None and not self._cfg.check_crc_on_read:
            low, high = cq.min_offset, cq.max_offset
            if low <= offset < high and max_count > 0:
                if sub.matches_all:
                    fast = read_fast(cq, self._segments, offset, max_count, with_tags=tags)
                else:
                    verdicts = self._verdicts(topic, queue_id, sub)
                    fast = read_filtered(
                        cq, self._segments, offset, max_count, sub, with_tags=tags,
                        verdicts=verdicts, matches=self._matches(topic, queue_id, sub),
                    )  # fmt: skip
                if fast is not None:
                    return fast
        r = self.get_message("", topic, queue_id, offset, max_count, sub)
        return MessageBatch(
            r.status, r.next_begin_offset, r.min_offset, r.max_offset,
            [m.queue_offset for m in r.messages], [m.body for m in r.messages],
            [m.tags for m in r.messages] if tags else None,
        )  # fmt: skip

    def get_message_raw(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        subscription: str | Subscription | None = "*",
        *,
        max_bytes: int = MAX_PULL_MSG_SIZE,
    ) -> GetRawResult:
        """The broker's pull: as :meth:`get_message`, but the records' raw bytes as
        views of the mapped CommitLog and only the tag-code filter applied (the
        client re-filters hash collisions, as RocketMQ's does); a SQL92 subscription
        is tested on each record's properties here, as RocketMQ's broker does.

        Raises:
            StoreClosedError: the store is closed.
        """
        cq, sub = self._queue_and_sub(topic, queue_id, subscription)
        sel: Selection[memoryview] = select(
            cq, self._segments, offset, max_count, sub, self._pull_limits,
            _raw_filter(sub, self._cfg.check_crc_on_read),
            max_bytes=max_bytes, correct=self._correct,
            verdicts=self._verdicts(topic, queue_id, sub),
            matches=self._matches_taking(
                topic, queue_id, sub, _raw_filter(_EVERY, self._cfg.check_crc_on_read)
            ),
        )  # fmt: skip
        return GetRawResult(
            sel.status,
            sel.next_begin_offset,
            sel.min_offset,
            sel.max_offset,
            tuple(sel.items),
            tuple(sel.queue_offsets),
            sel.total_size,
            sel.suggest_pulling_from_slave,
        )

    # ------------------------------------------------------------------- offsets

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The consume queue of (topic, queue_id), None if it was never written."""
        return self.queues.find(topic, queue_id)

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue offset the next message of the queue gets (0 if no queue)."""
        cq = self.queues.find(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The first queue offset still readable (0 if no queue)."""
        cq = self.queues.find(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def offset_by_time(
        self,
        topic: str,
        queue_id: int,
        timestamp: int,
        boundary: BoundaryType = BoundaryType.LOWER,
    ) -> int:
        """Queue offset of the first message stored at or after ``timestamp`` (LOWER:
        ``max_offset`` if all are older) or of the last one at or before it (UPPER:
        ``min_offset`` if all are newer); 0 for an unknown or empty queue."""
        cq = self.queues.find(topic, queue_id)
        if cq is None:
            return 0
        log = self._segments
        return offset_by_time(cq, timestamp, lambda phys, _size: store_time_at(log, phys), boundary)

    def message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time of the message at ``queue_offset``; -1 if not held."""
        cq = self.queues.find(topic, queue_id)
        unit = cq.unit_at(queue_offset) if cq is not None else None
        if unit is None:
            return -1
        t = store_time_at(self._segments, unit[0])
        return -1 if t is None else t

    def earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message of a queue, or of the whole store when
        ``topic`` is None; -1 when there is none."""
        if topic is not None:
            cq = self.queues.find(topic, queue_id)
            if cq is None or cq.min_offset >= cq.max_offset:
                return -1
            return self.message_store_timestamp(topic, queue_id, cq.min_offset)
        t = store_time_at(self._segments, self._segments.min_offset)
        return -1 if t is None else t

    # -------------------------------------------------------------------- keys

    def stored_message_at(
        self, physical_offset: int, *, inflate: bool = True
    ) -> StoredMessage | None:
        """The message at ``physical_offset``, or None when no valid record starts there.

        Its body is decompressed; with ``inflate=False`` it is exactly as stored: a
        compressed body stays compressed and keeps its sysflag bits (RocketMQ's
        ``lookMessageByOffset`` does not inflate either), so a copy of it (a send-back)
        never inflates a body.
        """
        mf = self._segments.find(physical_offset)
        if mf is None:
            return None
        rel = physical_offset - mf.file_from_offset
        try:
            info = fmt.scan(mf.view, rel, mf.wrote_position, check_crc=self._cfg.check_crc_on_read)
            if type(info) is not _INFO:
                return None
            if inflate:
                return stored_message(info, mf.view)
            flags = info.sys_flag & (COMPRESSED_FLAG | COMPRESSION_TYPE_MASK)
            msg = stored_message(info._replace(sys_flag=info.sys_flag & ~COMPRESSED_FLAG), mf.view)
        except ValueError:  # the segment was unmapped meanwhile
            return None
        return msg._replace(sys_flag=msg.sys_flag | flags)

    def query_by_key(
        self, topic: str, key: str, max_num: int = 32, begin: int = 0, end: int = LONG_MAX
    ) -> QueryResult:
        """Messages of ``topic`` whose KEYS token or UNIQ_KEY is ``key``, stored in
        [begin, end] (index times have a one-second resolution), newest first.

        The index returns hash matches; each is checked against the real key and
        topic, so colliding keys never leak through. Up to three index passes, each
        ending before the oldest hit of the previous one (RocketMQ ``queryMessage``),
        fill ``max_num`` (capped by ``max_msgs_num_batch``). Right after a crash
        recovery it first waits (up to :data:`INDEX_CATCH_UP_WAIT` s) for the index
        rebuild, so a key stored before the crash is never reported missing.
        """
        self._check_open()
        if self.index is None:
            return QueryResult(())
        progress = self._logics.progress
        if not progress.indexed:  # rebuilding after a crash: wait for what is written
            progress.wait_until(0, INDEX_CATCH_UP_WAIT)
        want = min(max_num, self._cfg.max_msgs_num_batch)
        batch = self._cfg.max_msgs_num_batch
        found: dict[int, StoredMessage] = {}
        seen: set[int] = set()
        last = (0, 0)
        upper = end
        for _ in range(3):
            r = self.index.query(topic, key, batch, begin, upper)
            last = (r.index_last_update_timestamp, r.index_last_update_phy_offset)
            fresh = [p for p in r.phy_offsets if p not in seen]
            seen.update(fresh)
            oldest = upper
            for phys in fresh:
                m = self.stored_message_at(phys)
                if m is None:
                    continue
                oldest = min(oldest, m.store_timestamp)
                if m.topic == topic and (m.uniq_key == key or key in m.keys):
                    found[phys] = m
            if len(found) >= want or len(r.phy_offsets) < batch or not fresh:
                break
            upper = oldest - 1
        msgs = sorted(found.values(), key=lambda m: m.physical_offset, reverse=True)[:want]
        return QueryResult(tuple(msgs), *last)

    # ---------------------------------------------------------------- dispatch

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Call ``listener(Arrival)`` for each message as it becomes pullable (on the
        dispatcher thread: keep it short; long polling wakes its waiters from it)."""
        self._logics.dispatcher.listeners.append(listener)

    def remove_arrival_listener(self, listener: ArrivalListener) -> None:
        """Stop calling ``listener``."""
        self._logics.dispatcher.listeners.remove(listener)

    @property
    def dispatch_behind_bytes(self) -> int:
        """CommitLog bytes not yet in the consume queues and index."""
        return self._logics.progress.behind

    def wait_dispatched(self, timeout: float = 5.0) -> bool:
        """Block until everything written so far is pullable; False on timeout.

        Under SYNC_FLUSH only flushed messages are dispatched: call this after puts
        that waited for their flush (the default), or it waits for the next flush.
        """
        return self._logics.progress.wait_until(self._segments.max_offset, timeout)
