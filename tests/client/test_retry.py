"""RECONSUME_LATER sends a message back; it returns through %RETRY%group."""

from __future__ import annotations

import threading

import pytest

from mqstore.client.consumer import ConsumeConcurrentlyStatus
from tests.client.consumer_harness import FIRST, broker, create_topic, produce, started_with

pytestmark = pytest.mark.integration

ONE_SECOND_LEVELS = " ".join(["1s"] * 18)


def test_a_reconsume_later_message_comes_back_through_the_retry_topic(tmp_path):
    with broker(tmp_path, delay_levels=ONE_SECOND_LEVELS) as core:
        qs = create_topic(core, "T", 2)
        deliveries: list[tuple[str, str, int]] = []
        back = threading.Event()

        def on_msgs(msgs, ctx):
            m = msgs[0]
            deliveries.append((m.body.decode(), m.topic, m.reconsume_times))
            if m.reconsume_times == 0:
                ctx.delay_level_when_next_consume = 1
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            back.set()
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c = started_with(core, on_msgs, FIRST)
        try:
            produce(core, qs[:1], 1, prefix="again")
            assert back.wait(15)
            # The listener sees the original topic again; reconsume_times counts.
            assert deliveries == [("again-0", "T", 0), ("again-0", "T", 1)]
            assert any(mq.topic == "%RETRY%g" for mq in c.owned())
        finally:
            c.shutdown()


def test_a_listener_that_raises_is_retried(tmp_path):
    with broker(tmp_path, delay_levels=ONE_SECOND_LEVELS) as core:
        qs = create_topic(core, "T", 1)
        calls: list[int] = []
        done = threading.Event()

        def on_msgs(msgs, ctx):
            calls.append(msgs[0].reconsume_times)
            ctx.delay_level_when_next_consume = 1
            if len(calls) == 1:
                raise RuntimeError("boom")
            done.set()
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c = started_with(core, on_msgs, FIRST)
        try:
            produce(core, qs, 1)
            assert done.wait(15)
            assert calls == [0, 1]
        finally:
            c.shutdown()
