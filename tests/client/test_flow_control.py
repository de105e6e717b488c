"""Flow-control thresholds (docs/client.md §2.2)."""

from __future__ import annotations

from mqstore.client.consumer_config import MIB, ConsumerConfig
from mqstore.client.flow_control import FlowControl, check
from mqstore.client.process_queue import ProcessQueue
from tests.client.test_process_queue import msg


def test_default_thresholds_are_rocketmq_values():
    c = ConsumerConfig()
    assert (
        c.pull_threshold_for_queue,
        c.pull_threshold_size_for_queue_mib,
        c.consume_concurrently_max_span,
        c.flow_control_delay_ms,
    ) == (1000, 100, 2000, 50)


def test_pull_pauses_above_1000_held_messages():
    pq = ProcessQueue()
    pq.put_messages([msg(i) for i in range(1000)])
    assert check(pq, ConsumerConfig(), orderly=False) is None
    pq.put_messages([msg(1000)])
    assert check(pq, ConsumerConfig(), orderly=False) is FlowControl.CACHE_COUNT


def test_pull_pauses_above_the_size_threshold_in_mib():
    pq = ProcessQueue()
    pq.put_messages([msg(0, b"x" * (2 * MIB))])
    assert (
        check(pq, ConsumerConfig(pull_threshold_size_for_queue_mib=1), orderly=False)
        is FlowControl.CACHE_SIZE
    )


def test_concurrent_pull_pauses_when_the_span_passes_2000():
    pq = ProcessQueue()
    pq.put_messages([msg(0), msg(2001)])
    assert check(pq, ConsumerConfig(), orderly=False) is FlowControl.SPAN


def test_orderly_pull_ignores_the_span():
    pq = ProcessQueue()
    pq.put_messages([msg(0), msg(2001)])
    assert check(pq, ConsumerConfig(), orderly=True) is None
