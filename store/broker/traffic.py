"""Message traffic counters for GET_BROKER_RUNTIME_INFO (docs/admin.md §6): messages
put and messages handed out by pulls since the broker started, and their rates.

Rates are kept as per-second buckets over the last 600 s, so ``putTps`` /
``getTransferedTps`` read ``"<10 s> <60 s> <600 s>"`` as RocketMQ prints them (the
first number is what the dashboard and ``clusterList`` show). A window longer than the
broker's uptime is averaged over the uptime. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

WINDOWS_S = (10, 60, 600)


class _Counter:
    def __init__(self) -> None:
        self.total = 0
        self.buckets: deque[tuple[int, int]] = deque()  # (second, count), oldest first

    def add(self, second: int, n: int) -> None:
        self.total += n
        if self.buckets and self.buckets[-1][0] == second:
            self.buckets[-1] = (second, self.buckets[-1][1] + n)
        else:
            self.buckets.append((second, n))
        while self.buckets and self.buckets[0][0] <= second - WINDOWS_S[-1]:
            self.buckets.popleft()

    def rate(self, now: int, window: int, uptime: float) -> float:
        span = max(1.0, min(float(window), uptime))
        return sum(c for s, c in self.buckets if s > now - window) / span


class TrafficStats:
    """Puts and pulled messages: totals and rates."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self._lock = threading.Lock()
        self._put = _Counter()
        self._get = _Counter()

    def record_put(self, n: int) -> None:
        """``n`` messages stored."""
        if n > 0:
            with self._lock:
                self._put.add(int(self._clock()), n)

    def record_get(self, n: int) -> None:
        """``n`` messages handed out by a pull."""
        if n > 0:
            with self._lock:
                self._get.add(int(self._clock()), n)

    def totals(self) -> tuple[int, int]:
        """(messages put, messages pulled) since the start."""
        with self._lock:
            return self._put.total, self._get.total

    def tps_lines(self) -> tuple[str, str]:
        """(putTps, getTransferedTps) as ``"%.2f %.2f %.2f"`` over 10 s, 60 s, 600 s."""
        now_f = self._clock()
        now, uptime = int(now_f), now_f - self._start
        with self._lock:
            put, get = (
                " ".join(f"{c.rate(now, w, uptime):.2f}" for w in WINDOWS_S)
                for c in (self._put, self._get)
            )
        return put, get
