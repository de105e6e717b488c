"""Who consumes what (RocketMQ ``ConsumerManager`` + ``ClientHousekeepingService``).

Consumers announce themselves with heartbeats: client id, the channel they talk on,
and per group the subscriptions and message model. The broker keeps, per group, the
live clients and answers GET_CONSUMER_LIST_BY_GROUP from it; every consumer then
computes its share of the queues from that same list.

Rules
-----
Rule 1. A group's *membership* changes when a client joins (first heartbeat for the
group), leaves (UNREGISTER_CLIENT), its channel closes, or its channel expires (no
heartbeat for ``channel_expired_ms`` = 120 s, checked by :meth:`scan_expired`). On a
change every remaining member's channel is sent NOTIFY_CONSUMER_IDS_CHANGED (when
enabled), the joiner included, so each rebalances at once instead of within 20 s.

Rule 2. A heartbeat from a known client only refreshes its timestamp and
subscriptions: no notification.

Rule 3. A topic created on this broker notifies every group subscribed to it, as a
membership change does (our addition; RocketMQ waits for the 20 s rebalance). A change
of an existing topic's queue count does not: as in RocketMQ, members take new queues at
their next rebalance or when told to (``admin rebalance``). A consumer started before
its topic existed then takes the topic's queues at once: in-process its rebalance reads
the broker's topic table, and a TCP client that routes through this broker sees the
queues too.

Notifications are delivered after the lock is released, so a channel's
``notify_consumer_ids_changed`` may block briefly or call back into the manager.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from mqstore.remoting.values import ConsumerData, Heartbeat


class ClientChannel(Protocol):
    """The broker's handle on one client connection."""

    def notify_consumer_ids_changed(self, group: str) -> None:
        """Send NOTIFY_CONSUMER_IDS_CHANGED for ``group`` (must not raise)."""
        ...


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """One live member of a group."""

    client_id: str
    channel: ClientChannel
    last_update_ms: int


@dataclass(slots=True)
class ConsumerGroupInfo:
    """A group's members and its latest announced consumer data."""

    group: str
    data: ConsumerData
    clients: dict[str, ClientInfo]


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ConsumerManager:
    """Groups, their live clients, and change notifications (Rule 1)."""

    def __init__(
        self,
        channel_expired_ms: int = 120_000,
        notify_enabled: Callable[[str], bool] = lambda _group: True,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.channel_expired_ms = channel_expired_ms
        self._notify_enabled = notify_enabled
        self._clock = clock
        self._lock = threading.Lock()
        self._groups: dict[str, ConsumerGroupInfo] = {}

    def heartbeat(self, hb: Heartbeat, channel: ClientChannel) -> None:
        """Register or refresh ``hb.client_id`` in each of its groups."""
        now = self._clock()
        changed: list[str] = []
        with self._lock:
            for data in hb.consumers:
                info = self._groups.get(data.group)
                if info is None:
                    info = self._groups[data.group] = ConsumerGroupInfo(data.group, data, {})
                info.data = data
                old = info.clients.get(hb.client_id)
                if old is None or old.channel is not channel:
                    changed.append(data.group)
                info.clients[hb.client_id] = ClientInfo(hb.client_id, channel, now)
        self._notify(changed)

    def unregister(self, client_id: str, group: str) -> bool:
        """Remove one client from one group; True if it was a member."""
        with self._lock:
            info = self._groups.get(group)
            if info is None or info.clients.pop(client_id, None) is None:
                return False
            if not info.clients:
                del self._groups[group]
        self._notify([group])
        return True

    def channel_closed(self, channel: ClientChannel) -> None:
        """Drop every registration made over ``channel`` (its connection closed)."""
        self._remove(lambda c: c.channel is channel)

    def scan_expired(self) -> list[str]:
        """Drop clients silent for longer than ``channel_expired_ms``; returns their ids."""
        limit = self._clock() - self.channel_expired_ms
        return self._remove(lambda c: c.last_update_ms < limit)

    def _remove(self, doomed: Callable[[ClientInfo], bool]) -> list[str]:
        removed: list[str] = []
        changed: list[str] = []
        with self._lock:
            for name, info in list(self._groups.items()):
                gone = [cid for cid, c in info.clients.items() if doomed(c)]
                for cid in gone:
                    del info.clients[cid]
                if gone:
                    removed.extend(gone)
                    changed.append(name)
                if not info.clients:
                    del self._groups[name]
        self._notify(changed)
        return removed

    def topic_created(self, topic: str) -> None:
        """Rule 3: notify the groups subscribed to ``topic``."""
        with self._lock:
            groups = [
                name
                for name, info in self._groups.items()
                if any(sub.topic == topic for sub in info.data.subscriptions)
            ]
        self._notify(groups)

    def consumer_ids(self, group: str) -> list[str]:
        """The group's live client ids (unordered: clients sort them)."""
        with self._lock:
            info = self._groups.get(group)
            return list(info.clients) if info is not None else []

    def groups_of_topic(self, topic: str) -> list[str]:
        """Online groups subscribed to ``topic`` (``queryTopicConsumeByWho``)."""
        with self._lock:
            return [
                name
                for name, info in self._groups.items()
                if any(s.topic == topic for s in info.data.subscriptions)
            ]

    def subscribes(self, group: str, topic: str) -> bool | None:
        """Whether online ``group`` subscribes ``topic``; None when the group has no
        online member or no subscription at all (RocketMQ then counts every topic)."""
        with self._lock:
            info = self._groups.get(group)
            if info is None or not info.data.subscriptions:
                return None
            return any(s.topic == topic for s in info.data.subscriptions)

    def group_info(self, group: str) -> ConsumerGroupInfo | None:
        """The group's record (read-only use), None if no member is registered."""
        with self._lock:
            return self._groups.get(group)

    def _notify(self, groups: list[str]) -> None:
        for group in groups:
            if not self._notify_enabled(group):
                continue
            with self._lock:
                info = self._groups.get(group)
                channels = [c.channel for c in info.clients.values()] if info else []
            for channel in channels:
                channel.notify_consumer_ids_changed(group)
