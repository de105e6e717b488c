"""PushConsumer: register a callback, the client pulls, balances and commits.

RocketMQ ``DefaultMQPushConsumer``::

    consumer = PushConsumer("group", InProcessTransport(core))
    consumer.subscribe("TopicTest", "TagA || TagB")
    consumer.register_message_listener(on_messages)           # concurrent
    # consumer.register_message_listener(on_messages, orderly=True)
    consumer.start()
    ...
    consumer.shutdown()   # offsets persisted, group rebalances at once

Every owned queue is pulled by one service thread (:mod:`mqstore.client.pull_service`,
async long polls), so threads do not grow with queues; messages go to the concurrent
or orderly consume service. CLUSTERING consumers also subscribe to
``%RETRY%<group>``, where RECONSUME_LATER messages come back.
"""

from __future__ import annotations

import logging
import time

from mqstore.client.allocate import MessageQueue
from mqstore.client.consume_concurrently import ConsumeMessageConcurrentlyService
from mqstore.client.consume_orderly import ConsumeMessageOrderlyService
from mqstore.client.consumer_base import ConsumerBase, ServiceState
from mqstore.client.listener import ConcurrentListener, OrderlyListener
from mqstore.client.offset_store import ReadOffsetType
from mqstore.client.process_queue import ProcessQueue
from mqstore.client.pull_service import PullContext, PullMessageService, PullTask
from mqstore.client.rebalance import PullRequest, compute_pull_from_where
from mqstore.client.remote import RemoteTransport
from mqstore.client.running_info import QueueState, running_info_body

log = logging.getLogger(__name__)


