"""Push consumers' pulls: one service thread for every owned queue (RocketMQ
``PullMessageService``).

Each owned queue is a :class:`PullTask` (its pull request: process queue, next
offset). :class:`PullMessageService` runs one thread that drains a queue of tasks that
are due; for each it makes the checks below and, if the queue may be pulled, sends
an async PULL_MESSAGE (:meth:`Transport.pull_async`) and moves on. The reply comes
back on a transport thread, which only posts it to the service; the service thread
handles it and queues the task again. So a consumer owning 1,000 queues keeps 1,000
long polls outstanding with one thread (the broker holds each up to ``suspend_ms``),
and per-queue waits (flow control, pause, errors) are timers, not sleeping threads.

Per task (docs/client.md §2.2):

1. forget it if the process queue is dropped; while the consumer is paused, look
   again in 1 s;
2. flow control (count, size, span) -> look again in 50 ms;
3. orderly and not locked -> look again after a tenth of the exception delay;
4. pull with the memory offset piggy-backed as ``commit_offset`` (CLUSTERING);
5. FOUND -> hold the messages and hand them to the consume service;
   NO_NEW/NO_MATCHED -> move on, and if nothing is held, record the next offset
   (increase only) so an idle queue's offset follows filtered-out messages;
   OFFSET_ILLEGAL -> record the broker's next offset, persist it, drop the queue and
   rebalance (RocketMQ 5.2+ behaviour);
   broker/transport error, or no reply within ``suspend_ms`` +
   ``pull_reply_margin_ms`` (a broker lost without the connection closing) -> look
   again after the exception delay.

A pull that fails before it is sent (no connection: a refused or hanging dial, no route)
blocked the service thread for as long as it took, so the service leaves that broker's
queues alone for the exception delay or three times that long, whichever is longer: an
address that drops SYNs (a dial times out after 3 s) then costs the other brokers' queues
at most a quarter of the thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from mqstore.client import flow_control
from mqstore.client.allocate import MessageQueue
from mqstore.client.brokers import Brokers
from mqstore.client.consumer_config import ConsumerConfig
from mqstore.client.offset_store import OffsetStore, ReadOffsetType
from mqstore.client.process_queue import ProcessQueue, now_ms
from mqstore.client.rebalance import PullRequest
from mqstore.client.transport import (
    BrokerError,
    Cancellable,
    MessageModel,
    PullQuery,
    PullReply,
    PullStatus,
    TransportError,
)
from mqstore.records import StoredMessage

log = logging.getLogger(__name__)

PULL_DELAY_WHEN_SUSPEND_MS = 1000
"""How long a paused consumer's pull waits before it looks again (RocketMQ's
``PULL_TIME_DELAY_MILLS_WHEN_SUSPEND``)."""


class ConsumeSubmitter(Protocol):
    """The consume service, as a pull loop sees it."""

    def submit(
        self, msgs: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue, dispatch: bool
    ) -> None:
        """Consume ``msgs`` (already held by ``pq``)."""
        ...


@dataclass(frozen=True, slots=True)
class PullContext:
    """Everything a pull loop needs from its consumer (narrow, no consumer object)."""

    group: str
    config: ConsumerConfig
    brokers: Brokers
    offset_store: OffsetStore
    subscriptions: Mapping[str, str]
    consumer: ConsumeSubmitter
    stopped: threading.Event
    orderly: bool
    on_offset_illegal: Callable[[MessageQueue], None]
    relocate_offset: Callable[[MessageQueue], int]
    paused: threading.Event | None = None
    """While set, pulls wait (the consumer is suspended); None: never paused."""


class PullTask:
    """One owned queue's pull request: where to pull next and what is held.

    Owned by the service thread."""

    __slots__ = ("inflight", "locked_first", "mq", "next_offset", "pq")

    def __init__(self, request: PullRequest) -> None:
        self.mq = request.mq
        self.pq = request.pq
        self.next_offset = request.next_offset
        self.locked_first = False
        self.inflight: Cancellable | None = None
        """The outstanding pull; None while the task waits in the service's queue."""


_Reply = tuple[PullTask, Cancellable, PullReply | None, BrokerError | TransportError | None]


