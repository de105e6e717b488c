"""The broker's brain, free of any transport: ``BrokerCore`` answers what clients ask.

Both front ends share it: the asyncio remoting server (``mqstore.broker.server``) and the
in-process transport (``mqstore.broker.inprocess``) call the same methods, so a consumer
behaves the same embedded or over TCP. The core owns the broker state managers, each
in its own module, and wires them to one :class:`~mqstore.message_store.MessageStore`:

=====================  ============================================================
``topics``             topic configs, ``config/topics.json`` (store.broker.topics)
``offsets``            consumer offsets, ``config/consumerOffset.json``
``groups``             subscription groups, ``config/subscriptionGroup.json``
``consumers``          heartbeats, live clients, change notifications
``locks``              orderly-consumer queue leases (60 s)
``hold``               long polling: suspended pulls woken by store arrivals
``sender``             sends and send-backs into the store (store.broker.sending)
``queries``            offset and message queries (store.broker.queries)
=====================  ============================================================

Threads: :meth:`BrokerCore.start` starts the hold service and a housekeeping thread
(persist offsets every ``consumer_offset_persist_interval_ms``, drop clients silent for
``channel_expired_ms``). Every public method is thread-safe and may block on the store
(a put waits for its flush under SYNC_FLUSH), so the asyncio server runs those on a
thread pool (store.broker.server, Rule 4). :meth:`BrokerCore.pull` never blocks on
long polling: it answers through a callback, exactly once, either before returning or
later from a broker thread.

Failures a client must see come back as response codes (``ResponseCode``), as a
RocketMQ broker answers; exceptions are for bugs and a closed store.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mqstore.broker.broker_pop import BrokerPop
from mqstore.broker.connections import ConnectionTable
from mqstore.broker.consumers import ClientChannel, ConsumerManager
from mqstore.broker.hold import PullHoldService
from mqstore.broker.locks import RebalanceLockManager
from mqstore.broker.offsets import ConsumerOffsetManager
from mqstore.broker.pulls import PullCallback, PullOutcome, PullRequest, response_code
from mqstore.broker.queries import BrokerQueries
from mqstore.broker.sendback import (
    retry_topic,
)
from mqstore.broker.sending import MessageSender
from mqstore.broker.subscriptions import SubscriptionGroupManager
from mqstore.broker.topics import (
    SCHEDULE_TOPIC,
    TopicConfig,
    TopicConfigManager,
    system_topics,
)
from mqstore.broker.traffic import TrafficStats
from mqstore.broker.transactions import CheckSettings, TransactionCheckService, TransactionService
from mqstore.config import BrokerRole
from mqstore.consumequeue.filter import SQL92, parse_subscription
from mqstore.consumequeue.get import total_physical_memory
from mqstore.failures import FailureCounter
from mqstore.message import TOPIC_PATTERN
from mqstore.remoting.codes import ResponseCode
from mqstore.remoting.values import Heartbeat, MessageModel, MessageQueue, SubscriptionData
from mqstore.service import ServiceThread
from mqstore.sql92 import SqlParseError
from mqstore.status import GetStatus
from mqstore.store_view import StoreView

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """The broker settings this project honours (RocketMQ ``BrokerConfig`` names)."""

    broker_name: str = "broker-a"
    cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    auto_create_topic_enable: bool = True
    default_topic_queue_nums: int = 4
    """Queues of an auto-created topic when the send does not say (the Java producer's
    ``defaultTopicQueueNums``); capped by TBW102's 8 write queues."""
    auto_create_subscription_group: bool = True
    long_polling_enable: bool = True
    short_polling_time_ms: int = 1000
    hold_check_interval_ms: int = 5000
    notify_consumer_ids_changed_enable: bool = True
    channel_expired_ms: int = 120_000
    rebalance_lock_max_live_ms: int = 60_000
    consumer_offset_persist_interval_ms: int = 5000
    slave_read_enable: bool = False
    enable_property_filter: bool = False
    """``enablePropertyFilter``: serve SQL92 subscriptions (RocketMQ's default: off, and a
    SQL92 pull is SYSTEM_ERROR "The broker does not support consumer to filter message
    by SQL92")."""
    transaction_timeout_ms: int = 6_000
    """``transactionTimeOut``: a half message younger than this is not checked back."""
    transaction_check_interval_ms: int = 60_000
    """``transactionCheckInterval`` (4.9.8's 60 s; 5.3.3 has 30 s)."""
    transaction_check_max: int = 15
    """``transactionCheckMax``: checks before a half message goes to
    ``TRANS_CHECK_MAX_TIME_TOPIC``."""
    namesrv_addr: str = ""
    """``namesrvAddr``: the name servers it registers with (``;``-separated; "" for
    none): shown by GET_BROKER_CONFIG only."""


