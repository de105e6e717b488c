"""FaultStrategy: RocketMQ's latency tables and the queue choice, on a fake clock."""

from __future__ import annotations

import pytest

from mqstore.client.allocate import MessageQueue
from mqstore.client.fault import FaultStrategy, penalty_ms

QUEUES = [MessageQueue("T", b, i) for b in ("a", "b") for i in range(2)]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("latency", "penalty"),
    [(0, 0), (99, 0), (549, 0), (550, 30_000), (1000, 60_000), (2999, 120_000), (15_000, 600_000)],
)
def test_penalty_follows_rocketmqs_tables(latency: int, penalty: int):
    assert penalty_ms(latency) == penalty


def test_a_failed_broker_is_skipped_until_its_window_ends():
    clock = Clock()
    faults = FaultStrategy(True, clock)
    faults.update("b", 0, failed=True)
    picked = {faults.select(QUEUES, i, None).broker_name for i in range(20)}
    assert picked == {"a"}
    clock.now += 600
    assert {faults.select(QUEUES, i, None).broker_name for i in range(20)} == {"a", "b"}


def test_a_slow_broker_is_skipped_for_its_latency_penalty():
    clock = Clock()
    faults = FaultStrategy(True, clock)
    faults.update("b", 700, failed=False)  # 30 s
    clock.now += 29
    assert not faults.available("b")
    clock.now += 1
    assert faults.available("b")


def test_when_every_broker_is_penalised_the_one_free_soonest_is_tried():
    clock = Clock()
    faults = FaultStrategy(True, clock)
    faults.update("a", 0, failed=True)  # 600 s
    faults.update("b", 1000, failed=False)  # 60 s
    assert {faults.select(QUEUES, i, None).broker_name for i in range(10)} == {"b"}


def test_off_by_default_it_records_nothing_and_retries_on_another_broker():
    faults = FaultStrategy()
    faults.update("b", 0, failed=True)
    assert faults.items() == []
    assert {faults.select(QUEUES, i, "a").broker_name for i in range(10)} == {"b"}
