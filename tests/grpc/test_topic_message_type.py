"""A topic takes the message types its ``message.type`` attribute names, as the proxy
checks them (``DefaultTopicMessageTypeValidator``; docs/grpc.md "Limits"): a topic
without it is NORMAL, MIXED takes every type; routes list what a topic accepts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

from mqstore.broker.core import BrokerCore
from mqstore.broker.topics import TopicConfig, parse_attributes
from mqstore.grpc import GrpcEndpoint
from mqstore.remoting.errors import BadRequestError

Code, T = pb.Code, pb.MessageType


@pytest.fixture
def stub(endpoint: GrpcEndpoint, core: BrokerCore) -> Iterator[Any]:
    core.create_topic(TopicConfig("PlainT", 2, 2))
    core.create_topic(TopicConfig("FifoT", 2, 2, attributes=parse_attributes("+message.type=FIFO")))
    core.create_topic(TopicConfig("DelayT", 2, 2, attributes=(("message.type", "DELAY"),)))
    with grpc.insecure_channel(endpoint.address) as ch:
        yield MessagingServiceStub(ch)


def send(stub: Any, topic: str, **system: Any) -> int:
    req = svc.SendMessageRequest()
    m = req.messages.add()
    m.topic.name = topic
    m.body = b"x"
    m.system_properties.message_id = "01ABCDEF0123"
    for k, v in system.items():
        if k == "delivery_ms":
            m.system_properties.delivery_timestamp.FromMilliseconds(v)
        else:
            setattr(m.system_properties, k, v)
    return int(stub.SendMessage(req, timeout=5).status.code)


def accepted(stub: Any, topic: str) -> list[int]:
    req = svc.QueryRouteRequest()
    req.topic.name = topic
    return list(stub.QueryRoute(req, timeout=5).message_queues[0].accept_message_types)


def test_topic_without_message_type_takes_normal_messages_only(stub: Any) -> None:
    assert accepted(stub, "PlainT") == [T.NORMAL]
    assert send(stub, "PlainT", message_type=T.NORMAL) == Code.OK
    fifo = send(stub, "PlainT", message_type=T.FIFO, message_group="g")
    assert fifo == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_fifo_topic_takes_messages_with_a_group_only(stub: Any) -> None:
    assert accepted(stub, "FifoT") == [T.FIFO]
    assert send(stub, "FifoT", message_type=T.FIFO, message_group="g") == Code.OK
    assert send(stub, "FifoT", message_type=T.NORMAL) == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_delay_topic_takes_messages_with_a_delivery_time_only(stub: Any) -> None:
    assert accepted(stub, "DelayT") == [T.DELAY]
    assert send(stub, "DelayT", message_type=T.DELAY, delivery_ms=1) == Code.OK
    assert send(stub, "DelayT", message_type=T.NORMAL) == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_mixed_topic_takes_every_type(stub: Any) -> None:
    from tests.grpc.conftest import TOPIC

    assert accepted(stub, TOPIC) == [T.NORMAL, T.FIFO, T.DELAY, T.TRANSACTION]
    assert send(stub, TOPIC, message_type=T.NORMAL) == Code.OK
    assert send(stub, TOPIC, message_type=T.FIFO, message_group="g") == Code.OK
    assert send(stub, TOPIC, message_type=T.DELAY, delivery_ms=1) == Code.OK


def test_topic_message_type_survives_the_topic_table_round_trip() -> None:
    tc = TopicConfig("X", attributes=parse_attributes("+message.type=FIFO"))
    back = TopicConfig.from_json("X", dict(tc.to_bean()))
    assert back.message_type == "FIFO"
    assert "attributes" not in TopicConfig("Y").to_bean()  # a 4.9.8 topic stays as it was


@pytest.mark.parametrize("text", ["message.type=FIFO", "+message.type=ODD", "+other=1"])
def test_bad_topic_attributes_are_refused(text: str) -> None:
    with pytest.raises(BadRequestError):
        parse_attributes(text)