class _Housekeeping(ServiceThread):
    """Persists consumer offsets and drops expired client channels, every round.

    Each task is guarded on its own: a failure is logged once per kind, counted in
    :attr:`failures`, and the next task and the next round run as usual.
    """

    name = "broker-housekeeping"

    def __init__(self, core: BrokerCore, interval: float) -> None:
        super().__init__(interval)
        self.core = core
        self.failures = FailureCounter(log, self.name)

    def run_once(self) -> None:
        try:
            self.core.offsets.persist()
        except Exception as e:  # the table stays dirty: the next round retries
            self.failures.record("persisting consumer offsets", e)
        try:
            expired = self.core.consumers.scan_expired()
        except Exception as e:
            self.failures.record("expiring client channels", e)
        else:
            if expired:
                log.info("dropped expired consumer channels: %s", expired)
        try:
            self.core.connections.scan_expired(self.core.config.channel_expired_ms)
        except Exception as e:
            self.failures.record("expiring client connections", e)


class BrokerCore:
    """Broker state and request logic over one MessageStore (see the module docstring).

    The offset and message queries (QUERY_CONSUMER_OFFSET .. QUERY_MESSAGE) are
    ``core.queries``, a :class:`~mqstore.broker.queries.BrokerQueries`; sends and
    send-backs (SEND_MESSAGE(_V2), SEND_BATCH_MESSAGE, CONSUMER_SEND_MSG_BACK) are
    ``core.sender``, a :class:`~mqstore.broker.sending.MessageSender`.

    The store's lifecycle is the caller's: :meth:`shutdown` does not close it.
    """

    def __init__(self, store: StoreView, config: BrokerConfig | None = None) -> None:
        self.store = store
        self.config = cfg = config or BrokerConfig()
        conf_dir = Path(store.root) / "config"
        self.topics = TopicConfigManager(
            conf_dir / "topics.json",
            system_topics(cfg.cluster_name, cfg.broker_name, cfg.auto_create_topic_enable),
        )
        self.offsets = ConsumerOffsetManager(conf_dir / "consumerOffset.json")
        self.groups = SubscriptionGroupManager(
            conf_dir / "subscriptionGroup.json", cfg.auto_create_subscription_group
        )
        self.traffic = TrafficStats()  # put / pulled message counts (runtime info)
        self.sender = MessageSender(
            store, self.topics, self.groups, self.traffic, cfg.default_topic_queue_nums
        )
        self.consumers = ConsumerManager(cfg.channel_expired_ms, self._notify_enabled)
        self.topics.on_create(lambda config: self.consumers.topic_created(config.topic_name))
        self.connections = ConnectionTable()  # client addresses, producer groups (admin)
        self.boot_timestamp_ms = int(time.time() * 1000)
        settings = CheckSettings(cfg.transaction_timeout_ms, cfg.transaction_check_interval_ms,
                                 cfg.transaction_check_max)  # fmt: skip
        self.transactions = TransactionService(
            store, self.topics, self.offsets, self.connections, settings, cfg.broker_name
        )  # END_TRANSACTION and check-back (mqstore.broker.transactions)
        self._tx_check = TransactionCheckService(self.transactions)
        self.locks = RebalanceLockManager(cfg.rebalance_lock_max_live_ms)
        self.hold = PullHoldService(
            self._reexecute, store.max_offset_in_queue, cfg.hold_check_interval_ms
        )
        self._housekeeping = _Housekeeping(self, cfg.consumer_offset_persist_interval_ms / 1000)
        memory_limit = total_physical_memory() * store.cfg.access_message_in_memory_max_ratio // 100
        self.queries = BrokerQueries(store, self.offsets, memory_limit)
        self._started = False
        self._lock = threading.Lock()
        self._pop: BrokerPop | None = None
        self._pop_lock = threading.Lock()
        self._learn_store_topics()

    @property
    def pop(self) -> BrokerPop:
        """The POP service (``mqstore.broker.broker_pop``), started on first use: a broker
        whose clients never pop runs no revive thread."""
        pop = self._pop
        if pop is None:
            with self._pop_lock:
                pop = self._pop
                if pop is None:
                    cfg = self.config
                    pop = self._pop = BrokerPop(
                        self.store, cfg.broker_name, self.topics, self.groups, self.offsets
                    )
        return pop

    # ---------------------------------------------------------------- lifecycle

    def _learn_store_topics(self) -> None:
        widest: dict[str, int] = {}
        for topic, queue_id in self.store.queue_keys():  # reads no queue's files
            widest[topic] = max(widest.get(topic, 0), queue_id + 1)
        for topic, n in widest.items():
            if topic != SCHEDULE_TOPIC:
                self.topics.learn(topic, n)

    def _pull_topic_config(self, topic: str) -> TopicConfig | None:
        """The topic's config; on a miss, a topic the store has queues for (put through
        the store API) is registered first (Rule 3 of store.broker.topics). The scan
        runs only on a miss, never on the hot path of a known topic."""
        config = self.topics.get(topic)
        if config is not None or not TOPIC_PATTERN.fullmatch(topic):
            return config
        ids = self.store.queue_ids(topic)
        if not ids or topic == SCHEDULE_TOPIC:
            return None
        self.topics.learn(topic, max(ids) + 1)
        return self.topics.get(topic)

    def start(self) -> None:
        """Start long polling and housekeeping; idempotent."""
        with self._lock:
            if self._started:
                return
            self._started = True
            self.store.add_arrival_listener(self.hold.on_arrival)
            self.hold.start()
            self._housekeeping.start()
            if not self.is_slave:
                self._tx_check.start()

    def shutdown(self) -> None:
        """Answer held pulls, stop the threads and persist offsets and topics.

        Raises:
            OSError: persisting failed (the threads are stopped anyway).
        """
        with self._pop_lock:  # POP writes to the store: stop it first
            pop, self._pop = self._pop, None
        if pop is not None:
            pop.close()
        with self._lock:
            started, self._started = self._started, False
        if started:
            self.store.remove_arrival_listener(self.hold.on_arrival)
            self.hold.stop()
            self._tx_check.stop()
            self._housekeeping.stop()
        self.offsets.persist(force=True)
        self.topics.persist()

    def __enter__(self) -> BrokerCore:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def is_slave(self) -> bool:
        """True when the store is a replica (no writes, no offset commits)."""
        return self.store.cfg.broker_role is BrokerRole.SLAVE

    def _notify_enabled(self, group: str) -> bool:
        if not self.config.notify_consumer_ids_changed_enable:
            return False
        sub = self.groups.find(group)
        return sub is None or sub.notify_consumer_ids_changed_enable

    # --------------------------------------------------------------------- pull

    def pull(self, request: PullRequest, on_done: PullCallback) -> None:
        """PULL_MESSAGE: call ``on_done`` exactly once with the outcome.

        With the query's ``suspend_ms`` > 0 and nothing new (PULL_NOT_FOUND), the request
        is held (long polling) and ``on_done`` runs later on a broker thread, when a
        matching message arrives or the suspend time runs out. A piggy-backed
        ``commit_offset`` is stored first (not on a slave).

        Checked first, as RocketMQ's ``PullMessageProcessor`` does, before any offset
        is committed: a topic with no topic config (an illegal name included) is
        TOPIC_NOT_EXIST; a queue id outside ``[0, readQueueNums)`` is SYSTEM_ERROR
        with RocketMQ's remark. Topics found in the store at start are registered
        (store.broker.topics Rule 3), and so are topics put through the store API
        after the start (looked up in the store on a miss), so an embedded writer's
        topics stay pullable.
        """
        q = request.query
        on_done = self._counted(on_done, q.queue.topic, q.group)
        topic, queue_id = q.queue.topic, q.queue.queue_id
        config = self._pull_topic_config(topic)
        if config is None:
            remark = f"topic[{topic}] not exist, apply first please!"
            on_done(PullOutcome(ResponseCode.TOPIC_NOT_EXIST, q.offset, 0, 0, remark=remark))
            return
        if not 0 <= queue_id < config.read_queue_nums:
            remark = (
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{config.read_queue_nums}] "
                f"consumer:[{request.client_host}]"
            )
            on_done(PullOutcome(ResponseCode.SYSTEM_ERROR, q.offset, 0, 0, remark=remark))
            return
        if q.commit_offset is not None and q.commit_offset >= 0 and not self.is_slave:
            self.offsets.commit(q.group, topic, queue_id, q.commit_offset)
        outcome = self._pull_once(request, config)
        if outcome.code is ResponseCode.PULL_NOT_FOUND and q.suspend_ms > 0 and self._started:
            cfg = self.config
            hold_ms = q.suspend_ms if cfg.long_polling_enable else cfg.short_polling_time_ms
            self.hold.hold(request, on_done, hold_ms)
            return
        on_done(outcome)

    def _counted(self, on_done: PullCallback, topic: str, group: str) -> PullCallback:
        def done(out: PullOutcome) -> None:
            self.traffic.record_get(len(out.buffers) + len(out.messages), topic, group)
            on_done(out)

        return done

    def _reexecute(self, request: PullRequest, on_done: PullCallback) -> None:
        try:
            outcome = self.pull_now(request)
        except Exception as e:  # the store closed under a held pull: still answer once
            q = request.query
            log.warning("held pull of %s-%d failed: %s", q.queue.topic, q.queue.queue_id, e)
            outcome = PullOutcome(ResponseCode.SYSTEM_ERROR, q.offset, 0, 0, remark=str(e))
        on_done(outcome)

    def pull_now(self, request: PullRequest) -> PullOutcome:
        """One pull attempt, never held (what a woken request runs)."""
        return self._pull_once(request, self.topics.get(request.query.queue.topic))

    def _pull_once(self, request: PullRequest, config: TopicConfig | None) -> PullOutcome:
        """:meth:`pull_now` with the topic's config already read (a pull reads it once)."""
        q = request.query
        mq = q.queue
        if config is not None and not config.readable:
            return PullOutcome(
                ResponseCode.NO_PERMISSION,
                q.offset,
                0,
                0,
                remark=f"the topic[{mq.topic}] pulling is forbidden",
            )
        store = self.store
        slave_lenient = self.is_slave and not store.cfg.offset_check_in_slave
        sub = parse_subscription(q.expression, q.expression_type)  # checked by the processor
        started = time.monotonic()
        if request.decoded:
            g = store.get_message(q.group, mq.topic, mq.queue_id, q.offset, q.max_count, sub)
            self._looked_up(g.status, started)
            code = response_code(g.status, q.offset, slave_without_offset_check=slave_lenient)
            return PullOutcome(
                code, g.next_begin_offset, g.min_offset, g.max_offset,
                self._suggest(g.suggest_pulling_from_slave), messages=g.messages,
            )  # fmt: skip
        r = store.get_message_raw(q.group, mq.topic, mq.queue_id, q.offset, q.max_count, sub)
        self._looked_up(r.status, started)
        code = response_code(r.status, q.offset, slave_without_offset_check=slave_lenient)
        return PullOutcome(
            code, r.next_begin_offset, r.min_offset, r.max_offset,
            self._suggest(r.suggest_pulling_from_slave), buffers=r.buffers,
        )  # fmt: skip

    def _looked_up(self, status: GetStatus, started: float) -> None:
        """Count a store read for runtime info (found or not, and its time)."""
        elapsed_ms = int((time.monotonic() - started) * 1000)
        self.traffic.record_lookup(status is GetStatus.FOUND, elapsed_ms)

    def _suggest(self, from_slave: bool) -> int:
        if from_slave and self.config.slave_read_enable:
            return 1  # whichBrokerWhenConsumeSlowly
        return 0  # MixAll.MASTER_ID

    # ---------------------------------------------------------------- consumers

    def heartbeat(self, hb: Heartbeat, channel: ClientChannel) -> None:
        """HEART_BEAT: register the client; create each clustering group's retry topic."""
        for data in hb.consumers:
            sub = self.groups.find(data.group)
            retry = retry_topic(data.group)
            clustering = data.message_model is MessageModel.CLUSTERING
            if sub is not None and clustering and TOPIC_PATTERN.fullmatch(retry):
                self.topics.create_system(retry, sub.retry_queue_nums)
            if self.config.enable_property_filter:
                self._register_filters(data.subscriptions)
        self.consumers.heartbeat(hb, channel)

    def _register_filters(self, subscriptions: Sequence[SubscriptionData]) -> None:
        """Register each SQL92 subscription with the store (``ConsumerFilterManager``
        registers heartbeat subscriptions so its bitmap is computed at dispatch), so
        messages of its topic dispatched from now on carry the expression's verdict."""
        for s in subscriptions:
            if s.expression_type != SQL92:
                continue
            try:
                self.store.register_sql_filter(s.topic, s.expression)
            except SqlParseError:
                pass  # a pull answers FILTER_DATA_NOT_EXIST for it
            except OSError as e:
                log.error("registering the SQL92 filter of %s failed: %s", s.topic, e)

    def unregister(self, client_id: str, group: str) -> None:
        """UNREGISTER_CLIENT for one consumer group."""
        self.consumers.unregister(client_id, group)

    def channel_closed(self, channel: ClientChannel) -> None:
        """A client connection closed: its registrations go, its groups rebalance."""
        self.consumers.channel_closed(channel)
        self.connections.channel_closed(channel)

    def consumer_ids(self, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP."""
        return self.consumers.consumer_ids(group)

    def lock_batch(
        self, group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: the queues now locked by ``client_id``."""
        return self.locks.try_lock_batch(group, queues, client_id)

    def unlock_batch(self, group: str, client_id: str, queues: Sequence[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ."""
        self.locks.unlock_batch(group, queues, client_id)

    # ------------------------------------------------------------------- routes

    def topic_config(self, topic: str) -> TopicConfig | None:
        """The topic's config (route data), None if unknown."""
        return self.topics.get(topic)

    def create_topic(self, config: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC."""
        self.topics.put(config)
