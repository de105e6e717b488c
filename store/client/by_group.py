"""What a transport calls for a broker-originated request, by consumer group.

A broker addresses some requests to one group of a client (RESET_CONSUMER_CLIENT_OFFSET,
GET_CONSUMER_RUNNING_INFO); the transport keeps, per kind of request, one entry per
group, which a push consumer registers while it runs.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class ByGroup(Generic[T]):
    """One entry per group. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_group: dict[str, T] = {}

    def register(self, group: str, entry: T) -> None:
        with self._lock:
            self._by_group[group] = entry

    def unregister(self, group: str) -> None:
        with self._lock:
            self._by_group.pop(group, None)

    def get(self, group: str) -> T | None:
        """The group's entry, None when none is registered."""
        with self._lock:
            return self._by_group.get(group)
