"""Orderly lock lifecycle: renewed broker locks keep a long-running consumer's queues;
a lock nobody renews lapses at the broker's expiry and another member takes the queue."""

from __future__ import annotations

import dataclasses
import time

import pytest

from mqstore.broker.core import BrokerConfig
from mqstore.broker.inprocess import InProcessTransport
from tests.client import consumer_harness
from tests.client.consumer_harness import FIRST, Seen, broker, create_topic, produce, wait_until

pytestmark = pytest.mark.integration

LEASE_MS = 600
"""The broker's lock expiry in these tests (RocketMQ: 60 s)."""

CFG = dataclasses.replace(
    FIRST,
    rebalance_interval_ms=60_000,
    lock_interval_ms=100,
    lock_max_live_ms=LEASE_MS // 2,  # local lease below the broker's, as 30 s < 60 s
)


def short_lease(root):
    return broker(
        root, config=BrokerConfig(hold_check_interval_ms=200, rebalance_lock_max_live_ms=LEASE_MS)
    )


def start(core, seen, name, cfg=CFG, transport=None):
    return consumer_harness.started_consumer(
        core, seen, name, cfg, orderly=True, transport=transport
    )


def topic_queues(c):
    return [mq for mq in c.owned() if mq.topic == "T"]


def test_renewed_locks_keep_the_queues_past_the_broker_expiry(tmp_path):
    with short_lease(tmp_path) as core:
        qs = create_topic(core, "T", 4)
        seen = Seen()
        c = start(core, seen, "c0")
        try:
            assert wait_until(lambda: len(topic_queues(c)) == 4, 5)
            time.sleep(3 * LEASE_MS / 1000)  # three leases: only renewal keeps them
            assert core.lock_batch("g", "intruder", qs) == set()
            bodies = produce(core, qs, 8)
            assert seen.wait_for(lambda got: set(bodies) <= set(got), 45)
        finally:
            c.shutdown()


def test_an_unrenewed_lock_lapses_at_the_broker_expiry(tmp_path):
    never_renews = dataclasses.replace(CFG, lock_interval_ms=60_000)
    with short_lease(tmp_path) as core:
        qs = create_topic(core, "T", 2)
        c = start(core, Seen(), "c0", never_renews)
        try:
            assert wait_until(lambda: len(topic_queues(c)) == 2, 5)
            assert core.lock_batch("g", "intruder", qs) == set()
            assert wait_until(lambda: core.lock_batch("g", "intruder", qs) == set(qs), 3)
        finally:
            c.shutdown()


def test_a_member_that_stops_renewing_stops_consuming_at_its_local_lease(tmp_path):
    never_renews = dataclasses.replace(CFG, lock_interval_ms=60_000)
    with short_lease(tmp_path) as core:
        qs = create_topic(core, "T", 1)
        seen = Seen()
        c = start(core, seen, "c0", never_renews)
        try:
            assert wait_until(lambda: len(topic_queues(c)) == 1, 5)
            first = produce(core, qs, 1, prefix="early")
            assert seen.wait_for(lambda got: set(first) <= set(got), 45)
            pq = c.rebalance.process_queue(qs[0])
            assert wait_until(lambda: pq.is_lock_expired(CFG.lock_max_live_ms), 3)
            late = produce(core, qs, 1, prefix="late")
            assert not seen.wait_for(lambda got: set(late) <= set(got), 0.5)
        finally:
            c.shutdown()


def test_another_member_takes_the_queues_once_a_lost_members_lease_lapses(tmp_path):
    with short_lease(tmp_path) as core:
        qs = create_topic(core, "T", 4)
        seen = Seen()
        lost_link = InProcessTransport(core)
        a = start(core, seen, "a", transport=lost_link)
        b = None
        try:
            assert wait_until(lambda: len(topic_queues(a)) == 4, 5)
            lost_link.close()  # a can neither renew nor unlock; the broker drops it
            b = start(core, seen, "b")
            assert wait_until(lambda: b.rebalance.runs >= 1, 5)
            assert topic_queues(b) == []  # a's locks are still live
            assert wait_until(lambda: len(topic_queues(b)) == 4, 5)
            bodies = produce(core, qs, 8, prefix="after")
            assert seen.wait_for(lambda got: set(bodies) <= set(got), 45)
            with seen.lock:
                assert set(bodies) <= set(seen.by_consumer["b"])
        finally:
            a.shutdown()
            if b is not None:
                b.shutdown()