class PullMessageService:
    """The one thread that pulls for every owned queue of a consumer.

    ``execute_now``/``execute_later`` queue a task (any thread); ``stop`` ends the
    thread and cancels outstanding pulls. Replies arrive through :meth:`_on_reply`
    from transport threads. Thread-safe.
    """

    def __init__(self, name: str, ctx: PullContext) -> None:
        self._ctx = ctx
        self._cond = threading.Condition()
        self._timers: list[tuple[float, int, PullTask]] = []  # (due, seq, task): a heap
        self._replies: list[_Reply] = []
        self._inflight: dict[PullTask, Cancellable] = {}  # task -> its outstanding pull
        self._deadlines: list[tuple[float, int, PullTask, Cancellable]] = []  # a heap
        self._seq = itertools.count()
        self._stopped = False
        self._broker_down_until: dict[str, float] = {}  # service thread only
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.flow_control_times = 0
        """Pulls put off by flow control, over every queue (RocketMQ's
        ``queueFlowControlTimes``); written by the service thread, read by anyone."""

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread; outstanding pulls are cancelled (replies dropped)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        with self._cond:
            inflight, self._inflight = list(self._inflight.values()), {}
            self._deadlines.clear()
        for handle in inflight:
            handle.cancel()

    def execute_now(self, task: PullTask) -> None:
        """Queue ``task`` for a pull at once (a new queue after rebalance)."""
        self.execute_later(task, 0)

    def execute_later(self, task: PullTask, delay_ms: float) -> None:
        """Queue ``task`` to be looked at in ``delay_ms``."""
        due = time.monotonic() + delay_ms / 1000
        with self._cond:
            heapq.heappush(self._timers, (due, next(self._seq), task))
            if self._timers[0][2] is task:
                self._cond.notify()

    @property
    def outstanding(self) -> int:
        """Pulls sent and not answered yet."""
        with self._cond:
            return len(self._inflight)

    # -- the service thread -------------------------------------------------------------

    def _run(self) -> None:
        while True:
            due: list[PullTask] = []
            expired: list[PullTask] = []
            with self._cond:
                while not self._stopped:
                    while (
                        self._deadlines
                        and self._inflight.get(self._deadlines[0][2]) is not self._deadlines[0][3]
                    ):
                        heapq.heappop(self._deadlines)  # answered: its deadline is moot
                    now = time.monotonic()
                    wake = [h[0][0] for h in (self._timers, self._deadlines) if h]
                    if self._replies or (wake and min(wake) <= now):
                        break
                    self._cond.wait(min(wake) - now if wake else None)
                if self._stopped:
                    return
                replies, self._replies = self._replies, []
                now = time.monotonic()
                while self._timers and self._timers[0][0] <= now:
                    due.append(heapq.heappop(self._timers)[2])
                while self._deadlines and self._deadlines[0][0] <= now:
                    _, _, task, handle = heapq.heappop(self._deadlines)
                    if self._inflight.get(task) is handle:
                        del self._inflight[task]
                        expired.append(task)
            for task, handle, reply, error in replies:
                self._guarded(self._handle_reply, task, handle, reply, error)
            for task in expired:
                self._guarded(self._expire, task)
            for task in due:
                self._guarded(self._look_at, task)

    def _guarded(self, fn: Callable[..., None], *args: object) -> None:
        try:
            fn(*args)
        except Exception:  # one queue's bug must not stop every queue's pulls
            log.exception("pull service: unexpected error")
            task = args[0]
            if isinstance(task, PullTask):
                self.execute_later(task, self._ctx.config.exception_delay_ms)

    def _look_at(self, task: PullTask) -> None:
        """Steps 1-4 of the module docstring for one due task."""
        ctx, pq = self._ctx, task.pq
        if pq.dropped or ctx.stopped.is_set():
            return
        if ctx.paused is not None and ctx.paused.is_set():
            self.execute_later(task, PULL_DELAY_WHEN_SUSPEND_MS)
            return
        if flow_control.check(pq, ctx.config, orderly=ctx.orderly) is not None:
            self.flow_control_times += 1
            self.execute_later(task, ctx.config.flow_control_delay_ms)
            return
        if ctx.orderly:
            if not pq.locked:
                self.execute_later(task, ctx.config.exception_delay_ms // 10)
                return
            if not task.locked_first:
                try:
                    task.next_offset = ctx.relocate_offset(task.mq)
                except (TransportError, BrokerError):
                    self.execute_later(task, ctx.config.exception_delay_ms)
                    return
                task.locked_first = True
        self._send(task)

    def _send(self, task: PullTask) -> None:
        ctx, mq = self._ctx, task.mq
        down_until = self._broker_down_until.get(mq.broker_name, 0.0)
        if down_until > time.monotonic():
            self.execute_later(task, (down_until - time.monotonic()) * 1000)
            return
        commit: int | None = None
        if ctx.config.message_model is MessageModel.CLUSTERING:
            mem = ctx.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            commit = mem if mem is not None and mem > 0 else None
        slot: list[Cancellable] = []
        early: list[tuple[PullReply | None, BrokerError | TransportError | None]] = []

        def on_reply(reply: PullReply | None, error: BrokerError | TransportError | None) -> None:
            with self._cond:
                if not slot:  # answered before pull_async returned its handle
                    early.append((reply, error))
                    return
                if self._inflight.get(task) is not slot[0]:
                    return  # expired or stopped: the task was already rescheduled
                del self._inflight[task]
                self._replies.append((task, slot[0], reply, error))
                self._cond.notify()

        wait_ms = max(ctx.config.suspend_ms, 0) + ctx.config.pull_reply_margin_ms
        started = time.monotonic()
        deadline = started + wait_ms / 1000
        try:
            query = PullQuery(
                ctx.group,
                mq,
                task.next_offset,
                ctx.config.pull_batch_size,
                ctx.subscriptions.get(mq.topic, "*"),
                commit_offset=commit,
                suspend_ms=ctx.config.suspend_ms,
            )
            handle = ctx.brokers.for_queue(mq).pull_async(query, on_reply)
        except (TransportError, BrokerError) as e:
            blocked = time.monotonic() - started
            hold_off = max(ctx.config.exception_delay_ms / 1000, 3 * blocked)
            self._broker_down_until[mq.broker_name] = time.monotonic() + hold_off
            self._failed(task, e)
            return
        self._broker_down_until.pop(mq.broker_name, None)
        task.inflight = handle
        with self._cond:
            slot.append(handle)
            if early:  # the reply raced the handle: hand it over now
                self._replies.append((task, handle, *early[0]))
            else:
                self._inflight[task] = handle
                heapq.heappush(self._deadlines, (deadline, next(self._seq), task, handle))
            self._cond.notify()

    def _expire(self, task: PullTask) -> None:
        if task.inflight is not None:
            task.inflight.cancel()
        self._failed(task, TransportError(f"pull of {task.mq} not answered in time"))

    def _failed(self, task: PullTask, error: Exception) -> None:
        task.inflight = None
        if not self._ctx.stopped.is_set():
            log.debug("pull %s failed: %s", task.mq, error)
        self.execute_later(task, self._ctx.config.exception_delay_ms)

    def _handle_reply(
        self,
        task: PullTask,
        handle: Cancellable,
        reply: PullReply | None,
        error: BrokerError | TransportError | None,
    ) -> None:
        """Step 5 of the module docstring."""
        del handle
        if error is not None or reply is None:
            self._failed(task, error or TransportError("empty pull reply"))
            return
        task.inflight = None
        ctx, pq, mq = self._ctx, task.pq, task.mq
        pq.last_pull_timestamp = now_ms()
        if pq.dropped or ctx.stopped.is_set():
            return
        if reply.status is PullStatus.FOUND:
            task.next_offset = reply.next_begin_offset
            msgs = list(reply.messages)
            if msgs:
                dispatch = pq.put_messages(msgs)
                ctx.consumer.submit(msgs, pq, mq, dispatch)
            elif pq.msg_count == 0:
                ctx.offset_store.update_offset(mq, task.next_offset, increase_only=True)
        elif reply.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            task.next_offset = reply.next_begin_offset
            if pq.msg_count == 0:
                ctx.offset_store.update_offset(mq, task.next_offset, increase_only=True)
        else:  # OFFSET_ILLEGAL
            log.warning(
                "%s offset %d illegal, next %d", mq, task.next_offset, reply.next_begin_offset
            )
            pq.dropped = True
            ctx.offset_store.update_offset(mq, reply.next_begin_offset, increase_only=False)
            ctx.offset_store.persist(mq)
            ctx.on_offset_illegal(mq)
            return
        self.execute_later(task, ctx.config.pull_interval_ms)
