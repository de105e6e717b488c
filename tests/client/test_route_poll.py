"""The route poll: a change in a subscribed topic's queue count rebalances at once,
well before the rebalance timer."""

from __future__ import annotations

import dataclasses

import pytest

from mqstore.broker.topics import TopicConfig
from mqstore.client.remote import RemoteTransport
from tests.client import consumer_harness
from tests.client.consumer_harness import FIRST, Seen, broker, create_topic, produce, wait_until

pytestmark = pytest.mark.integration

CFG = dataclasses.replace(
    FIRST,
    rebalance_interval_ms=60_000,  # the timer cannot be what moves the queues
    poll_name_server_interval_ms=100,
)


def start(core, seen, name, cfg=CFG, transport=None):
    return consumer_harness.started_consumer(core, seen, name, cfg, transport=transport)


def ids(c):
    return {mq.queue_id for mq in c.owned() if mq.topic == "T"}


def assert_takes_all_queues_after_growing_from_four_to_eight(core, c):
    """``c``, the one member of its group, owns T's 4 queues, then all 8 once T grows."""
    assert wait_until(lambda: ids(c) == set(range(4)), 5)
    core.create_topic(TopicConfig("T", 8, 8))
    assert wait_until(lambda: ids(c) == set(range(8)), 3)


def test_a_topic_grown_from_four_to_eight_queues_is_rebalanced_by_the_route_poll(tmp_path):
    with broker(tmp_path) as core:
        create_topic(core, "T", 4)
        c = start(core, Seen(), "c0")
        try:
            assert_takes_all_queues_after_growing_from_four_to_eight(core, c)
        finally:
            c.shutdown()


def test_the_route_poll_sees_a_grown_topic_over_tcp(tmp_path):
    server_mod = pytest.importorskip("mqstore.broker.server")
    with broker(tmp_path) as core:
        create_topic(core, "T", 4)
        server = server_mod.BrokerServer(core, host="127.0.0.1", port=0)
        port = server.start()
        t = RemoteTransport(f"127.0.0.1:{port}")
        c = start(core, Seen(), "c0", transport=t)
        try:
            assert_takes_all_queues_after_growing_from_four_to_eight(core, c)
        finally:
            c.shutdown()
            t.close()
            server.stop()


def test_messages_in_the_added_queues_are_consumed(tmp_path):
    with broker(tmp_path) as core:
        create_topic(core, "T", 4)
        seen = Seen()
        c = start(core, seen, "c0")
        try:
            assert wait_until(lambda: len(ids(c)) == 4, 5)
            qs = create_topic(core, "T", 8)
            bodies = produce(core, qs[4:], 8)
            assert seen.wait_for(lambda got: set(bodies) <= set(got), 45)
        finally:
            c.shutdown()


def test_a_shrunk_topic_drops_the_removed_queues(tmp_path):
    with broker(tmp_path) as core:
        create_topic(core, "T", 8)
        c = start(core, Seen(), "c0")
        try:
            assert wait_until(lambda: len(ids(c)) == 8, 5)
            core.create_topic(TopicConfig("T", 4, 4))
            assert wait_until(lambda: ids(c) == set(range(4)), 3)
        finally:
            c.shutdown()


def test_two_members_split_the_grown_topic_without_overlap(tmp_path):
    with broker(tmp_path) as core:
        create_topic(core, "T", 4)
        seen = Seen()
        cs = [start(core, seen, f"c{i}") for i in range(2)]
        try:
            assert wait_until(lambda: sorted(len(ids(c)) for c in cs) == [2, 2], 5)
            core.create_topic(TopicConfig("T", 8, 8))
            assert wait_until(
                lambda: [len(ids(c)) for c in cs] == [4, 4] and ids(cs[0]).isdisjoint(ids(cs[1])),
                3,
            )
        finally:
            for c in cs:
                c.shutdown()


def test_without_the_route_poll_the_timer_alone_does_not_see_the_new_queues(tmp_path):
    slow_poll = dataclasses.replace(CFG, poll_name_server_interval_ms=60_000)
    with broker(tmp_path) as core:
        create_topic(core, "T", 4)
        c = start(core, Seen(), "c0", slow_poll)
        try:
            assert wait_until(lambda: len(ids(c)) == 4, 5)
            core.create_topic(TopicConfig("T", 8, 8))
            assert not wait_until(lambda: len(ids(c)) == 8, 1)
        finally:
            c.shutdown()
