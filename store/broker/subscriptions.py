"""Subscription group configs (RocketMQ ``SubscriptionGroupManager``), persisted to
``config/subscriptionGroup.json``.

A group's config carries its retry policy: ``retryMaxTimes`` (16) before a message goes
to the dead-letter queue and ``retryQueueNums`` (1) queues in ``%RETRY%<group>``.
Groups are auto-created on first use (``autoCreateSubscriptionGroup`` = true), as
RocketMQ does. The system groups a 4.9.8 broker starts with (``SubscriptionGroupManager
.init``: ``TOOLS_CONSUMER``, ``FILTERSRV_CONSUMER``, ``SELF_TEST_C_GROUP`` and the four
ONS groups) are in the table from the start. Thread-safe.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mqstore.broker.configtable import VersionedTable
from mqstore.remoting.fastjson import Bean


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """One group's config (RocketMQ ``SubscriptionGroupConfig``, 4.x fields)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_bean(self) -> Bean:
        """The fastjson bean RocketMQ writes."""
        return Bean(
            brokerId=self.broker_id,
            consumeBroadcastEnable=self.consume_broadcast_enable,
            consumeEnable=self.consume_enable,
            consumeFromMinEnable=self.consume_from_min_enable,
            groupName=self.group_name,
            notifyConsumerIdsChangedEnable=self.notify_consumer_ids_changed_enable,
            retryMaxTimes=self.retry_max_times,
            retryQueueNums=self.retry_queue_nums,
            whichBrokerWhenConsumeSlowly=self.which_broker_when_consume_slowly,
        )

    @classmethod
    def from_json(cls, name: str, obj: dict[str, Any]) -> SubscriptionGroupConfig:
        """Read one entry of ``subscriptionGroupTable``."""
        return cls(
            group_name=str(obj.get("groupName", name)),
            consume_enable=bool(obj.get("consumeEnable", True)),
            consume_from_min_enable=bool(obj.get("consumeFromMinEnable", True)),
            consume_broadcast_enable=bool(obj.get("consumeBroadcastEnable", True)),
            retry_queue_nums=int(obj.get("retryQueueNums", 1)),
            retry_max_times=int(obj.get("retryMaxTimes", 16)),
            broker_id=int(obj.get("brokerId", 0)),
            which_broker_when_consume_slowly=int(obj.get("whichBrokerWhenConsumeSlowly", 1)),
            notify_consumer_ids_changed_enable=bool(
                obj.get("notifyConsumerIdsChangedEnable", True)
            ),
        )


SYSTEM_GROUPS: Final = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
)


class SubscriptionGroupManager:
    """The group table, auto-creating groups on first sight."""

    def __init__(self, path: Path, auto_create: bool = True) -> None:
        self.path = path
        self.auto_create = auto_create
        self._lock = threading.Lock()
        self._table = {g: SubscriptionGroupConfig(g) for g in SYSTEM_GROUPS}
        self._file = VersionedTable(path, "subscriptionGroupTable")
        for name, obj in self._file.load().items():
            self._table[name] = SubscriptionGroupConfig.from_json(name, obj)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config; auto-created (and persisted) when allowed, else None."""
        with self._lock:
            cfg = self._table.get(group)
            if cfg is None and self.auto_create:
                cfg = self._table[group] = SubscriptionGroupConfig(group)
                self._persist_locked()
            return cfg

    def known(self, group: str) -> bool:
        """Whether the group has a config (never creates one)."""
        with self._lock:
            return group in self._table

    def put(self, cfg: SubscriptionGroupConfig) -> None:
        """Create or replace a group's config and persist."""
        with self._lock:
            self._table[cfg.group_name] = cfg
            self._persist_locked()

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, None if unknown (never auto-creates)."""
        with self._lock:
            return self._table.get(group)

    def all(self) -> dict[str, SubscriptionGroupConfig]:
        """A snapshot of the table."""
        with self._lock:
            return dict(self._table)

    def delete(self, group: str) -> bool:
        """Drop a group's config (DELETE_SUBSCRIPTIONGROUP) and persist; False if unknown."""
        with self._lock:
            if self._table.pop(group, None) is None:
                return False
            self._persist_locked()
            return True

    def wrapper_body(self) -> bytes:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG's ``SubscriptionGroupWrapper``: the table and
        its data version, as the file holds them (compact JSON)."""
        with self._lock:
            return self._file.document({n: c.to_bean() for n, c in self._table.items()}).encode()

    def persist(self) -> None:
        """Write ``subscriptionGroup.json`` now."""
        with self._lock:
            self._persist_locked()

    def _persist_locked(self) -> None:
        self._file.persist({n: c.to_bean() for n, c in self._table.items()})
