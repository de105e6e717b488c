"""``resetOffsetByTime`` against an online push consumer (issue 25, docs/admin.md §9):
the project's own PushConsumer over real TCP has consumed a topic; an admin connection
sends INVOKE_BROKER_TO_RESET_OFFSET with a time between two batches; the broker pushes
RESET_CONSUMER_CLIENT_OFFSET and the consumer receives the second batch again."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.broker.topics import TopicConfig
from mqstore.client.consumer import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumerConfig,
    PushConsumer,
)
from mqstore.client.remote import RemoteTransport
from mqstore.message import Message
from mqstore.remoting.codes import ResponseCode as Rs
from mqstore.remoting.values import MessageQueue
from tests.broker.wire_client import WireClient
from tests.helpers import a_millisecond_between, until

pytestmark = pytest.mark.integration


def wait_for(cond: Callable[[], object], timeout: float = 30.0) -> None:
    until(cond, timeout)


def test_reset_by_time_moves_an_online_push_consumer_back(
    server: BrokerServer, core: BrokerCore
) -> None:
    store = core.store
    core.create_topic(TopicConfig("T", 1, 1))
    mq = MessageQueue("T", core.config.broker_name, 0)
    with RemoteTransport(server.address) as producer:
        for i in range(3):
            producer.send("pg", mq, [Message("T", f"old{i}".encode())])
        middle = a_millisecond_between()
        for i in range(3):
            producer.send("pg", mq, [Message("T", f"new{i}".encode())])
    assert store.wait_dispatched(60)

    seen: list[str] = []
    lock = threading.Lock()

    def on_msgs(msgs, ctx):  # type: ignore[no-untyped-def]
        with lock:
            seen.extend(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    cfg = ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                         suspend_ms=300, rebalance_interval_ms=1000,
                         persist_offset_interval_ms=100)  # fmt: skip
    with RemoteTransport(server.address) as transport:
        consumer = PushConsumer("g", transport, cfg)
        consumer.subscribe("T")
        consumer.register_message_listener(on_msgs)
        consumer.start()
        try:
            wait_for(lambda: len(seen) == 6)
            wait_for(lambda: core.offsets.query("g", "T", 0) == 6)
            with WireClient(server.address) as admin:
                ext = {"topic": "T", "group": "g", "timestamp": middle, "isForce": "true"}
                assert admin.call(222, ext).code == Rs.SUCCESS
            wait_for(lambda: len(seen) == 9)
            assert sorted(seen[6:]) == ["new0", "new1", "new2"]
            wait_for(lambda: core.offsets.query("g", "T", 0) == 6)
        finally:
            consumer.shutdown()
