"""Mixed-language group: an ali-ons consumer and our PushConsumer split one topic.

Both run AllocateMessageQueueAveragely over the same sorted queue and client-id lists
(from the broker's GET_CONSUMER_LIST_BY_GROUP), so they must agree on who owns which
queue: no queue consumed by both, none by neither.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable

import pytest

from mqstore.client.consumer_config import ConsumerConfig
from mqstore.client.listener import ConsumeConcurrentlyStatus
from mqstore.client.producer import Producer
from mqstore.client.push_consumer import PushConsumer
from mqstore.client.remote import RemoteTransport
from mqstore.client.transport import ConsumeFromWhere
from mqstore.message import Message
from tests.helpers import until
from tests.interop.broker_harness import HERE, LiveBroker, live_broker

pytestmark = [pytest.mark.interop, pytest.mark.integration]

TOPIC = "MixedT"
GROUP = "mixed-group"
PER_QUEUE = 10


broker = live_broker


def wait_for(cond: Callable[[], object], timeout_s: float, what: str) -> None:
    until(cond, timeout_s, 0.05, what)


def test_ali_ons_and_python_consumers_split_the_queues_without_overlap(
    node: str, broker: LiveBroker
) -> None:
    with RemoteTransport(broker.address) as t, Producer("mixed-pg", t) as producer:
        # ali-ons needs the topic to exist. The seed may be read by the Python consumer
        # while it is alone (a new group starts at 0 while the queue is in memory, as
        # RocketMQ's broker answers offset 0): it is left out of the split check.
        seed = producer.send(Message(TOPIC, b"seed")).msg_id
        queues = t.topic_queues(TOPIC)
        n_queues = len(queues)

        py_got: list[tuple[int, str]] = []
        lock = threading.Lock()

        def listener(msgs: list, context: object) -> ConsumeConcurrentlyStatus:
            with lock:
                py_got.extend((m.queue_id, m.uniq_key) for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        config = ConsumerConfig(
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            rebalance_interval_ms=1000,
            persist_offset_interval_ms=500,
        )
        py = PushConsumer(GROUP, RemoteTransport(broker.address), config)
        py.subscribe(TOPIC, "*")
        py.register_message_listener(listener)
        py.start()
        opts = {
            "nameSrv": broker.address, "group": GROUP, "topic": TOPIC,
            "fromWhere": "CONSUME_FROM_LAST_OFFSET", "expect": n_queues // 2 * PER_QUEUE,
            "timeoutMs": 30000, "settleMs": 1500, "rebalanceMs": 1000,
        }  # fmt: skip
        proc = subprocess.Popen(
            [node, str(HERE / "ons_consume.js"), json.dumps(opts)],
            cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for(lambda: len(t.consumer_ids(GROUP)) == 2, 20, "both consumers registered")
            wait_for(
                lambda: len([q for q in py.owned() if q.topic == TOPIC]) == n_queues // 2,
                20,
                "the Python consumer to give up half the queues",
            )
            for _ in range(n_queues * PER_QUEUE):
                producer.send(Message(TOPIC, b"m", tags="T"))
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            py.shutdown()
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    ons = [(int(m["queueId"]), m["uniqKey"]) for m in lines[:-1] if m["uniqKey"] != seed]
    assert lines[-1]["done"], err[-3000:]
    wait_for(lambda: len(py_got) >= n_queues // 2 * PER_QUEUE, 10, "the Python consumer")
    ons_queues = {q for q, _ in ons}
    py_queues = {q for q, u in py_got if u != seed}
    assert ons_queues.isdisjoint(py_queues)
    assert ons_queues | py_queues == set(range(n_queues))
    assert len({u for _, u in ons} | {u for _, u in py_got} - {seed}) == n_queues * PER_QUEUE
