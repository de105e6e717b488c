"""PopService: RocketMQ 5.x message-level consumption (POP) over a MessageStore.

A consumer *pops* messages: the service hands them out and hides them from every other
consumer of the group for an *invisible time*; the consumer *acks* each one, or it
becomes visible again when the time runs out (``mqstore.pop.revive``), with its
delivery attempt one higher, until the group's maximum sends it to ``%DLQ%<group>``.
Consumers of a group share every queue. FIFO pops (``fifo=True``) hand out one batch
per queue at a time (``mqstore.pop.fifo``).

State, as RocketMQ keeps it: each popped batch is a checkpoint record and each ack an
ack record in the revive topic of the CommitLog (``mqstore.pop.records``); the next
offset to pop per (topic, group, queue), the revive offsets and the FIFO batches are
saved in ``config/popState.json`` (``mqstore.pop.state``) every ``persist_interval_ms``
and on stop, after a CommitLog flush. A restart replays the revive topic from the
saved revive offsets.

Delivery contract: **at least once**. A message is not lost across a restart or a
crash: it is delivered from its queue until a checkpoint covering it is durable, and
revived from that checkpoint until an ack is durable. An ack that was durable (under
SYNC_FLUSH: every ack that returned OK; under ASYNC_FLUSH: after the next flush) never
lets its message come back; a FIFO ack is durable at the next state save. A crash may
deliver a message again (pop offsets saved up to a second late; a revive not yet
saved).

Use::

    pop = PopService(store)            # store: an open MessageStore
    pop.start()
    r = pop.pop("group", "orders", max_count=16, invisible_ms=30_000)
    for m in r.messages:
        pop.ack("group", "orders", m.receipt_handle)
    pop.stop()                         # before store.close()

Thread-safe. Pops of one (topic, group, queue) are serialised by a lock of their own.
"""

from __future__ import annotations

import contextlib
import enum
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mqstore.closeable import Stoppable
from mqstore.consumequeue.dispatch import Arrival
from mqstore.consumequeue.filter import Subscription
from mqstore.consumequeue.results import StoredMessage
from mqstore.errors import InvalidReceiptHandleError, StoreClosedError
from mqstore.pop import state as pop_state
from mqstore.pop.fifo import OrderInfo
from mqstore.pop.inflight import InFlight, Pending
from mqstore.pop.receipt import ReceiptHandle, retry_flag
from mqstore.pop.records import (
    MAX_BATCH,
    POP_ORDER_REVIVE_QUEUE,
    REVIVE_GROUP,
    AckMsg,
    PopCheckPoint,
    ckey,
    dlq_topic,
    java_long,
    pop_retry_topic,
    revive_topic,
)
from mqstore.pop.revive import REVIVE_TICK_MS, Reviver, ReviveThread, replay
from mqstore.pop.state import PopStateTables, QueueKey
from mqstore.pop.writer import RecordWriter
from mqstore.status import GetStatus

if TYPE_CHECKING:
    from mqstore.store_view import StoreView

DEFAULT_MAX_ATTEMPTS = 17
"""A group's ``retryMaxTimes`` (16) + 1, as the 5.x proxy counts delivery attempts."""


class PopStatus(enum.Enum):
    """Outcome of a pop (RocketMQ ``PopStatus``)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"


class AckStatus(enum.Enum):
    """Outcome of an ack or a change of invisible time (RocketMQ ``AckStatus``):
    ``NO_EXIST`` when the handle's message is no longer in flight (acknowledged,
    revived after its invisible time, or made stale by a change)."""

    OK = "OK"
    NO_EXIST = "NO_EXIST"


@dataclass(frozen=True, slots=True)
class PopConfig:
    """Knobs of the POP service; defaults are RocketMQ's where it has one."""

    broker_name: str = "broker-a"
    revive_queue_num: int = 8
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    """Delivery attempts of a message before it goes to ``%DLQ%<group>``."""
    persist_interval_ms: int = 1000
    pop_from_retry_probability: int = 20
    """Percent of pops that look at the retry topic before the topic's queues."""


