"""The name server's key-value table, as RocketMQ's ``KVConfigManager``: values by
namespace and key, set and removed by operators (``mqadmin updateKvConfig`` /
``deleteKvConfig``; ``updateOrderConf`` keeps order-topic settings in the
``ORDER_TOPIC_CONFIG`` namespace, which a registering broker is sent back).

Memory only: RocketMQ writes the table to ``kvConfigPath`` after each change; ours
lives as long as the process (docs/admin.md §17). Thread-safe.
"""

from __future__ import annotations

import threading
from typing import Final

ORDER_TOPIC_CONFIG: Final = "ORDER_TOPIC_CONFIG"
"""RocketMQ ``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``."""


class KvTable:
    """``namespace -> key -> value``; a namespace whose last key goes is dropped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._table: dict[str, dict[str, str]] = {}

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            self._table.setdefault(namespace, {})[key] = value

    def get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        """Remove one key (nothing when absent)."""
        with self._lock:
            keys = self._table.get(namespace)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._table[namespace]

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace's keys; None when it has none."""
        with self._lock:
            keys = self._table.get(namespace)
            return dict(keys) if keys is not None else None
