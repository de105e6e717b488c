"""The name server's route tables, as RocketMQ's ``RouteInfoManager``.

Four tables, one lock:

- ``cluster -> {broker names}``;
- ``broker name -> (cluster, {broker id -> address})`` (id 0 is the master, others slaves);
- ``topic -> {broker name -> queue data}``, taken from a MASTER's registration only (a
  slave's topic table does not change the routes), and only when its data version
  changed since its last registration (or it is new). The topics of such a body are
  merged in (added or replaced), never used to remove the broker's other topics, as
  RocketMQ 4.9.8's ``RouteInfoManager.registerBroker`` (``createAndUpdateQueueData``):
  a 4.9.8 broker's UPDATE_AND_CREATE_TOPIC sends an incremental registration carrying
  only the new topic and its bumped data version, and its next full registrations
  carry that same version. A topic leaves a broker's routes when the broker goes
  (expiry, unregistration, closed connection) or is deleted by name;
- ``address -> liveness`` (last registration time, data version, HA address).

Liveness: a broker is dropped when it has not registered for ``expiry_s`` (RocketMQ:
120 s, checked every 10 s by the caller of :meth:`RouteInfoManager.scan_not_active`).
Dropping an address, or unregistering it, removes it from its broker's addresses; a
broker name left with no address is removed with its queue data and from its cluster.

A slave registering under an address that already had another id (a role change) has
the old id removed, as upstream does.

The clock is injectable (``clock``) so expiry can be tested without waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from mqstore.remoting.register import DataVersion as DataVersion  # noqa: PLC0414 (re-export)
from mqstore.remoting.route import BrokerData as BrokerData  # noqa: PLC0414 (re-export)
from mqstore.remoting.route import TopicRoute as TopicRoute  # noqa: PLC0414 (re-export)
from mqstore.remoting.topic_config import TopicConfig
from mqstore.remoting.values import PERM_READ, PERM_WRITE, QueueData

MASTER_ID = 0
DEFAULT_EXPIRY_S = 120.0
"""RocketMQ's ``BROKER_CHANNEL_EXPIRED_TIME``."""
DEFAULT_SCAN_INTERVAL_S = 10.0
"""RocketMQ scans for inactive brokers every 10 s."""


