"""Latency fault tolerance for producers, as RocketMQ 4.x's ``MQFaultStrategy``.

Every send records its broker's latency. A latency maps to a penalty window through
two tables (``latencyMax`` / ``notAvailableDuration``)::

    latency >=   50   100   550   1000   2000   3000   15000 ms
    penalty       0     0    30     60    120    180     600 s

A failed send (no answer, or a broker error) counts as 30 s of latency, so its broker
is skipped for 600 s, unless a later send to it succeeds (which replaces the window).

Queue choice (:meth:`FaultStrategy.select`):

- **Off** (RocketMQ's default, ``sendLatencyFaultEnable=false``): round-robin; on a
  retry, the next queue not on the broker that just failed, when there is one.
- **On**: round-robin over queues whose broker is outside its penalty window. When
  every broker is in one, the broker whose window ends first is tried
  (``pickOneAtLeast``), so sends keep flowing.

The clock is injectable for tests. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from mqstore.client.allocate import MessageQueue

LATENCY_MAX_MS: Final = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_MS: Final = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
ISOLATION_LATENCY_MS: Final = 30_000
"""A failed send counts as this latency (``updateFaultItem(..., isolation=true)``)."""


def penalty_ms(latency_ms: float) -> int:
    """The penalty window of a send that took ``latency_ms``."""
    for bound, penalty in zip(reversed(LATENCY_MAX_MS), reversed(NOT_AVAILABLE_MS), strict=True):
        if latency_ms >= bound:
            return penalty
    return 0


@dataclass(frozen=True, slots=True)
class FaultItem:
    """One broker's last latency and when its penalty window ends (clock seconds)."""

    broker_name: str
    latency_ms: float
    available_at: float


class FaultStrategy:
    """Chooses send queues and learns brokers' latencies (module doc)."""

    def __init__(self, enabled: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = enabled
        self._clock = clock
        self._items: dict[str, FaultItem] = {}
        self._lock = threading.Lock()

    def update(self, broker_name: str, latency_ms: float, *, failed: bool) -> None:
        """Record one send's outcome (only while enabled, as RocketMQ)."""
        if not self.enabled:
            return
        latency = ISOLATION_LATENCY_MS if failed else latency_ms
        until = self._clock() + penalty_ms(latency) / 1000
        with self._lock:
            self._items[broker_name] = FaultItem(broker_name, latency, until)

    def available(self, broker_name: str) -> bool:
        """False while ``broker_name`` is inside its penalty window."""
        with self._lock:
            item = self._items.get(broker_name)
        return item is None or self._clock() >= item.available_at

    def items(self) -> list[FaultItem]:
        """The brokers with a recorded outcome."""
        with self._lock:
            return list(self._items.values())

    def select(
        self, queues: Sequence[MessageQueue], index: int, last_failed: str | None
    ) -> MessageQueue:
        """A queue among ``queues`` (non-empty), starting at round-robin ``index``."""
        n = len(queues)
        if self.enabled:
            for i in range(n):
                mq = queues[(index + i) % n]
                if self.available(mq.broker_name):
                    return mq
            least_bad = self._least_bad({q.broker_name for q in queues})
            if least_bad is not None:
                on_it = [q for q in queues if q.broker_name == least_bad]
                return on_it[index % len(on_it)]
            return queues[index % n]
        if last_failed is not None:
            for i in range(n):
                mq = queues[(index + i) % n]
                if mq.broker_name != last_failed:
                    return mq
        return queues[index % n]

    def _least_bad(self, names: set[str]) -> str | None:
        with self._lock:
            items = [it for it in self._items.values() if it.broker_name in names]
        if not items:
            return None
        return min(items, key=lambda it: (it.available_at, it.latency_ms)).broker_name