@dataclass(slots=True)
class PoppedMessage:
    """A message handed out by a pop, with what the consumer needs to settle it: the
    value a :class:`~mqstore.client.simple_consumer.SimpleConsumer` receives.

    Only the receipt changes: :meth:`renew` takes the handle of a change of invisible
    time in place, as RocketMQ's clients update the message they hold, so the holder
    acks with the latest handle. The rest is what was popped."""

    message: StoredMessage
    topic: str
    """The topic consumed (the original topic for a redelivered message)."""
    receipt_handle: str
    delivery_attempt: int
    invisible_deadline_ms: int

    @property
    def body(self) -> bytes:
        """The message body."""
        return self.message.body

    @property
    def msg_id(self) -> str:
        """The client message id (UNIQ_KEY), kept across redeliveries."""
        return self.message.uniq_key or self.message.msg_id

    @property
    def tags(self) -> str | None:
        """The TAGS property."""
        return self.message.tags

    @property
    def keys(self) -> list[str]:
        """The KEYS property split on spaces."""
        return self.message.keys

    @property
    def properties(self) -> dict[str, str]:
        """Every property of the stored message."""
        return self.message.properties

    def renew(self, receipt_handle: str) -> None:
        """Hold the message under ``receipt_handle`` (the answer of a change of
        invisible time) until the deadline it carries.

        Raises:
            InvalidReceiptHandleError: ``receipt_handle`` does not parse.
        """
        self.invisible_deadline_ms = ReceiptHandle.parse(receipt_handle).deadline
        self.receipt_handle = receipt_handle


@dataclass(frozen=True, slots=True)
class _PopRound:
    """What one pop asks, the same for every queue it tries: messages of ``topic``
    (or its retry topic) matching ``subscription`` for ``group``, popped at ``now``
    (ms) and hidden for ``invisible`` ms under revive queue ``revive_qid``."""

    group: str
    topic: str
    subscription: str | Subscription
    now: int
    invisible: int
    revive_qid: int


@dataclass(frozen=True, slots=True)
class PopResult:
    """Outcome of :meth:`PopService.pop` (RocketMQ ``PopResult``)."""

    status: PopStatus
    messages: tuple[PoppedMessage, ...]
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int = 0
    """Messages left after this pop in the queues it looked at (RocketMQ's ``restNum``:
    each queue's max offset less the group's next offset there, summed)."""


@dataclass(frozen=True, slots=True)
class ChangeResult:
    """Outcome of :meth:`PopService.change_invisible_time`: the new handle replaces the old."""

    status: AckStatus
    receipt_handle: str = ""
    pop_time: int = 0
    invisible_time: int = 0


class SharedOffsets(Protocol):
    """The broker's consumer offset table (``mqstore.broker.offsets.ConsumerOffsetManager``),
    the one position a group's pulls and pops share (docs/pop.md §11)."""

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed next offset, None if none."""

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Commit ``offset`` as the next one to consume."""