@dataclass(frozen=True, slots=True)
class Registration:
    """One REGISTER_BROKER request, decoded."""

    cluster: str
    broker_name: str
    broker_addr: str
    broker_id: int
    ha_server_addr: str = ""
    data_version: DataVersion = field(default_factory=DataVersion)
    topics: tuple[TopicConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """The answer to a registration: for a slave, its master's address and HA address."""

    master_addr: str = ""
    ha_server_addr: str = ""


@dataclass(slots=True)
class _Live:
    last_update: float
    data_version: DataVersion
    ha_server_addr: str


@dataclass(slots=True)
class _Broker:
    cluster: str
    addrs: dict[int, str] = field(default_factory=dict)


class RouteInfoManager:
    """The route tables (module doc); every method is thread-safe."""

    def __init__(
        self, *, expiry_s: float = DEFAULT_EXPIRY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if expiry_s <= 0:
            raise ValueError("expiry_s must be > 0")
        self.expiry_s = expiry_s
        self._clock = clock
        self._lock = threading.Lock()
        self._clusters: dict[str, set[str]] = {}
        self._brokers: dict[str, _Broker] = {}
        self._topics: dict[str, dict[str, QueueData]] = {}
        self._live: dict[str, _Live] = {}

    # ------------------------------------------------------------ registration

    def register(self, reg: Registration) -> RegisterResult:
        """Add or refresh a broker address, and for a master with a new data version
        (or a first registration) merge ``reg.topics`` into its queue data."""
        with self._lock:
            self._clusters.setdefault(reg.cluster, set()).add(reg.broker_name)
            broker = self._brokers.get(reg.broker_name)
            first = broker is None
            if broker is None:
                broker = self._brokers[reg.broker_name] = _Broker(reg.cluster)
            broker.cluster = reg.cluster
            for bid, addr in list(broker.addrs.items()):  # same address, new id: role change
                if addr == reg.broker_addr and bid != reg.broker_id:
                    del broker.addrs[bid]
            first = first or broker.addrs.get(reg.broker_id) != reg.broker_addr
            broker.addrs[reg.broker_id] = reg.broker_addr
            previous = self._live.get(reg.broker_addr)
            changed = previous is None or previous.data_version != reg.data_version
            if reg.broker_id == MASTER_ID and (first or changed):
                self._merge_queue_datas(reg.broker_name, reg.topics)
            self._live[reg.broker_addr] = _Live(self._clock(), reg.data_version, reg.ha_server_addr)
            if reg.broker_id == MASTER_ID:
                return RegisterResult()
            master = broker.addrs.get(MASTER_ID, "")
            live = self._live.get(master)
            return RegisterResult(master, live.ha_server_addr if live else "")

    def _merge_queue_datas(self, broker_name: str, topics: tuple[TopicConfig, ...]) -> None:
        for t in topics:
            self._topics.setdefault(t.topic_name, {})[broker_name] = QueueData(
                broker_name, t.read_queue_nums, t.write_queue_nums, t.perm, t.topic_sys_flag
            )

    def unregister(self, cluster: str, broker_name: str, broker_addr: str, broker_id: int) -> None:
        """Remove one broker address (UNREGISTER_BROKER)."""
        with self._lock:
            self._live.pop(broker_addr, None)
            broker = self._brokers.get(broker_name)
            if broker is not None and broker.addrs.get(broker_id) == broker_addr:
                del broker.addrs[broker_id]
            self._drop_empty(broker_name, cluster)

    def _drop_empty(self, broker_name: str, cluster: str | None = None) -> None:
        broker = self._brokers.get(broker_name)
        if broker is not None and broker.addrs:
            return
        if broker is not None:
            del self._brokers[broker_name]
            cluster = broker.cluster
        if cluster is not None and cluster in self._clusters:
            self._clusters[cluster].discard(broker_name)
            if not self._clusters[cluster]:
                del self._clusters[cluster]
        for topic, by_broker in list(self._topics.items()):
            by_broker.pop(broker_name, None)
            if not by_broker:
                del self._topics[topic]

    def scan_not_active(self) -> list[str]:
        """Drop every address that has not registered for ``expiry_s``; return them."""
        with self._lock:
            deadline = self._clock() - self.expiry_s
            dead = [a for a, live in self._live.items() if live.last_update < deadline]
            for addr in dead:
                self._remove_addr(addr)
            return dead

    def channel_closed(self, addr: str) -> None:
        """A broker's connection closed: forget that address at once (``onChannelDestroy``)."""
        with self._lock:
            if addr in self._live:
                self._remove_addr(addr)

    def _remove_addr(self, addr: str) -> None:
        self._live.pop(addr, None)
        for name, broker in list(self._brokers.items()):
            for bid, a in list(broker.addrs.items()):
                if a == addr:
                    del broker.addrs[bid]
            self._drop_empty(name)

    # ----------------------------------------------------------------- queries

    def route(self, topic: str) -> TopicRoute | None:
        """The route of ``topic``, None when no live broker holds it."""
        with self._lock:
            by_broker = self._topics.get(topic)
            if not by_broker:
                return None
            queue_datas = tuple(by_broker[n] for n in sorted(by_broker))
            brokers = tuple(
                BrokerData(b.cluster, name, dict(sorted(b.addrs.items())))
                for name in sorted(by_broker)
                if (b := self._brokers.get(name)) is not None
            )
            if not brokers:
                return None
            return TopicRoute(queue_datas, brokers)

    def cluster_info(self) -> tuple[dict[str, BrokerData], dict[str, list[str]]]:
        """(broker name -> BrokerData, cluster -> sorted broker names)."""
        with self._lock:
            brokers = {
                name: BrokerData(b.cluster, name, dict(sorted(b.addrs.items())))
                for name, b in sorted(self._brokers.items())
            }
            clusters = {c: sorted(names) for c, names in sorted(self._clusters.items())}
            return brokers, clusters

    def topics(self) -> list[str]:
        """Every topic some live master registered."""
        with self._lock:
            return sorted(self._topics)

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """Forget ``topic``'s queue data: of every broker, or (``cluster``) of that
        cluster's brokers only (DELETE_TOPIC_IN_NAMESRV)."""
        with self._lock:
            by_broker = self._topics.get(topic)
            if by_broker is None:
                return
            if cluster is None:
                by_broker.clear()
            else:
                for name in self._clusters.get(cluster, set()):
                    by_broker.pop(name, None)
            if not by_broker:
                del self._topics[topic]

    def set_write_perm(self, broker_name: str, writable: bool) -> int:
        """Take the write bit off (``writable`` False) or set read and write on the queue
        data of every topic ``broker_name`` holds; how many topics that was
        (WIPE/ADD_WRITE_PERM_OF_BROKER)."""
        count = 0
        with self._lock:
            for by_broker in self._topics.values():
                q = by_broker.get(broker_name)
                if q is None:
                    continue
                perm = PERM_READ | PERM_WRITE if writable else q.perm & ~PERM_WRITE
                by_broker[broker_name] = replace(q, perm=perm)
                count += 1
        return count

    def live_addrs(self) -> list[str]:
        """Addresses registered and not yet expired or unregistered."""
        with self._lock:
            return sorted(self._live)
