"""Message traffic counters for GET_BROKER_RUNTIME_INFO (docs/admin.md §6) and
VIEW_BROKER_STATS_DATA (docs/admin.md §14): messages put and messages handed out by
pulls since the broker started, and their rates; the same per topic (puts) and per
``topic@group`` (pulls).

Rates are kept as per-second buckets over the last 600 s, so ``putTps`` /
``getTransferedTps`` read ``"<10 s> <60 s> <600 s>"`` as RocketMQ prints them (the
first number is what the dashboard and ``clusterList`` show). A window longer than the
broker's uptime is averaged over the uptime. Per key, minute buckets over the last day
give the minute, hour and day snapshots of RocketMQ's ``StatsItem`` (sum, tps, and
``avgpt``: messages per request). Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

WINDOWS_S = (10, 60, 600)
SNAPSHOT_S: Final = (60, 3600, 86400)
"""The minute, hour and day windows of a stats snapshot."""


TOPIC_PUT_NUMS: Final = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS: Final = "GROUP_GET_NUMS"
"""The stats item names (RocketMQ ``BrokerStatsManager``) kept per key."""


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


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One window of a keyed counter (RocketMQ ``StatsSnapshot``): messages, their
    rate, and messages per request."""

    sum: int
    tps: float
    avgpt: float


class _KeyedCounter:
    """Messages and requests of one key, in minute buckets over the last day."""

    def __init__(self) -> None:
        self.buckets: deque[tuple[int, int, int]] = deque()  # (minute, messages, requests)

    def add(self, second: int, n: int) -> None:
        minute = second // 60
        if self.buckets and self.buckets[-1][0] == minute:
            _, m, r = self.buckets[-1]
            self.buckets[-1] = (minute, m + n, r + 1)
        else:
            self.buckets.append((minute, n, 1))
        while self.buckets and self.buckets[0][0] <= minute - SNAPSHOT_S[-1] // 60:
            self.buckets.popleft()

    def snapshot(self, now: int, window: int, uptime: float) -> Snapshot:
        first = (now - window) // 60 + 1
        rows = [(m, r) for minute, m, r in self.buckets if minute >= first]
        total, requests = sum(m for m, _ in rows), sum(r for _, r in rows)
        span = max(1.0, min(float(window), uptime))
        return Snapshot(total, total / span, total / requests if requests else 0.0)


class TrafficStats:
    """Puts and pulled messages: totals and rates."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        self._wall = wall
        self._start = clock()
        self._lock = threading.Lock()
        self._put = _Counter()
        self._get = _Counter()
        self._next_midnight = _next_local_midnight(wall())
        self._mornings = (0, 0, 0, 0)
        """(put today, put yesterday, get today, get yesterday) totals at local midnight."""
        self._keyed: dict[tuple[str, str], _KeyedCounter] = {}

    def record_put(self, n: int, topic: str | None = None) -> None:
        """``n`` messages stored (in ``topic``: counted under ``TOPIC_PUT_NUMS``)."""
        if n > 0:
            with self._lock:
                self._roll_day_locked()
                second = int(self._clock())
                self._put.add(second, n)
                if topic is not None:
                    self._keyed_locked(TOPIC_PUT_NUMS, topic).add(second, n)

    def record_get(self, n: int, topic: str | None = None, group: str | None = None) -> None:
        """``n`` messages handed out by a pull (of ``group`` from ``topic``: counted
        under ``GROUP_GET_NUMS``, key ``topic@group``)."""
        if n > 0:
            with self._lock:
                self._roll_day_locked()
                second = int(self._clock())
                self._get.add(second, n)
                if topic is not None and group is not None:
                    self._keyed_locked(GROUP_GET_NUMS, f"{topic}@{group}").add(second, n)

    def _roll_day_locked(self) -> None:
        """At the first count or look after a local midnight, today's morning totals
        become yesterday's and the totals so far today's (RocketMQ ``BrokerStats.record``,
        run at midnight: nothing was counted in between, so they are the midnight ones)."""
        now = self._wall()
        if now < self._next_midnight:
            return
        put_today, _, get_today, _ = self._mornings
        crossed_two = now >= _next_local_midnight(self._next_midnight)
        self._mornings = (
            self._put.total, self._put.total if crossed_two else put_today,
            self._get.total, self._get.total if crossed_two else get_today,
        )  # fmt: skip
        self._next_midnight = _next_local_midnight(now)

    def mornings(self) -> tuple[int, int, int, int]:
        """(msgPutTotalTodayMorning, msgPutTotalYesterdayMorning, msgGetTotalTodayMorning,
        msgGetTotalYesterdayMorning): the put and pulled totals at the last two local
        midnights (0 for one before the start)."""
        with self._lock:
            self._roll_day_locked()
            return self._mornings

    def _keyed_locked(self, name: str, key: str) -> _KeyedCounter:
        counter = self._keyed.get((name, key))
        if counter is None:
            counter = self._keyed[(name, key)] = _KeyedCounter()
        return counter

    def snapshots(self, name: str, key: str) -> tuple[Snapshot, Snapshot, Snapshot] | None:
        """The minute, hour and day snapshots of stats item ``name`` / ``key``; None when
        nothing was ever counted under it."""
        now_f = self._clock()
        with self._lock:
            counter = self._keyed.get((name, key))
            if counter is None:
                return None
            minute, hour, day = (
                counter.snapshot(int(now_f), w, now_f - self._start) for w in SNAPSHOT_S
            )
        return minute, hour, day

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


def _next_local_midnight(epoch_s: float) -> float:
    """The first local midnight after ``epoch_s`` (epoch seconds)."""
    t = time.localtime(epoch_s)
    start = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))
    return time.mktime((*time.localtime(start + 26 * 3600)[:3], 0, 0, 0, 0, 0, -1))
