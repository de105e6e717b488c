"""PushConsumer.pause()/resume(): RocketMQ's suspend/resume, over an embedded broker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mqstore.broker.inprocess import InProcessTransport
from mqstore.client.consumer import ConsumeConcurrentlyStatus, PushConsumer
from tests.client.consumer_harness import FIRST, Seen, broker, create_topic, produce

pytestmark = pytest.mark.integration
CFG = FIRST


def _wait_owned(c: PushConsumer, n: int) -> None:
    deadline = time.monotonic() + 60
    while len([q for q in c.owned() if q.topic == "T"]) != n:
        assert time.monotonic() < deadline, c.owned()
        time.sleep(0.05)


def test_a_paused_consumer_pulls_nothing_until_resumed(tmp_path: Path):
    with broker(tmp_path) as core:
        queues = create_topic(core, "T", 4)
        seen = Seen()
        c = PushConsumer("g", InProcessTransport(core), CFG)
        c.subscribe("T")

        def on_msgs(msgs, ctx):  # type: ignore[no-untyped-def]
            for m in msgs:
                seen.add("c", m.body.decode(), m.queue_id, m.queue_offset)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c.register_message_listener(on_msgs)
        c.start()
        try:
            _wait_owned(c, 4)
            c.pause()
            time.sleep(0.5)  # pulls already held (suspend 200 ms) end
            produce(core, queues, 20)
            time.sleep(1.5)
            assert sum(seen.counts().values()) == 0
            c.resume()
            assert seen.wait_for(lambda n: sum(n.values()) == 20, 45)
        finally:
            c.shutdown()


def test_a_paused_consumer_does_not_rebalance(tmp_path: Path):
    with broker(tmp_path) as core:
        create_topic(core, "T", 4)
        c = PushConsumer("g", InProcessTransport(core), CFG)
        c.subscribe("T")
        c.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        c.pause()
        c.start()
        try:
            time.sleep(1.0)
            assert c.owned() == []
            c.resume()
            _wait_owned(c, 4)
        finally:
            c.shutdown()
