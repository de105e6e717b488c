"""TrafficStats: totals and the 10 s / 60 s / 600 s rates of runtime info."""

from __future__ import annotations

import time

from mqstore.broker.traffic import TrafficStats


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rates_average_each_window_after_a_long_uptime() -> None:
    clock = Clock()
    t = TrafficStats(clock)
    clock.now += 700
    t.record_put(600)  # 600 s ago relative to the read below: out of every window
    clock.now += 600
    t.record_put(120)  # 30 s before the read: in the 60 s and 600 s windows
    clock.now += 30
    t.record_put(50)  # now: in every window
    assert t.tps_lines()[0] == "5.00 2.83 0.28"
    assert t.totals() == (770, 0)


def test_a_young_broker_averages_over_its_uptime() -> None:
    clock = Clock()
    t = TrafficStats(clock)
    clock.now += 4
    t.record_get(20)
    assert t.tps_lines() == ("0.00 0.00 0.00", "5.00 5.00 5.00")


def test_midnight_totals_move_a_day_on_at_each_local_midnight() -> None:
    wall = [time.mktime((2026, 3, 10, 23, 0, 0, 0, 0, -1))]
    t = TrafficStats(wall=lambda: wall[0])
    t.record_put(3)
    t.record_get(1)
    assert t.mornings() == (0, 0, 0, 0)  # no midnight since the start
    wall[0] += 2 * 3600  # 01:00 the next day
    t.record_put(2)
    assert t.mornings() == (3, 0, 1, 0)
    wall[0] += 24 * 3600
    assert t.mornings() == (5, 3, 1, 1)
    wall[0] += 3 * 24 * 3600  # days without a count: both mornings are the totals
    assert t.mornings() == (5, 5, 1, 1)


def test_the_put_distribution_is_null_until_a_minute_has_ended() -> None:
    clock = Clock()
    t = TrafficStats(clock)
    t.record_put(1, "T", size=100, elapsed_ms=3)
    assert t.store_stats()["putMessageDistributeTime"] == "null"


def test_the_put_distribution_shows_the_minute_that_ended_last() -> None:
    clock = Clock()
    t = TrafficStats(clock)
    for ms in (0, 3, 3, 20, 12_000):
        t.record_put(1, "T", size=100, elapsed_ms=ms)
    clock.now += 61
    t.record_put(1, "T", size=100, elapsed_ms=700)  # the new minute: not shown yet
    shown = t.store_stats()["putMessageDistributeTime"]
    assert shown == (
        "[<=0ms]:1 [0~10ms]:2 [10~50ms]:1 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 "
        "[500ms~1s]:0 [1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:1 "
    )


def test_the_put_percentiles_interpolate_inside_the_last_minutes_bucket() -> None:
    clock = Clock()
    t = TrafficStats(clock)
    for _ in range(100):
        t.record_put(1, "T", elapsed_ms=30)  # the 2 ms buckets after 20 ms: (28, 30]
    clock.now += 61
    stats = t.store_stats()
    assert (stats["putLatency99"], stats["putLatency999"]) == ("29.98", "29.98")
    assert stats["putMessageEntireTimeMax"] == "30"


def test_put_totals_count_messages_bytes_and_failures() -> None:
    t = TrafficStats(Clock())
    assert t.store_stats()["putMessageTimesTotal"] == "1"  # 4.9.8 shows 1 before any put
    t.record_put(3, "T", size=300, elapsed_ms=1)
    t.record_put(0, "T", failed=1, elapsed_ms=1)
    stats = t.store_stats()
    assert (stats["putMessageTimesTotal"], stats["putMessageSizeTotal"]) == ("3", "300")
    assert (stats["putMessageAverageSize"], stats["putMessageFailedTimes"]) == ("100.0", "1")


def test_reads_are_counted_as_found_or_missed() -> None:
    clock = Clock()
    t = TrafficStats(clock)
    clock.now += 10
    for found in (True, True, False):
        t.record_lookup(found, elapsed_ms=7)
    stats = t.store_stats()
    assert stats["getFoundTps"].split()[0] == "0.20"
    assert stats["getMissTps"].split()[0] == "0.10"
    assert stats["getTotalTps"].split()[0] == "0.30"
    assert stats["getMessageEntireTimeMax"] == "7"


def test_a_minute_without_puts_shows_an_empty_distribution() -> None:
    clock = Clock()
    t = TrafficStats(clock)
    t.record_put(1, "T", elapsed_ms=3)
    clock.now += 200  # minutes went by without a put or a look
    stats = t.store_stats()
    assert stats["putMessageDistributeTime"].startswith("[<=0ms]:0 [0~10ms]:0 ")
    assert (stats["putLatency99"], stats["putMessageEntireTimeMax"]) == ("0.00", "3")
