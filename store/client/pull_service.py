"""Push consumers' pull loops: one thread per owned queue (RocketMQ ``pullMessage``).

RocketMQ multiplexes async pulls over one ``PullMessageService`` thread; our
:class:`~mqstore.client.transport.Transport` is blocking with long polling, so each owned
queue gets its own loop thread, which ends when the queue is dropped or the consumer
stops. Per iteration (docs/client.md §2.2):

1. stop if the process queue is dropped; while the consumer is paused, wait 1 s;
2. flow control (count, size, span) -> wait 50 ms and re-check;
3. orderly and not locked -> wait the exception delay;
4. pull with the memory offset piggy-backed as ``commit_offset`` (CLUSTERING);
5. FOUND -> hold the messages and hand them to the consume service;
   NO_NEW/NO_MATCHED -> move on, and if nothing is held, record the next offset
   (increase only) so an idle queue's offset follows filtered-out messages;
   OFFSET_ILLEGAL -> record the broker's next offset, persist it, drop the queue and
   rebalance (RocketMQ 5.2+ behaviour);
   broker/transport error -> wait the exception delay.
"""

from __future__ import annotations

import logging
import threading
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
from mqstore.client.transport import BrokerError, MessageModel, PullStatus, TransportError
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


class PullLoop:
    """The pull thread of one queue; see the module docstring for the loop."""

    def __init__(self, ctx: PullContext, request: PullRequest) -> None:
        self._ctx = ctx
        self.mq = request.mq
        self.pq = request.pq
        self.next_offset = request.next_offset
        self.flow_control_times = 0
        self._thread = threading.Thread(
            target=self._run, name=f"pull-{request.mq.topic}-{request.mq.queue_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _wait(self, ms: int) -> None:
        self._ctx.stopped.wait(ms / 1000)

    def _run(self) -> None:
        ctx, pq = self._ctx, self.pq
        locked_first = False
        while not pq.dropped and not ctx.stopped.is_set():
            if ctx.paused is not None and ctx.paused.is_set():
                self._wait(PULL_DELAY_WHEN_SUSPEND_MS)
                continue
            if flow_control.check(pq, ctx.config, orderly=ctx.orderly) is not None:
                self.flow_control_times += 1
                self._wait(ctx.config.flow_control_delay_ms)
                continue
            if ctx.orderly:
                if not pq.locked:
                    self._wait(ctx.config.exception_delay_ms // 10)
                    continue
                if not locked_first:
                    try:
                        self.next_offset = ctx.relocate_offset(self.mq)
                    except (TransportError, BrokerError):
                        self._wait(ctx.config.exception_delay_ms)
                        continue
                    locked_first = True
            try:
                self._pull_once()
            except (TransportError, BrokerError) as e:
                if not ctx.stopped.is_set():
                    log.debug("pull %s failed: %s", self.mq, e)
                self._wait(ctx.config.exception_delay_ms)
                continue
            if ctx.config.pull_interval_ms:
                self._wait(ctx.config.pull_interval_ms)

    def _pull_once(self) -> None:
        ctx, pq, mq = self._ctx, self.pq, self.mq
        commit: int | None = None
        if ctx.config.message_model is MessageModel.CLUSTERING:
            mem = ctx.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            commit = mem if mem is not None and mem > 0 else None
        reply = ctx.brokers.for_queue(mq).pull(
            ctx.group,
            mq,
            self.next_offset,
            ctx.config.pull_batch_size,
            ctx.subscriptions.get(mq.topic, "*"),
            commit_offset=commit,
            suspend_ms=ctx.config.suspend_ms,
        )
        pq.last_pull_timestamp = now_ms()
        if pq.dropped:
            return
        if reply.status is PullStatus.FOUND:
            self.next_offset = reply.next_begin_offset
            msgs = list(reply.messages)
            if msgs:
                dispatch = pq.put_messages(msgs)
                ctx.consumer.submit(msgs, pq, mq, dispatch)
            elif pq.msg_count == 0:
                ctx.offset_store.update_offset(mq, self.next_offset, increase_only=True)
        elif reply.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            self.next_offset = reply.next_begin_offset
            if pq.msg_count == 0:
                ctx.offset_store.update_offset(mq, self.next_offset, increase_only=True)
        else:  # OFFSET_ILLEGAL
            log.warning(
                "%s offset %d illegal, next %d", mq, self.next_offset, reply.next_begin_offset
            )
            pq.dropped = True
            ctx.offset_store.update_offset(mq, reply.next_begin_offset, increase_only=False)
            ctx.offset_store.persist(mq)
            ctx.on_offset_illegal(mq)
