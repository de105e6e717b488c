"""RocketMQ 5's documented limits, as the proxy applies them (``ProxyConfig`` defaults,
docs/grpc.md "Limits"), on an endpoint with the default ServiceConfig and a raw stub."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

from mqstore.broker.core import BrokerCore
from mqstore.grpc import GrpcConfig, GrpcEndpoint
from tests.grpc.conftest import GROUP, TOPIC

Code = pb.Code


@pytest.fixture
def stub(core: BrokerCore) -> Iterator[Any]:
    ep = GrpcEndpoint(core, GrpcConfig(port=0))
    ep.start()
    try:
        with grpc.insecure_channel(ep.address) as ch:
            yield MessagingServiceStub(ch)
    finally:
        ep.stop(grace=0.2)


def send(stub: Any, body: bytes = b"x", **system: Any) -> Any:
    req = svc.SendMessageRequest()
    m = req.messages.add()
    m.topic.name = TOPIC
    m.body = body
    m.system_properties.message_id = f"01{time.monotonic_ns():030X}"
    users = system.pop("user_properties", {})
    for k, v in users.items():
        m.user_properties[k] = v
    for k, v in system.items():
        setattr(m.system_properties, k, v)
    return stub.SendMessage(req, timeout=5).status


def receive(stub: Any, *, timeout: float = 10, poll_ms: int | None = None,
            invisible_ms: int | None = 30_000, batch: int = 32, **kw: Any) -> list[Any]:  # fmt: skip
    req = svc.ReceiveMessageRequest(batch_size=batch, **kw)
    req.group.name = GROUP
    req.message_queue.topic.name = TOPIC
    if invisible_ms is not None:
        req.invisible_duration.FromMilliseconds(invisible_ms)
    if poll_ms is not None:
        req.long_polling_timeout.FromMilliseconds(poll_ms)
    return list(stub.ReceiveMessage(req, timeout=timeout))


def codes(responses: list[Any]) -> list[int]:
    return [r.status.code for r in responses if r.HasField("status")]


def bodies(responses: list[Any]) -> list[bytes]:
    return [r.message.body for r in responses if r.HasField("message")]


def test_receive_invisible_time_under_ten_seconds_is_refused(stub: Any) -> None:
    send(stub)
    assert codes(receive(stub, invisible_ms=9_999)) == [Code.ILLEGAL_INVISIBLE_TIME]
    assert bodies(receive(stub, invisible_ms=10_000)) == [b"x"]


def test_receive_without_invisible_time_or_auto_renew_is_refused(stub: Any) -> None:
    assert codes(receive(stub, invisible_ms=None)) == [Code.ILLEGAL_INVISIBLE_TIME]


def test_auto_renew_receive_takes_the_default_invisible_time(stub: Any) -> None:
    send(stub)
    (m,) = [r.message for r in receive(stub, invisible_ms=1_000, auto_renew=True)
            if r.HasField("message")]  # fmt: skip
    assert m.system_properties.invisible_duration.ToMilliseconds() == 60_000


def test_change_invisible_duration_beyond_twelve_hours_is_refused(stub: Any) -> None:
    send(stub)
    (m,) = [r.message for r in receive(stub) if r.HasField("message")]
    req = svc.ChangeInvisibleDurationRequest(receipt_handle=m.system_properties.receipt_handle,
                                             message_id=m.system_properties.message_id)  # fmt: skip
    req.group.name = GROUP
    req.topic.name = TOPIC
    req.invisible_duration.FromMilliseconds(12 * 3600 * 1000 + 1)
    assert stub.ChangeInvisibleDuration(req, timeout=5).status.code == Code.ILLEGAL_INVISIBLE_TIME


def test_message_group_of_64_bytes_is_refused(stub: Any) -> None:
    assert send(stub, message_group="g" * 64).code == Code.ILLEGAL_MESSAGE_GROUP
    assert send(stub, message_group="g" * 63).code == Code.OK
    assert send(stub, message_group="\u00e9" * 32).code == Code.ILLEGAL_MESSAGE_GROUP  # 64 bytes


def test_user_properties_over_16_kib_are_refused(stub: Any) -> None:
    big = {"k": "v" * (16 * 1024 - 1)}
    assert send(stub, user_properties=big).code == Code.OK
    assert send(stub, user_properties=big, tag="t").code == Code.MESSAGE_PROPERTIES_TOO_LARGE
    many = {f"k{i}": "v" for i in range(129)}
    assert send(stub, user_properties=many).code == Code.MESSAGE_PROPERTIES_TOO_LARGE


def test_short_long_poll_is_raised_to_five_seconds(stub: Any) -> None:
    """A receive asking a 1 s poll on an empty topic still gets a message sent 2.5 s in."""
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.extend(receive(stub, poll_ms=1_000, timeout=15)))
    t.start()
    time.sleep(2.5)
    send(stub, b"late")
    t.join(20)
    assert bodies(out) == [b"late"]


def test_deadline_shorter_than_the_shortest_poll_is_illegal_polling_time(stub: Any) -> None:
    assert codes(receive(stub, poll_ms=1_000, timeout=3)) == [Code.ILLEGAL_POLLING_TIME]


def test_receive_batch_above_32_is_cut_to_32(stub: Any) -> None:
    for i in range(40):
        send(stub, b"%d" % i)
    assert len(bodies(receive(stub, batch=64))) == 32