class PopService(Stoppable):
    """POP over one store (see the module docstring): ``start()`` before use, ``stop()``
    before the store closes; ``with`` does both."""

    def __init__(
        self,
        store: StoreView,
        config: PopConfig | None = None,
        *,
        queue_ids: Callable[[str], Sequence[int]] | None = None,
        max_attempts: Callable[[str], int] | None = None,
        shared_offsets: SharedOffsets | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.config = config or PopConfig()
        self.revive_topic = revive_topic(store.cfg.broker_cluster)
        self._queue_ids = queue_ids or self._store_queue_ids
        self._max_attempts = max_attempts or (lambda _g: self.config.max_attempts)
        self._shared = shared_offsets
        self._clock = clock
        self._writer = RecordWriter(store, self.revive_topic)
        self.inflight = InFlight()
        self.reviver = Reviver(store, self.inflight, self._writer, self._max_attempts, clock)
        self._offsets: dict[QueueKey, int] = {}
        self._orders: dict[QueueKey, OrderInfo] = {}
        self._revive_offsets: dict[int, int] = {}
        self._saved: PopStateTables | None = None
        self._locks: dict[QueueKey, threading.Lock] = {}
        self._revive_lock = threading.Lock()
        self._arrived = threading.Condition()
        self._generation = 0
        self._waiters = 0
        self._thread: ReviveThread | None = None
        self._random = random.Random()

    # ------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Load the saved state, replay the revive topic, start the revive thread."""
        tables = pop_state.load(self._state_dir)
        self._offsets = dict(tables.offsets)
        self._revive_offsets = dict(tables.revive_offsets)
        self._orders = {k: OrderInfo.from_json(v) for k, v in tables.order_info.items()}
        self.store.wait_dispatched(30.0)
        for qid in range(self.config.revive_queue_num):
            start = self._revive_offsets.get(qid, 0)
            replay(self.store, self.revive_topic, qid, start, self.inflight, self._offsets)
        self.store.add_arrival_listener(self._on_arrival)
        self._thread = ReviveThread(
            self._revive_locked, self.inflight.next_revive_time, self.persist,
            self.config.persist_interval_ms, self._clock,
        )  # fmt: skip
        self._thread.start()

    def stop(self) -> None:
        """Stop the revive thread and save the state (call before closing the store)."""
        if self._thread is None:
            return
        self._thread.stop()
        self._thread = None
        self.store.remove_arrival_listener(self._on_arrival)
        with self._arrived:
            self._generation += 1
            self._arrived.notify_all()
        self.persist()

    @property
    def _state_dir(self) -> Path:
        return Path(self.store.root) / "config"

    def persist(self) -> None:
        """Save the POP state now (see ``mqstore.pop.state`` for the durability rule).

        Raises:
            OSError: the flush or the file write failed.
        """
        with self._revive_lock:
            low = self.inflight.low_water()
            revive = {}
            for qid in range(self.config.revive_queue_num):
                end = self.store.max_offset_in_queue(self.revive_topic, qid)
                revive[qid] = min(low.get(qid, end), end)
            offsets = dict(self._offsets)
            orders = {k: v.to_json() for k, v in list(self._orders.items())}
            tables = PopStateTables(offsets, revive, orders)
            if tables == self._saved:
                return  # nothing moved since the last save
            self.store.flush()
            pop_state.save(self._state_dir, tables)
            self._saved = tables
            self._revive_offsets = revive

    def _revive_locked(self) -> int:
        with self._revive_lock:
            return self.reviver.revive_due()

    # ------------------------------------------------------------------ pop

    def pop(
        self,
        group: str,
        topic: str,
        max_count: int = MAX_BATCH,
        invisible_ms: int = 60_000,
        *,
        queue_id: int = -1,
        subscription: str | Subscription = "*",
        fifo: bool = False,
        wait_ms: int = 0,
    ) -> PopResult:
        """Take up to ``max_count`` (at most ``MAX_BATCH``, 32; 0: none, only
        ``rest_num`` is counted) visible messages of
        ``topic`` for ``group`` and hide them for ``invisible_ms``; ``queue_id`` -1 means
        every queue. With ``wait_ms`` > 0 the call waits that long for a message (long
        polling).

        Raises:
            StoreClosedError: the service is not started or the store is closed.
        """
        if self._thread is None:
            raise StoreClosedError("POP service not started")
        if isinstance(subscription, Subscription) and subscription.sql is not None:
            # the subscription is known from now on: its verdicts are computed at
            # dispatch (``MessageStore.register_sql_filter``); without, read the old way
            with contextlib.suppress(OSError):
                self.store.register_sql_filter(topic, subscription.expression)
        max_count = max(0, min(max_count, MAX_BATCH))
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            gen = self._generation
            result = self._pop_once(group, topic, max_count, invisible_ms, queue_id,
                                    subscription, fifo)  # fmt: skip
            left = deadline - time.monotonic()
            if result.messages or left <= 0 or self._thread is None:
                return result
            self._wait(gen, min(left, 0.05))

    def _pop_once(
        self,
        group: str,
        topic: str,
        n: int,
        invisible: int,
        queue_id: int,
        sub: str | Subscription,
        fifo: bool,
    ) -> PopResult:
        revive_qid = (
            POP_ORDER_REVIVE_QUEUE if fifo
            else self._random.randrange(self.config.revive_queue_num)
        )  # fmt: skip
        r = _PopRound(group, topic, sub, int(self._clock() * 1000), invisible, revive_qid)
        out: list[PoppedMessage] = []
        sources = self._sources(group, topic, queue_id, fifo)
        for t, qid in sources:
            if len(out) >= n:
                break
            pop = self._pop_fifo if fifo else self._pop_queue
            out.extend(pop(r, t, qid, n - len(out)))
        rest = sum(self._backlog((t, group, qid)) for t, qid in sources)
        status = PopStatus.FOUND if out else PopStatus.NO_NEW_MSG
        return PopResult(status, tuple(out), r.now, invisible, revive_qid, rest)

    def _backlog(self, key: QueueKey) -> int:
        """Messages of the queue past the group's next offset there."""
        return max(0, self.store.max_offset_in_queue(key[0], key[2]) - self._start_offset(key))

    def _sources(self, group: str, topic: str, queue_id: int, fifo: bool) -> list[tuple[str, int]]:
        """(topic, queue) pairs to try, in order: the topic's queues from a random one,
        and (not for FIFO) the retry topic first with ``pop_from_retry_probability``
        percent, else last."""
        qids = list(self._queue_ids(topic)) if queue_id < 0 else [queue_id]
        if len(qids) > 1:
            k = self._random.randrange(len(qids))
            qids = qids[k:] + qids[:k]
        pairs = [(topic, q) for q in qids]
        if fifo:
            return pairs
        retry = [(pop_retry_topic(topic, group), 0)]
        if self._random.randrange(100) < self.config.pop_from_retry_probability:
            return retry + pairs
        return pairs + retry

    def _lock(self, key: QueueKey) -> threading.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks.setdefault(key, threading.Lock())
        return lock

    def _start_offset(self, key: QueueKey) -> int:
        """Where the group's next pop of the queue starts: the further of its POP
        position and, with ``shared_offsets``, the offset committed there (a pull
        consumer's commit, or our own); neither: the queue's first message."""
        known = [self._offsets.get(key)]
        if self._shared is not None:
            known.append(self._shared.query(key[1], key[0], key[2]))
        offsets = [o for o in known if o is not None and o >= 0]
        if not offsets:
            return self.store.min_offset_in_queue(key[0], key[2])
        return max(offsets)

    def _advance(self, key: QueueKey, offset: int) -> None:
        """The group has consumed the queue up to ``offset`` (popped, or for FIFO
        acknowledged): the next pop starts there, and so does a pull of the group
        (committed to ``shared_offsets``, as ``PopMessageProcessor`` commits to the
        ConsumerOffsetManager)."""
        self._offsets[key] = offset
        if self._shared is not None:
            self._shared.commit(key[1], key[0], key[2], offset)

    def _get(
        self, group: str, topic: str, qid: int, offset: int, n: int, sub: str | Subscription
    ) -> tuple[list[StoredMessage], int]:
        r = self.store.get_message(group, topic, qid, offset, n, sub)
        if r.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
            offset = r.next_begin_offset
            r = self.store.get_message(group, topic, qid, offset, n, sub)
        return list(r.messages), r.next_begin_offset

    def _pop_queue(self, r: _PopRound, t: str, qid: int, n: int) -> list[PoppedMessage]:
        """Up to ``n`` messages of queue ``qid`` of ``t`` (the topic or its retry topic),
        under one checkpoint."""
        key = (t, r.group, qid)
        with self._lock(key):
            start = self._start_offset(key)
            msgs, nxt = self._get(r.group, t, qid, start, n, r.subscription)
            if not msgs:
                if nxt > start:
                    self._advance(key, nxt)  # filtered out: consumed for this group
                return []
            first = msgs[0].queue_offset
            ck = PopCheckPoint(t, r.group, qid, first, r.now, r.invisible,
                               tuple(m.queue_offset - first for m in msgs),
                               self.config.broker_name)  # fmt: skip
            if not self._write_checkpoint(ck, r.revive_qid):
                return []
            self._advance(key, nxt)
        return self._handed_out(r, t, qid, first, [(m, m.reconsume_times + 1) for m in msgs])

    def _handed_out(
        self, r: _PopRound, t: str, qid: int, first: int, msgs: list[tuple[StoredMessage, int]]
    ) -> list[PoppedMessage]:
        """``msgs`` (each with its delivery attempt) as popped from queue ``qid`` of
        ``t`` under the checkpoint or FIFO batch that starts at offset ``first``."""
        flag = retry_flag(t)
        broker = self.config.broker_name
        deadline = java_long(r.now + r.invisible)
        out = []
        for m, attempt in msgs:
            h = ReceiptHandle(first, r.now, r.invisible, r.revive_qid, flag, broker, qid,
                              m.queue_offset)  # fmt: skip
            out.append(PoppedMessage(m, r.topic, h.encode(), attempt, deadline))
        return out

    def _write_checkpoint(self, ck: PopCheckPoint, revive_qid: int) -> bool:
        """Register ``ck`` in flight (with a lower bound of its revive-queue offset, so
        a concurrent state save cannot pass it) and write its record."""
        low = self.store.max_offset_in_queue(self.revive_topic, revive_qid)
        self.inflight.add(Pending(ck, revive_qid, low))
        r = self._writer.put_checkpoint(ck, revive_qid)
        if not r.status.stored:
            self.inflight.discard(ck.key)
            return False
        self.inflight.set_ck_offset(ck.key, r.queue_offset)
        if ck.invisible_time < REVIVE_TICK_MS:  # the thread looks at least this often
            self._wake_reviver()
        return True

    def _wake_reviver(self) -> None:
        t = self._thread
        if t is not None:
            t.wakeup()

    # ------------------------------------------------------------------ FIFO

    def _pop_fifo(self, r: _PopRound, t: str, qid: int, n: int) -> list[PoppedMessage]:
        """The queue's next FIFO batch: the expired batch's unacknowledged messages
        again, else up to ``n`` new ones; nothing while a batch is in flight."""
        key = (t, r.group, qid)
        with self._lock(key):
            info = self._orders.get(key)
            if info is not None:
                if r.now < info.deadline:
                    return []  # the queue's batch is in flight: nothing else for the group
                msgs = self._redeliver_fifo(key, info, r.group, r.now, r.invisible)
                if msgs:
                    return self._handed_out(r, t, qid, info.offsets[0], msgs)
            start = self._start_offset(key)
            found, nxt = self._get(r.group, t, qid, start, n, r.subscription)
            if not found:
                if nxt > start:
                    self._advance(key, nxt)
                return []
            info = OrderInfo(r.now, r.invisible, [m.queue_offset for m in found], [1] * len(found))
            info.extra["next"] = nxt
            self._orders[key] = info
            return self._handed_out(r, t, qid, info.offsets[0], [(m, 1) for m in found])

    def _redeliver_fifo(
        self, key: QueueKey, info: OrderInfo, group: str, now: int, invisible: int
    ) -> list[tuple[StoredMessage, int]]:
        """The expired batch's unacknowledged messages again, attempt + 1; those past
        the maximum go to the DLQ. Clears the batch (commits the offset) when none is left."""
        out: list[tuple[StoredMessage, int]] = []
        for offset, attempts in info.unacked():
            m = self.reviver.read(key[0], key[2], offset)
            if m is not None and attempts >= self._max_attempts(group):
                r = self._writer.put_copy(m, dlq_topic(group), key[0], info.pop_time)
                if not r.status.stored:
                    return []  # try again at the next pop
                self.reviver.dead += 1
                m = None
            if m is None:
                info.ack(offset)
                continue
            i = info.offsets.index(offset)
            info.attempts[i] = attempts + 1
            out.append((m, attempts + 1))
        if out:
            info.pop_time, info.invisible_time = now, invisible
        else:
            self._advance(key, int(info.extra.get("next", info.next_offset())))
            del self._orders[key]
        return out

    def _ack_fifo(self, key: QueueKey, h: ReceiptHandle) -> AckStatus:
        with self._lock(key):
            info = self._orders.get(key)
            if info is None or info.pop_time != h.pop_time or not info.ack(h.queue_offset):
                return AckStatus.NO_EXIST
            if info.done():
                self._advance(key, int(info.extra.get("next", info.next_offset())))
                del self._orders[key]
            return AckStatus.OK

    def _change_fifo(self, key: QueueKey, h: ReceiptHandle, invisible: int) -> ChangeResult:
        with self._lock(key):
            info = self._orders.get(key)
            if (
                info is None
                or info.pop_time != h.pop_time
                or h.queue_offset not in [o for o, _ in info.unacked()]
            ):
                return ChangeResult(AckStatus.NO_EXIST)
            now = int(self._clock() * 1000)
            info.invisible_time = java_long(java_long(now + invisible) - info.pop_time)
            nh = ReceiptHandle(h.ck_start_offset, info.pop_time, info.invisible_time,
                               POP_ORDER_REVIVE_QUEUE, h.retry, h.broker_name, h.queue_id,
                               h.queue_offset)  # fmt: skip
            return ChangeResult(AckStatus.OK, nh.encode(), info.pop_time, info.invisible_time)

    # ------------------------------------------------------------------ acks

    def _key_of(self, group: str, topic: str, h: ReceiptHandle) -> QueueKey:
        return (h.real_topic(topic, group), group, h.queue_id)

    def ack(self, group: str, topic: str, receipt_handle: str) -> AckStatus:
        """Acknowledge one popped message: it is not delivered again.

        Raises:
            InvalidReceiptHandleError: the handle does not parse.
        """
        return self.batch_ack(group, topic, [receipt_handle])[0]

    def batch_ack(self, group: str, topic: str, handles: Iterable[str]) -> list[AckStatus]:
        """Acknowledge several messages; acks of one checkpoint share one ``bAck`` record.

        Raises:
            InvalidReceiptHandleError: a handle does not parse (nothing is acknowledged).
        """
        parsed = [ReceiptHandle.parse(h) for h in handles]
        out: list[AckStatus] = [AckStatus.NO_EXIST] * len(parsed)
        groups: dict[tuple[str, int, int, int, str], list[int]] = {}
        for i, h in enumerate(parsed):
            key = self._key_of(group, topic, h)
            if h.revive_qid == POP_ORDER_REVIVE_QUEUE:
                out[i] = self._ack_fifo(key, h)
            else:
                g = (key[0], h.queue_id, h.ck_start_offset, h.pop_time, h.broker_name)
                groups.setdefault(g, []).append(i)
        for (t, qid, start, pop_time, broker), idx in groups.items():
            ck = ckey(t, group, qid, start, pop_time, broker)
            offsets = [parsed[i].queue_offset for i in idx]
            newly = self.inflight.ack(ck, offsets)
            if not newly:
                continue
            h0 = parsed[idx[0]]
            ack = AckMsg(t, group, qid, start, pop_time, broker, tuple(newly))
            self._writer.put_ack(ack, h0.revive_qid, h0.deadline)
            for i in idx:
                if parsed[i].queue_offset in newly:
                    out[i] = AckStatus.OK
        return out

    def change_invisible_time(
        self, group: str, topic: str, receipt_handle: str, invisible_ms: int
    ) -> ChangeResult:
        """Hide a popped message for ``invisible_ms`` from now instead; use the returned
        handle from then on (``ChangeInvisibleTimeProcessor``: a new checkpoint for the
        message, then an ack of the old one).

        Raises:
            InvalidReceiptHandleError: the handle does not parse.
        """
        h = ReceiptHandle.parse(receipt_handle)
        key = self._key_of(group, topic, h)
        if h.revive_qid == POP_ORDER_REVIVE_QUEUE:
            return self._change_fifo(key, h, invisible_ms)
        old = ckey(key[0], group, h.queue_id, h.ck_start_offset, h.pop_time, h.broker_name)
        p = self.inflight.get(old)
        if p is None or h.queue_offset in p.acked or h.queue_offset not in p.ck.offsets:
            return ChangeResult(AckStatus.NO_EXIST)
        now = max(int(self._clock() * 1000), h.pop_time + 1)
        ck = PopCheckPoint(key[0], group, h.queue_id, h.queue_offset, now, invisible_ms, (0,),
                           h.broker_name)  # fmt: skip
        if not self._write_checkpoint(ck, h.revive_qid):
            return ChangeResult(AckStatus.NO_EXIST)
        if self.inflight.ack(old, [h.queue_offset]):
            ack = AckMsg(key[0], group, h.queue_id, h.ck_start_offset, h.pop_time,
                         h.broker_name, (h.queue_offset,))  # fmt: skip
            self._writer.put_ack(ack, h.revive_qid, h.deadline)
        nh = ReceiptHandle(h.queue_offset, now, invisible_ms, h.revive_qid, h.retry,
                           h.broker_name, h.queue_id, h.queue_offset)  # fmt: skip
        return ChangeResult(AckStatus.OK, nh.encode(), now, invisible_ms)

    def forward_to_dlq(self, group: str, topic: str, receipt_handle: str) -> AckStatus:
        """Send a popped message to ``%DLQ%<group>`` now and settle it (the 5.x
        ForwardMessageToDeadLetterQueue): NO_EXIST if it is no longer in flight.

        Raises:
            InvalidReceiptHandleError: the handle does not parse.
        """
        h = ReceiptHandle.parse(receipt_handle)
        key = self._key_of(group, topic, h)
        m = self.reviver.read(key[0], key[2], h.queue_offset)
        if m is None:
            return AckStatus.NO_EXIST
        if h.revive_qid == POP_ORDER_REVIVE_QUEUE:
            info = self._orders.get(key)
            in_flight = (
                info is not None
                and info.pop_time == h.pop_time
                and h.queue_offset in [o for o, _ in info.unacked()]
            )
        else:
            ck = ckey(key[0], group, h.queue_id, h.ck_start_offset, h.pop_time, h.broker_name)
            p = self.inflight.get(ck)
            in_flight = p is not None and h.queue_offset in p.unacked
        if not in_flight:
            return AckStatus.NO_EXIST
        r = self._writer.put_copy(m, dlq_topic(group), topic, h.pop_time)
        if not r.status.stored:
            return AckStatus.NO_EXIST
        self.reviver.dead += 1
        return self.ack(group, topic, receipt_handle)

    # ------------------------------------------------------------------ peek

    def peek(
        self, group: str, topic: str, max_count: int = 32, *, queue_id: int = -1,
        subscription: str | Subscription = "*",
    ) -> list[StoredMessage]:  # fmt: skip
        """The next messages a pop of ``group`` would read from the topic's queues,
        without hiding them or moving anything (PEEK_MESSAGE)."""
        qids = list(self._queue_ids(topic)) if queue_id < 0 else [queue_id]
        out: list[StoredMessage] = []
        for qid in qids:
            if len(out) >= max_count:
                break
            start = self._start_offset((topic, group, qid))
            msgs, _ = self._get(group, topic, qid, start, max_count - len(out), subscription)
            out.extend(msgs)
        return out

    # --------------------------------------------------------- notification

    def has_messages(self, group: str, topic: str, queue_id: int = -1) -> bool:
        """True when a pop of ``group`` may find a message of the topic or its retry
        topic (NOTIFICATION: cheap, offsets only; a filter may still reject them)."""
        qids = list(self._queue_ids(topic)) if queue_id < 0 else [queue_id]
        pairs = [(topic, q) for q in qids] + [(pop_retry_topic(topic, group), 0)]
        for t, q in pairs:
            key = (t, group, q)
            info = self._orders.get(key)
            if info is not None:
                if int(self._clock() * 1000) >= info.deadline:
                    return True
                continue
            if self.store.max_offset_in_queue(t, q) > self._start_offset(key):
                return True
        return False

    def wait_for_messages(
        self, group: str, topic: str, queue_id: int = -1, timeout_ms: int = 0
    ) -> bool:
        """Long polling (NOTIFICATION): wait up to ``timeout_ms`` until
        :meth:`has_messages`; return whether it is so."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            gen = self._generation
            if self.has_messages(group, topic, queue_id):
                return True
            left = deadline - time.monotonic()
            if left <= 0 or self._thread is None:
                return False
            self._wait(gen, min(left, 0.05))

    def _wait(self, gen: int, seconds: float) -> None:
        with self._arrived:
            self._waiters += 1
            try:
                if self._generation == gen:
                    self._arrived.wait(seconds)
            finally:
                self._waiters -= 1

    def _on_arrival(self, _a: Arrival) -> None:
        if self._waiters:
            with self._arrived:
                self._generation += 1
                self._arrived.notify_all()

    # ------------------------------------------------------------------ misc

    def _store_queue_ids(self, topic: str) -> list[int]:
        return self.store.queue_ids(topic)

    def in_flight(self, group: str, topic: str) -> int:
        """How many messages of ``topic`` (and of its POP retry topic) ``group`` holds
        popped and not yet acknowledged, FIFO or not; 0 once every one is acked (a
        message whose invisible time ran out counts until the reviver takes it)."""
        topics = frozenset({topic, pop_retry_topic(topic, group)})
        fifo = sum(
            len(info.unacked())
            for (t, g, _q), info in list(self._orders.items())
            if g == group and t in topics
        )
        return self.inflight.unacked_of(group, topics) + fifo

    def offset_of(self, group: str, topic: str, queue_id: int) -> int | None:
        """The next offset ``group`` pops from the queue (None: never popped)."""
        return self._offsets.get((topic, group, queue_id))


def parse_handle(text: str) -> ReceiptHandle:
    """:meth:`ReceiptHandle.parse` (re-exported for callers of the service)."""
    return ReceiptHandle.parse(text)


__all__ = [
    "REVIVE_GROUP",
    "AckStatus",
    "ChangeResult",
    "InvalidReceiptHandleError",
    "PopConfig",
    "PopResult",
    "PopService",
    "PopStatus",
    "PoppedMessage",
    "SharedOffsets",
    "parse_handle",
]
