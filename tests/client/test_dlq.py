"""Dead letters end to end: a message that keeps failing is retried
``max_reconsume_times`` times through %RETRY%group, then lands in %DLQ%group and is
never delivered again."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from mqstore.broker.inprocess import InProcessTransport
from mqstore.client.allocate import MessageQueue
from mqstore.client.consumer import ConsumeConcurrentlyStatus, PushConsumer
from mqstore.client.transport import PullQuery, PullStatus
from tests.client.consumer_harness import FIRST, broker, create_topic, produce, wait_until

pytestmark = pytest.mark.integration

ONE_SECOND_LEVELS = " ".join(["1s"] * 18)
MAX_RECONSUME = 2
CFG = dataclasses.replace(
    FIRST,
    max_reconsume_times=MAX_RECONSUME,
    poll_name_server_interval_ms=100,  # pick up %RETRY%g as soon as it exists
)


def always_failing(deliveries, more):
    def on_msgs(msgs, ctx):
        for m in msgs:
            deliveries.append((m.body.decode(), m.reconsume_times))
        if len(deliveries) > MAX_RECONSUME + 1:
            more.set()
        ctx.delay_level_when_next_consume = 1  # 1 s, whatever the broker's default
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    return on_msgs


def dlq_messages(core, group="g"):
    """What %DLQ%group holds, read with the pull API."""
    t = InProcessTransport(core)
    mq = MessageQueue(f"%DLQ%{group}", core.config.broker_name, 0)
    if not t.topic_queues(mq.topic):
        return []
    reply = t.pull(PullQuery("inspector", mq, 0, 32))
    return list(reply.messages) if reply.status is PullStatus.FOUND else []


def test_a_message_that_always_fails_ends_in_the_dlq_and_is_not_redelivered(tmp_path):
    with broker(tmp_path, delay_levels=ONE_SECOND_LEVELS) as core:
        qs = create_topic(core, "T", 2)
        deliveries: list[tuple[str, int]] = []
        more = threading.Event()
        c = PushConsumer("g", InProcessTransport(core), CFG)
        c.subscribe("T")
        c.register_message_listener(always_failing(deliveries, more))
        c.start()
        try:
            produce(core, qs[:1], 1, prefix="poison")
            assert wait_until(lambda: len(dlq_messages(core)) == 1, 15)
            dead = dlq_messages(core)[0]
            assert dead.body == b"poison-0"
            assert dead.properties.get("RETRY_TOPIC") == "T"
            # The original and MAX_RECONSUME retries, in order; nothing after the DLQ.
            assert deliveries == [("poison-0", n) for n in range(MAX_RECONSUME + 1)]
            assert not more.wait(1.5)  # > one retry delay: no further delivery
        finally:
            c.shutdown()


def test_the_dlq_has_one_queue_and_the_retry_topic_holds_only_the_retries(tmp_path):
    with broker(tmp_path, delay_levels=ONE_SECOND_LEVELS) as core:
        qs = create_topic(core, "T", 1)
        deliveries: list[tuple[str, int]] = []
        c = PushConsumer("g", InProcessTransport(core), CFG)
        c.subscribe("T")
        c.register_message_listener(always_failing(deliveries, threading.Event()))
        c.start()
        try:
            produce(core, qs, 1, prefix="poison")
            assert wait_until(lambda: len(dlq_messages(core)) == 1, 15)
            t = InProcessTransport(core)
            assert [mq.queue_id for mq in t.topic_queues("%DLQ%g")] == [0]
            retry_total = sum(t.max_offset(mq) for mq in t.topic_queues("%RETRY%g"))
            assert retry_total == MAX_RECONSUME
        finally:
            c.shutdown()
