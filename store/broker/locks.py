"""Queue locks for orderly consumers (RocketMQ ``RebalanceLockManager``).

An orderly consumer locks its queues on the broker before consuming them, so that two
members of a group never process one queue at once during a rebalance. A lock is a
lease: it lapses ``max_live_ms`` (60 s, ``rebalance.lockMaxLiveTime``) after the owner
last locked it, and the owner renews it every 20 s. Expiry is evaluated lazily at each
call, so no thread is needed. ``clock`` returns milliseconds and is injectable for tests.
Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from mqstore.remoting.values import MessageQueue


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class RebalanceLockManager:
    """Per group, which client holds which queue and since when."""

    def __init__(self, max_live_ms: int = 60_000, clock: Callable[[], int] = _now_ms) -> None:
        self.max_live_ms = max_live_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._table: dict[str, dict[MessageQueue, tuple[str, int]]] = {}

    def _held_by_other(self, entry: tuple[str, int] | None, client_id: str, now: int) -> bool:
        return entry is not None and entry[0] != client_id and now - entry[1] <= self.max_live_ms

    def try_lock_batch(
        self, group: str, queues: Iterable[MessageQueue], client_id: str
    ) -> set[MessageQueue]:
        """Lock (or renew) every queue not held by another live client; returns the
        queues ``client_id`` now holds among ``queues``."""
        now = self._clock()
        locked: set[MessageQueue] = set()
        with self._lock:
            table = self._table.setdefault(group, {})
            for mq in queues:
                if self._held_by_other(table.get(mq), client_id, now):
                    continue
                table[mq] = (client_id, now)
                locked.add(mq)
        return locked

    def unlock_batch(self, group: str, queues: Iterable[MessageQueue], client_id: str) -> None:
        """Release the queues ``client_id`` holds; others' locks are left alone."""
        with self._lock:
            table = self._table.get(group)
            if table is None:
                return
            for mq in queues:
                entry = table.get(mq)
                if entry is not None and entry[0] == client_id:
                    del table[mq]

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """True if ``client_id`` holds a live lock on ``mq``."""
        now = self._clock()
        with self._lock:
            entry = self._table.get(group, {}).get(mq)
            live = entry is not None and now - entry[1] <= self.max_live_ms
            return live and entry is not None and entry[0] == client_id
