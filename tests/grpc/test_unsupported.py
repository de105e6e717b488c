"""Requests mqstore does not support get the protocol's status and a clear message at
once (a raw stub with a short deadline: a hang would fail the call)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

from mqstore.grpc import GrpcEndpoint
from tests.grpc.conftest import GROUP, TOPIC

DEADLINE = 3.0
NOT_IMPLEMENTED = pb.Code.NOT_IMPLEMENTED


@pytest.fixture
def stub(endpoint: GrpcEndpoint) -> Iterator[Any]:
    with grpc.insecure_channel(endpoint.address) as ch:
        yield MessagingServiceStub(ch)


def send_request(**system: Any) -> Any:
    req = svc.SendMessageRequest()
    m = req.messages.add()
    m.topic.name = TOPIC
    m.body = b"x"
    m.system_properties.message_id = "01ABCDEF"
    for k, v in system.items():
        setattr(m.system_properties, k, v)
    return req


def test_lite_topic_send_is_not_implemented(stub: Any) -> None:
    r = stub.SendMessage(send_request(lite_topic="lt", message_type=pb.MessageType.LITE),
                         timeout=DEADLINE)  # fmt: skip
    assert r.status.code == NOT_IMPLEMENTED
    assert "lite" in r.status.message


def test_lite_subscription_recall_and_offsets_are_not_implemented(stub: Any) -> None:
    calls = [
        stub.SyncLiteSubscription(svc.SyncLiteSubscriptionRequest(), timeout=DEADLINE),
        stub.RecallMessage(svc.RecallMessageRequest(), timeout=DEADLINE),
        stub.GetOffset(svc.GetOffsetRequest(), timeout=DEADLINE),
        stub.UpdateOffset(svc.UpdateOffsetRequest(), timeout=DEADLINE),
        stub.QueryOffset(svc.QueryOffsetRequest(), timeout=DEADLINE),
    ]
    assert [c.status.code for c in calls] == [NOT_IMPLEMENTED] * len(calls)


def test_pull_message_stream_answers_not_implemented(stub: Any) -> None:
    (r,) = list(stub.PullMessage(svc.PullMessageRequest(), timeout=DEADLINE))
    assert r.status.code == NOT_IMPLEMENTED


def test_receive_of_unknown_topic_is_topic_not_found(stub: Any) -> None:
    req = svc.ReceiveMessageRequest(batch_size=1, auto_renew=True)
    req.group.name = GROUP
    req.message_queue.topic.name = "NoSuchTopic"
    (r,) = list(stub.ReceiveMessage(req, timeout=DEADLINE))
    assert r.status.code == pb.Code.TOPIC_NOT_FOUND


def test_invisible_duration_below_the_minimum_is_refused(stub: Any) -> None:
    req = svc.ReceiveMessageRequest(batch_size=1)
    req.group.name = GROUP
    req.message_queue.topic.name = TOPIC
    req.invisible_duration.FromMilliseconds(10)
    (r,) = list(stub.ReceiveMessage(req, timeout=DEADLINE))
    assert r.status.code == pb.Code.ILLEGAL_INVISIBLE_TIME


def test_malformed_receipt_handle_is_invalid_receipt_handle(stub: Any) -> None:
    req = svc.AckMessageRequest()
    req.group.name = GROUP
    req.topic.name = TOPIC
    req.entries.add(message_id="x", receipt_handle="not a handle")
    r = stub.AckMessage(req, timeout=DEADLINE)
    assert r.status.code == pb.Code.INVALID_RECEIPT_HANDLE


def test_delivery_time_beyond_the_longest_delay_is_refused(stub: Any) -> None:
    req = send_request(message_type=pb.MessageType.DELAY)
    req.messages[0].system_properties.delivery_timestamp.FromSeconds(4_000_000_000)
    r = stub.SendMessage(req, timeout=DEADLINE)
    assert r.status.code == pb.Code.ILLEGAL_DELIVERY_TIME
