"""What push and lite-pull consumers share: identity, subscriptions, offset store,
heartbeats, offset persistence, the rebalance service and broker notifications.

Lifecycle (RocketMQ ``MQClientInstance`` for one group):

``start()``: offset store loaded; one heartbeat to every broker (the broker now lists
us, so the others' rebalance includes us); the rebalance service runs at once, then
every 20 s, when a broker notifies NOTIFY_CONSUMER_IDS_CHANGED, or when the route
poll (every 30 s, ``pollNameServerInterval``) sees a subscribed topic's queue set
change; heartbeats every 30 s; offsets persisted every 5 s.

``shutdown()``: stop pulling, let running batches finish, drop every queue (offsets
persisted, orderly queues unlocked), unregister from every broker (the broker then
notifies the group, which rebalances at once), then stop the threads.
"""

from __future__ import annotations

import enum
import logging
import threading
from pathlib import Path

from mqstore.client.allocate import MessageQueue, Strategy, strategy_by_name
from mqstore.client.brokers import Brokers, label
from mqstore.client.client_instance import make_client_id, unwatch, watch
from mqstore.client.consumer_config import ConsumerConfig, retry_topic
from mqstore.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from mqstore.client.rebalance import RebalanceHooks, RebalanceImpl
from mqstore.client.scheduler import PeriodicTask, Scheduler
from mqstore.client.transport import (
    BrokerError,
    ConsumerData,
    ConsumeType,
    Heartbeat,
    MessageModel,
    SubscriptionData,
    Transport,
    TransportError,
)

log = logging.getLogger(__name__)


class ServiceState(enum.Enum):
    """RocketMQ ``ServiceState``."""

    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"


class ConsumerBase:
    """Shared state and services of one consumer (one group, one client id)."""

    consume_type = ConsumeType.CONSUME_PASSIVELY

    def __init__(
        self,
        group: str,
        transports: Transport | list[Transport],
        config: ConsumerConfig | None = None,
        *,
        strategy: Strategy | None = None,
        offset_dir: Path | None = None,
    ) -> None:
        self.group = group
        self.config = config or ConsumerConfig()
        self.brokers = Brokers(transports)
        self.client_id = make_client_id(self.config.instance_name)
        self.strategy = strategy or strategy_by_name(self.config.allocate_strategy)
        self.subscriptions: dict[str, str] = {}
        self.state = ServiceState.CREATE_JUST
        self.stopped = threading.Event()
        self.scheduler = Scheduler(f"{group}-sched")
        self.offset_store: OffsetStore
        if self.config.message_model is MessageModel.BROADCASTING:
            base = offset_dir or Path.home() / ".rocketmq_offsets"
            self.offset_store = LocalFileOffsetStore(base, self.client_id, group)
        else:
            self.offset_store = RemoteBrokerOffsetStore(group, self.brokers)
        self.rebalance: RebalanceImpl | None = None
        self._rebalance_service: PeriodicTask | None = None
        self._watch_tokens: list[tuple[Transport, int]] = []
        self.paused = threading.Event()
        """Set while suspended (:meth:`PushConsumer.pause`): no rebalance, no pulls."""

    # -- subscriptions ------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume ``topic`` messages whose tag matches ``expression`` (``"A || B"``)."""
        self.subscriptions[topic] = expression or "*"
        self.rebalance_now()

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        self.rebalance_now()

    def _add_retry_subscription(self) -> None:
        if self.config.message_model is MessageModel.CLUSTERING:
            self.subscriptions.setdefault(retry_topic(self.group), "*")

    # -- services -------------------------------------------------------------------

    def _new_rebalance(
        self, hooks: RebalanceHooks, *, orderly: bool = False, push: bool = True
    ) -> RebalanceImpl:
        """A rebalance of this consumer's group, subscriptions and offsets over its
        brokers; ``hooks`` hears of every queue gained or lost."""
        return RebalanceImpl(
            self.group, self.client_id, self.config, self.strategy, self.brokers,
            self.offset_store, self.subscriptions, hooks, orderly=orderly, push=push,
        )  # fmt: skip

    def owned(self) -> list[MessageQueue]:
        """The queues this consumer holds now (all topics, retry included), sorted."""
        return self.rebalance.owned() if self.rebalance is not None else []

    def rebalance_now(self) -> None:
        """Wake the rebalance service (as NOTIFY_CONSUMER_IDS_CHANGED does)."""
        if self._rebalance_service is not None:
            self._rebalance_service.wakeup()

    def heartbeat(self) -> None:
        """HEART_BEAT to every broker (errors logged; the next beat retries)."""
        data = ConsumerData(
            self.group,
            self.consume_type,
            self.config.message_model,
            self.config.consume_from_where,
            tuple(SubscriptionData(t, e) for t, e in sorted(self.subscriptions.items())),
        )
        hb = Heartbeat(self.client_id, (data,))
        for t in self.brokers:
            try:
                t.heartbeat(hb)
            except (TransportError, BrokerError) as e:
                log.warning("%s heartbeat to %s failed: %s", self.client_id, label(t), e)

    def poll_routes(self) -> None:
        """The route poll: wake the rebalance if a subscribed topic's queues changed
        (e.g. a topic updated from 4 to 8 queues), instead of waiting up to 20 s."""
        if self.rebalance is not None and self.rebalance.route_changed():
            self.rebalance_now()

    def persist_offsets(self) -> None:
        """Persist the offsets of every owned queue (the 5 s schedule)."""
        self.offset_store.persist_all(self.owned())

    def _start_services(self, rebalance: RebalanceImpl) -> None:
        self.rebalance = rebalance
        rebalance.on_changed = lambda _t, _mine: self.heartbeat()
        self.offset_store.load()
        self.scheduler.start()
        for t in self.brokers:
            self._watch_tokens.append((t, watch(t, self.group, self.rebalance_now)))
        self.heartbeat()

        def run() -> bool:
            if not self.paused.is_set():  # RocketMQ: doRebalance skips while paused
                rebalance.do_rebalance()
            return rebalance.balanced

        self._rebalance_service = PeriodicTask(
            f"{self.group}-rebalance", self.config.rebalance_interval_ms, run
        )
        self._rebalance_service.start()
        self.scheduler.every(
            self.config.heartbeat_interval_ms, self.config.heartbeat_interval_ms, self.heartbeat
        )
        self.scheduler.every(
            self.config.persist_offset_interval_ms,
            self.config.persist_offset_interval_ms,
            self.persist_offsets,
        )
        self.scheduler.every(
            self.config.poll_name_server_interval_ms,
            self.config.poll_name_server_interval_ms,
            self.poll_routes,
        )
        self.state = ServiceState.RUNNING

    def _stop_rebalance(self) -> None:
        """Stop reacting to membership changes (first step of shutdown)."""
        self.stopped.set()
        for t, token in self._watch_tokens:
            unwatch(t, token)
        self._watch_tokens.clear()
        if self._rebalance_service is not None:
            self._rebalance_service.stop()

    def _finish_shutdown(self) -> None:
        """Drop every queue (persisting offsets), unregister, stop the scheduler."""
        if self.rebalance is not None:
            self.rebalance.drop_all()
        for t in self.brokers:
            try:
                t.unregister(self.client_id, self.group)
            except (TransportError, BrokerError) as e:
                log.warning("%s unregister from %s failed: %s", self.client_id, label(t), e)
        self.scheduler.stop()
        self.state = ServiceState.SHUTDOWN_ALREADY
