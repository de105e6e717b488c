"""Embedded mode: several PushConsumers of one group over InProcessTransport."""

from __future__ import annotations

import dataclasses
import itertools
import time

import pytest

from mqstore.broker.inprocess import InProcessTransport
from mqstore.client.producer import Producer
from mqstore.message import Message
from tests.client import consumer_harness
from tests.client.consumer_harness import FIRST, Seen, broker, create_topic, produce, wait_until

pytestmark = pytest.mark.integration

CFG = dataclasses.replace(
    FIRST,
    rebalance_interval_ms=60_000,  # only notifications can move queues in these tests
)


def start_consumer(core, seen, name, *, orderly=False, cfg=CFG, topic="T", work_s=0.0):
    return consumer_harness.started_consumer(
        core, seen, name, cfg, orderly=orderly, topic=topic, work_s=work_s
    )


def assert_in_order_across_handovers(deliveries, n):
    """RocketMQ's orderly guarantee for one queue: each owner delivers consecutive
    offsets in order; a new owner may restart at or before where the last one stopped
    (its committed offset can trail by the batches in flight at the handover, e.g. a
    pull that piggy-backed an older offset), never skipping one; all n delivered."""
    assert {o for _, o in deliveries} == set(range(n))
    assert deliveries[0][1] == 0
    for (who_a, a), (who_b, b) in itertools.pairwise(deliveries):
        if b != a + 1:
            assert who_b != who_a and b <= a, f"gap or reorder {a}->{b} ({who_a}->{who_b})"


def topic_ids(c, topic="T"):
    return {mq.queue_id for mq in c.owned() if mq.topic == topic}


def settled(consumers, n=8):
    owned = [topic_ids(c) for c in consumers]
    return sum(map(len, owned)) == n and set().union(*owned) == set(range(n))


@pytest.fixture
def core(tmp_path):
    with broker(tmp_path) as c:
        yield c


def test_three_consumers_share_eight_queues_without_overlap(core):
    create_topic(core, "T", 8)
    seen = Seen()
    cs = [start_consumer(core, seen, f"c{i}") for i in range(3)]
    try:
        assert wait_until(lambda: settled(cs), 5)
        assert sorted(len(topic_ids(c)) for c in cs) == [2, 3, 3]
    finally:
        for c in cs:
            c.shutdown()


def test_every_message_is_consumed_at_least_once_by_the_group(core):
    qs = create_topic(core, "T", 8)
    seen = Seen()
    cs = [start_consumer(core, seen, f"c{i}") for i in range(3)]
    try:
        assert wait_until(lambda: settled(cs), 5)
        bodies = produce(core, qs, 3000)
        assert seen.wait_for(lambda c: set(bodies) <= set(c), 45)
    finally:
        for c in cs:
            c.shutdown()


def test_a_consumer_that_shuts_down_hands_its_queues_over_at_once(core):
    create_topic(core, "T", 8)
    seen = Seen()
    cs = [start_consumer(core, seen, f"c{i}") for i in range(3)]
    try:
        assert wait_until(lambda: settled(cs), 5)
        cs[0].shutdown()
        # The rebalance interval is 60 s: only the broker's notification moves queues.
        assert wait_until(lambda: settled(cs[1:]), 2)
    finally:
        for c in cs:
            c.shutdown()


def test_shutdown_persists_the_offsets_of_consumed_queues(core):
    qs = create_topic(core, "T", 8)
    seen = Seen()
    c = start_consumer(core, seen, "c0")
    assert wait_until(lambda: settled([c]), 5)
    bodies = produce(core, qs, 400)
    assert seen.wait_for(lambda got: set(bodies) <= set(got), 45)
    c.shutdown()
    assert [core.queries.query_offset("g", "T", q) for q in range(8)] == [50] * 8


def test_the_next_owner_continues_from_the_persisted_offset(core):
    qs = create_topic(core, "T", 8)
    seen = Seen()
    first = start_consumer(core, seen, "first")
    assert wait_until(lambda: settled([first]), 5)
    old = produce(core, qs, 80, prefix="old")
    assert seen.wait_for(lambda got: set(old) <= set(got), 45)
    first.shutdown()
    second = start_consumer(core, seen, "second")
    try:
        new = produce(core, qs, 80, prefix="new")
        assert seen.wait_for(lambda got: set(new) <= set(got), 45)
        assert not set(old) & set(seen.by_consumer["second"])
    finally:
        second.shutdown()


def test_orderly_consumption_keeps_per_queue_order_across_a_rebalance(core):
    qs = create_topic(core, "T", 8)
    seen = Seen()
    cfg = dataclasses.replace(CFG, consume_message_batch_max_size=4)
    cs = [
        start_consumer(core, seen, f"c{i}", orderly=True, cfg=cfg, work_s=0.002) for i in range(2)
    ]
    try:
        assert wait_until(lambda: settled(cs), 5)
        produce(core, qs, 800)
        cs.append(start_consumer(core, seen, "c2", orderly=True, cfg=cfg, work_s=0.002))
        produce(core, qs, 800, prefix="n")
        cs[0].shutdown()  # leaves
        produce(core, qs, 800, prefix="z")
        assert seen.wait_for(lambda got: len(got) == 2400, 30)
        for q in range(8):
            assert_in_order_across_handovers(seen.deliveries[q], 300)
    finally:
        for c in cs:
            c.shutdown()


def test_a_consumer_started_before_its_topic_exists_gets_the_first_message_at_once(core):
    # issue 33: it waited for its next rebalance (20 s by default, 60 s here); the topic's
    # creation now notifies the groups subscribed to it
    seen = Seen()
    c = start_consumer(core, seen, "c0", topic="Later")
    try:
        with InProcessTransport(core) as t, Producer("pg", t) as p:
            t0 = time.monotonic()
            p.send(Message("Later", b"first"))
            assert seen.wait_for(lambda counts: counts["first"] == 1, 50)
            took = time.monotonic() - t0
        assert took < 50, took  # not at the rebalance 60 s away
    finally:
        c.shutdown()
