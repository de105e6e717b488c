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
