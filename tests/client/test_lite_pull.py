"""LitePullConsumer: assign, subscribe, poll, commit, seek, iterator form."""

from __future__ import annotations

import pytest

from mqstore.broker.inprocess import InProcessTransport
from mqstore.client.consumer import LitePullConsumer
from tests.client.consumer_harness import FIRST, broker, create_topic, produce, wait_until

pytestmark = pytest.mark.integration

CFG = FIRST


@pytest.fixture
def core(tmp_path):
    with broker(tmp_path) as c:
        yield c


def drain(c, n, timeout=10.0):
    got = []
    deadline_polls = int(timeout / 0.2)
    for _ in range(deadline_polls):
        got.extend(m.body.decode() for m in c.poll(0.2))
        if len(got) >= n:
            break
    return got


def test_assigned_queues_are_polled_in_queue_order(core):
    qs = create_topic(core, "T", 2)
    produce(core, qs[:1], 50)
    c = LitePullConsumer("g", InProcessTransport(core), CFG)
    c.assign(qs[:1])
    c.start()
    try:
        assert drain(c, 50) == [f"m-{i}" for i in range(50)]
    finally:
        c.shutdown()


def test_commit_sync_stores_the_offset_after_the_polled_messages(core):
    qs = create_topic(core, "T", 1)
    produce(core, qs, 20)
    c = LitePullConsumer("g", InProcessTransport(core), CFG, auto_commit=False)
    c.assign(qs)
    c.start()
    try:
        assert len(drain(c, 20)) == 20
        c.commit_sync()
        assert core.queries.query_offset("g", "T", 0) == 20
    finally:
        c.shutdown()


def test_seek_replays_from_the_given_offset(core):
    qs = create_topic(core, "T", 1)
    produce(core, qs, 10)
    c = LitePullConsumer("g", InProcessTransport(core), CFG)
    c.assign(qs)
    c.start()
    try:
        assert len(drain(c, 10)) == 10
        c.seek(qs[0], 7)
        assert drain(c, 3) == ["m-7", "m-8", "m-9"]
    finally:
        c.shutdown()


def test_iterating_messages_yields_each_message_once(core):
    qs = create_topic(core, "T", 4)
    bodies = produce(core, qs, 40)
    c = LitePullConsumer("g", InProcessTransport(core), CFG)
    c.subscribe("T")
    c.start()
    got = []
    try:
        for m in c.messages(poll_timeout=0.2):
            got.append(m.body.decode())
            if len(got) == 40:
                break
    finally:
        c.shutdown()
    assert sorted(got) == sorted(bodies)


def test_two_subscribed_lite_consumers_split_the_queues(core):
    create_topic(core, "T", 4)
    cs = [LitePullConsumer("g", InProcessTransport(core), CFG) for _ in range(2)]
    for c in cs:
        c.subscribe("T")
        c.start()
    try:

        def split():
            owned = [{mq.queue_id for mq in c.owned() if mq.topic == "T"} for c in cs]
            return (
                owned[0].isdisjoint(owned[1]) and owned[0] | owned[1] == {0, 1, 2, 3} and all(owned)
            )

        assert wait_until(split, 5)
    finally:
        for c in cs:
            c.shutdown()
