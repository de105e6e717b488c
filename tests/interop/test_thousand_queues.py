"""Issue 14 over the broker: a topic with 1,000 queues on a ``mqstore broker`` process
is routed (GET_ROUTEINFO_BY_TOPIC) and consumed whole by node ali-ons and by a group
of two Python push consumers that share its queues."""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter

import pytest

from mqstore.client.consumer import ConsumeConcurrentlyStatus, PushConsumer
from mqstore.client.remote import RemoteTransport
from tests.client.consumer_harness import FIRST
from tests.helpers import until
from tests.interop.broker_harness import run_node
from tests.thousand_queues import MESSAGES, QUEUES, TOPIC

pytestmark = [pytest.mark.interop, pytest.mark.integration]

CFG = dataclasses.replace(FIRST, suspend_ms=2000, rebalance_interval_ms=1000)


def test_the_route_of_a_1000_queue_topic_lists_every_queue(thousand_queues):
    with RemoteTransport(thousand_queues.address) as t:
        route = t.route(TOPIC)
        queues = t.topic_queues(TOPIC)
    assert route is not None
    assert [(q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [(1000, 1000)]
    assert [mq.queue_id for mq in queues] == list(range(QUEUES))


def test_ali_ons_consumes_every_message_of_a_1000_queue_topic(node, thousand_queues):
    lines = run_node(
        node, "ons_consume.js",
        {"nameSrv": thousand_queues.address, "group": "ons-thousand", "topic": TOPIC,
         "expect": MESSAGES, "timeoutMs": 90_000, "settleMs": 500},
        timeout_s=150,
    )  # fmt: skip
    msgs, summary = lines[:-1], lines[-1]
    assert summary == {"done": True, "count": MESSAGES}
    assert sorted(m["body"] for m in msgs if m["topic"] == TOPIC) == sorted(
        f"m-{i}" for i in range(MESSAGES)
    )
    assert {m["queueId"] for m in msgs} == set(range(QUEUES))


def test_two_python_push_consumers_share_a_1000_queue_topic_and_consume_every_message(
    thousand_queues,
):
    lock = threading.Lock()
    seen: Counter[str] = Counter()
    by: dict[str, set[int]] = {"c0": set(), "c1": set()}

    def listener(name: str):
        def on_msgs(msgs, ctx):
            with lock:
                for m in msgs:
                    seen[m.body.decode()] += 1
                    by[name].add(m.queue_id)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return on_msgs

    transports = [RemoteTransport(thousand_queues.address) for _ in range(2)]
    consumers = []
    for name, t in zip(("c0", "c1"), transports, strict=True):
        c = PushConsumer("py-thousand", t, CFG)
        c.subscribe(TOPIC)
        c.register_message_listener(listener(name))
        consumers.append(c)
    try:
        for c in consumers:
            c.start()

        def split() -> list[set[int]] | None:
            mine = [{mq.queue_id for mq in c.owned() if mq.topic == TOPIC} for c in consumers]
            done = len(seen) == MESSAGES and all(len(m) == QUEUES // 2 for m in mine)
            return mine if done else None

        mine = until(split, 120, 0.05, "every message and an even split")
    finally:
        for c in consumers:
            c.shutdown()
        for t in transports:
            t.close()
    assert [len(m) for m in mine] == [QUEUES // 2, QUEUES // 2]
    assert mine[0].isdisjoint(mine[1])
    assert set(seen) == {f"m-{i}" for i in range(MESSAGES)}
    assert by["c0"] and by["c1"]  # both members consumed
