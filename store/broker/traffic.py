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


_LATENCY_BOUNDS_MS: Final = (0, 9, 49, 99, 199, 499, 999, 1999, 2999, 3999, 4999, 9999)
"""Upper bounds (inclusive, ms) of the first 12 ``putMessageDistributeTime`` ranges
(4.9.8 ``StoreStatsService``: ``<=0``, ``0~10``, ``10~50``, ..., ``5~10s``; the 13th
is ``10s~``)."""
LATENCY_LABELS: Final = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]",
                         "[200~500ms]", "[500ms~1s]", "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]",
                         "[5~10s]", "[10s~]")  # fmt: skip


def _fine_bounds() -> tuple[int, ...]:
    """The bucket edges (ms) 4.9.8 takes its put-latency percentiles from: 20 of 1 ms,
    15 of 2, 10 of 5, 10 of 10, 6 of 50, 5 of 100, 9 of 1000, then one unbounded."""
    edges, at = [], 0
    for step, times in ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9)):
        for _ in range(times):
            at += step
            edges.append(at)
    return tuple(edges)


_FINE_BOUNDS: Final = _fine_bounds()


class PutLatency:
    """Put times of the last whole minute: the 13-range distribution and the 99th and
    99.9th percentiles (4.9.8 rolls both every 60 s of uptime and reports the minute
    just ended; before the first roll the distribution is ``null``), and the longest
    put since the start. Not thread-safe: :class:`TrafficStats` holds its lock."""

    def __init__(self, start: float) -> None:
        self._rolled_at = start
        self.current = [0] * len(LATENCY_LABELS)
        self.last: list[int] | None = None
        self._fine = [0] * (len(_FINE_BOUNDS) + 1)
        self._last_fine = [0] * (len(_FINE_BOUNDS) + 1)
        self.max_ms = 0

    def roll(self, now: float) -> None:
        """Start a new minute once 60 s passed since the last roll (rolls are done
        lazily: when more than one minute passed, the minute just ended was empty)."""
        if now - self._rolled_at <= 60:
            return
        empty = now - self._rolled_at > 120
        self._rolled_at = now
        self.last = [0] * len(LATENCY_LABELS) if empty else self.current
        self._last_fine = [0] * (len(_FINE_BOUNDS) + 1) if empty else self._fine
        self.current = [0] * len(LATENCY_LABELS)
        self._fine = [0] * (len(_FINE_BOUNDS) + 1)

    def add(self, ms: int) -> None:
        self.max_ms = max(self.max_ms, ms)
        self.current[_index(_LATENCY_BOUNDS_MS, ms)] += 1
        self._fine[_index(_FINE_BOUNDS, ms)] += 1

    def distribution(self) -> str:
        """``putMessageDistributeTime``: ``"[<=0ms]:n [0~10ms]:n ... "`` of the last
        minute, ``"null"`` before one ended."""
        if self.last is None:
            return "null"
        return "".join(f"{label}:{n} " for label, n in zip(LATENCY_LABELS, self.last, strict=True))

    def percentile(self, p: float) -> float:
        """The ``p`` quantile (ms) of the last minute's puts, interpolated inside its
        bucket as 4.9.8 does; 0 without puts."""
        counts = self._last_fine
        target, passed = int(sum(counts) * p), 0
        for i, count in enumerate(counts):
            if target <= passed + count:
                low = _FINE_BOUNDS[i - 1] if i else 0
                high = _FINE_BOUNDS[i] if i < len(_FINE_BOUNDS) else low
                return low + ((high - low) * (target - passed) / count if count else 0.0)
            passed += count
        return 0.0


def _index(bounds: tuple[int, ...], ms: int) -> int:
    for i, bound in enumerate(bounds):
        if ms <= bound:
            return i
    return len(bounds)


class TrafficStats:
    """Puts and pulled messages: totals and rates; put times and sizes; store reads
    that found messages or not."""

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
        self._found = _Counter()
        self._miss = _Counter()
        self.latency = PutLatency(self._start)
        self._put_bytes = 0
        self._put_failed = 0
        self._get_max_ms = 0

    def record_put(
        self, n: int, topic: str | None = None, *, size: int = 0, failed: int = 0,
        elapsed_ms: int | None = None,
    ) -> None:  # fmt: skip
        """``n`` messages stored (in ``topic``: counted under ``TOPIC_PUT_NUMS``), of
        ``size`` bytes; ``failed`` messages refused; ``elapsed_ms``: how long the put
        call took (one put, whatever its number of messages)."""
        now = self._clock()  # one reading for the latency roll and the rate buckets
        with self._lock:
            self._roll_day_locked()
            self._put_bytes += size
            self._put_failed += failed
            if elapsed_ms is not None:
                self.latency.roll(now)
                self.latency.add(elapsed_ms)
            if n > 0:
                second = int(now)
                self._put.add(second, n)
                if topic is not None:
                    self._keyed_locked(TOPIC_PUT_NUMS, topic).add(second, n)

    def record_lookup(self, found: bool, elapsed_ms: int) -> None:
        """One store read for a pull: it found messages or not; how long it took."""
        with self._lock:
            (self._found if found else self._miss).add(int(self._clock()), 1)
            self._get_max_ms = max(self._get_max_ms, elapsed_ms)

    def store_stats(self) -> dict[str, str]:
        """The keys of 4.9.8's ``StoreStatsService.getRuntimeInfo`` that count puts and
        reads (docs/admin.md §6): times and bytes put, failures, put and read times,
        the put-time distribution and percentiles of the last minute, found and missed
        read rates."""
        now_f = self._clock()
        now, uptime = int(now_f), now_f - self._start
        with self._lock:
            self.latency.roll(now_f)
            times = max(1, self._put.total)  # 4.9.8 shows 1 before the first put
            found, miss = (
                [c.rate(now, w, uptime) for w in WINDOWS_S] for c in (self._found, self._miss)
            )
            return {
                "putMessageTimesTotal": str(times),
                "putMessageSizeTotal": str(self._put_bytes),
                "putMessageAverageSize": repr(self._put_bytes / times),
                "putMessageFailedTimes": str(self._put_failed),
                "putMessageEntireTimeMax": str(self.latency.max_ms),
                "putMessageDistributeTime": self.latency.distribution(),
                "putLatency99": f"{self.latency.percentile(0.99):.2f}",
                "putLatency999": f"{self.latency.percentile(0.999):.2f}",
                "getMessageEntireTimeMax": str(self._get_max_ms),
                "getFoundTps": " ".join(f"{r:.2f}" for r in found),
                "getMissTps": " ".join(f"{r:.2f}" for r in miss),
                "getTotalTps": " ".join(f"{a + b:.2f}" for a, b in zip(found, miss, strict=True)),
            }

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