class PushConsumer(ConsumerBase):
    """A push consumer of one group. ``start``/``shutdown`` are not thread-safe with
    each other; everything else is. Built with :class:`ConsumerBase`'s arguments; the
    listener and the services it adds start out as the class defaults below.

    Raises (``start``):
        RuntimeError: no listener registered, no subscription, or started twice.
    """

    _listener: ConcurrentListener | OrderlyListener | None = None
    orderly: bool = False
    """Whether the listener is a ``MessageListenerOrderly`` (set with the listener)."""
    consume_service: ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService
    """Built by :meth:`start`, for the kind of listener registered."""
    _pull_service: PullMessageService | None = None
    started_ms = 0
    """When :meth:`start` ran (epoch ms; the running info's start timestamp)."""

    def register_message_listener(
        self, listener: ConcurrentListener | OrderlyListener, *, orderly: bool = False
    ) -> None:
        """Set the callback; ``orderly=True`` for a ``MessageListenerOrderly``."""
        self._listener = listener
        self.orderly = orderly

    def start(self) -> None:
        if self.state is not ServiceState.CREATE_JUST:
            raise RuntimeError(f"consumer {self.group} already started")
        if self._listener is None:
            raise RuntimeError("register a message listener before start()")
        if not self.subscriptions:
            raise RuntimeError("subscribe to a topic before start()")
        self._add_retry_subscription()
        self.started_ms = int(time.time() * 1000)
        orderly: ConsumeMessageOrderlyService | None = None
        if self.orderly:
            orderly = ConsumeMessageOrderlyService(
                self.group,
                self.client_id,
                self.config,
                self._listener,  # type: ignore[arg-type]
                self.brokers,
                self.offset_store,
                self.scheduler,
                self._table,
            )
            self.consume_service = orderly
        else:
            self.consume_service = ConsumeMessageConcurrentlyService(
                self.group,
                self.config,
                self._listener,  # type: ignore[arg-type]
                self.brokers,
                self.offset_store,
                self.scheduler,
            )
        rebalance = self._new_rebalance(self, orderly=self.orderly)
        self._pull_ctx = PullContext(
            self.group,
            self.config,
            self.brokers,
            self.offset_store,
            self.subscriptions,
            self.consume_service,
            self.stopped,
            self.orderly,
            on_offset_illegal=self._on_offset_illegal,
            relocate_offset=self._relocate,
            paused=self.paused,
        )
        self._pull_service = PullMessageService(f"{self.group}-pull", self._pull_ctx)
        self._pull_service.start()
        self._start_services(rebalance)
        for t in self.brokers:
            if isinstance(t, RemoteTransport):
                t.reset_handlers.register(self.group, self.reset_offset)
                t.running_info.register(self.group, self.running_info)
        if orderly is not None:
            orderly.start()  # the lock renewal schedule

    @property
    def flow_control_times(self) -> int:
        """Pulls put off because a queue held too many or too large messages (RocketMQ's
        ``queueFlowControlTimes``), since :meth:`start`."""
        return 0 if self._pull_service is None else self._pull_service.flow_control_times

    def shutdown(self) -> None:
        """Persist offsets and leave the group (idempotent)."""
        if self.state is not ServiceState.RUNNING:
            return
        self._stop_rebalance()
        if self._pull_service is not None:
            self._pull_service.stop()
        for t in self.brokers:
            if isinstance(t, RemoteTransport):
                t.reset_handlers.unregister(self.group)
                t.running_info.unregister(self.group)
        self.consume_service.shutdown(wait=True)
        self._finish_shutdown()

    def pause(self) -> None:
        """Suspend consuming (RocketMQ ``suspend``): pulls wait and the group is not
        rebalanced from here until :meth:`resume`; messages already pulled are still
        consumed."""
        self.paused.set()

    def resume(self) -> None:
        """Resume pulling and rebalancing (RocketMQ ``resume``); rebalances at once."""
        self.paused.clear()
        if self.state is ServiceState.RUNNING:
            self.rebalance_now()

    # -- RebalanceHooks -----------------------------------------------------------------

    def _table(self) -> dict[MessageQueue, ProcessQueue]:
        return self.rebalance.process_queue_table() if self.rebalance is not None else {}

    def remove_unnecessary_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """Persist the dropped queue's offset (orderly: then unlock it)."""
        if isinstance(self.consume_service, ConsumeMessageOrderlyService):
            self.consume_service.remove_unnecessary_queue(mq, pq)
        else:
            self.offset_store.persist(mq)
            self.offset_store.remove_offset(mq)

    def lock(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        if isinstance(self.consume_service, ConsumeMessageOrderlyService):
            return self.consume_service.lock(mq, pq)
        return True

    def dispatch(self, requests: list[PullRequest]) -> None:
        if self.stopped.is_set() or self._pull_service is None:
            return
        for req in requests:
            self._pull_service.execute_now(PullTask(req))

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (docs/admin.md §9): drop the topic's process
        queues, commit ``offsets`` and rebalance, so pulls restart there.

        Called on a transport's reader thread, which must not wait for a broker
        answer: the work runs on the consumer's scheduler."""
        self.scheduler.schedule(0, lambda: self._reset_offset_now(topic, dict(offsets)))

    def _reset_offset_now(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        if self.rebalance is None or self.stopped.is_set():
            return
        for mq in self.rebalance.owned():
            if mq.topic == topic:
                self.rebalance.remove_process_queue(mq)
        for mq, offset in offsets.items():
            self.offset_store.update_offset(mq, offset, increase_only=False)
            self.offset_store.persist(mq)
        self.rebalance_now()

    def running_info(self) -> bytes:
        """GET_CONSUMER_RUNNING_INFO's body for this group (store.client.running_info)."""
        states = []
        for mq, pq in self._table().items():
            committed = self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            states.append(QueueState(mq, pq, -1 if committed is None else committed))
        props = {
            "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
            "PROP_CONSUMEORDERLY": "true" if self.orderly else "false",
            "PROP_CONSUMER_START_TIMESTAMP": str(self.started_ms),
            "PROP_THREADPOOL_CORE_SIZE": str(self.config.consume_thread_max),
            "consumerGroup": self.group,
            "messageModel": self.config.message_model.value,
        }
        return running_info_body(
            properties=props, subscriptions=dict(self.subscriptions), queues=states
        )

    # -- pull-loop callbacks ------------------------------------------------------------

    def _on_offset_illegal(self, mq: MessageQueue) -> None:
        if self.rebalance is not None:
            self.rebalance.remove_process_queue(mq)
        self.rebalance_now()

    def _relocate(self, mq: MessageQueue) -> int:
        assert self.rebalance is not None
        return compute_pull_from_where(
            mq, self.config, self.offset_store, self.brokers, self.rebalance.consume_timestamp_ms
        )
