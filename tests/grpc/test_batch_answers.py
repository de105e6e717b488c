"""A SendMessage or AckMessage of several entries answers each entry, and the response's
status is theirs when they agree, else MULTIPLE_RESULTS (a raw stub, so the batches are
exactly what the test builds)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

from mqstore.broker.core import BrokerCore
from mqstore.grpc import GrpcEndpoint
from tests.grpc.conftest import GROUP, TOPIC

Code = pb.Code
DEADLINE = 10.0


@pytest.fixture
def stub(endpoint: GrpcEndpoint) -> Iterator[Any]:
    with grpc.insecure_channel(endpoint.address) as ch:
        yield MessagingServiceStub(ch)


def send_request(*bodies: bytes, group: str | None = None) -> Any:
    req = svc.SendMessageRequest()
    for i, body in enumerate(bodies):
        m = req.messages.add()
        m.topic.name = TOPIC
        m.body = body
        m.system_properties.message_id = f"01{i:030X}"
        if group is not None:
            m.system_properties.message_group = group
            m.system_properties.message_type = pb.MessageType.FIFO
    return req


def receive_all(stub: Any, n: int) -> list[Any]:
    req = svc.ReceiveMessageRequest(batch_size=32)
    req.group.name = GROUP
    req.message_queue.topic.name = TOPIC
    req.invisible_duration.FromMilliseconds(30_000)
    req.long_polling_timeout.FromMilliseconds(1_000)
    got: list[Any] = []
    for _ in range(20):  # bounded: each receive waits at most its long poll
        got += [r.message for r in stub.ReceiveMessage(req, timeout=DEADLINE)
                if r.HasField("message")]  # fmt: skip
        if len(got) >= n:
            break
    return got


def ack_request(*messages: Any) -> Any:
    req = svc.AckMessageRequest()
    req.group.name = GROUP
    req.topic.name = TOPIC
    for m in messages:
        req.entries.add(message_id=m.system_properties.message_id,
                        receipt_handle=m.system_properties.receipt_handle)  # fmt: skip
    return req


def test_send_of_a_stored_and_a_refused_message_is_multiple_results(stub: Any) -> None:
    r = stub.SendMessage(send_request(b"kept", b""), timeout=DEADLINE)
    assert r.status.code == Code.MULTIPLE_RESULTS
    assert [e.status.code for e in r.entries] == [Code.OK, Code.MESSAGE_BODY_EMPTY]
    assert r.entries[0].status.message == "OK"


def test_send_of_stored_messages_answers_ok_with_each_id(stub: Any) -> None:
    r = stub.SendMessage(send_request(b"a", b"b"), timeout=DEADLINE)
    assert (r.status.code, r.status.message) == (Code.OK, "OK")
    assert [e.message_id for e in r.entries] == [f"01{i:030X}" for i in range(2)]


def test_a_message_group_picks_its_queue_by_crc32(stub: Any, core: BrokerCore) -> None:
    r = stub.SendMessage(send_request(b"a", b"b", b"c", group="orders"), timeout=DEADLINE)
    assert r.status.code == Code.OK
    queue = zlib.crc32(b"orders") % 4
    got = receive_all(stub, 3)
    assert {m.system_properties.queue_id for m in got} == {queue}
    assert sorted(m.system_properties.queue_offset for m in got) == [0, 1, 2]


def test_ack_of_a_held_and_an_acked_message_is_multiple_results(stub: Any) -> None:
    stub.SendMessage(send_request(b"one", b"two"), timeout=DEADLINE)
    first, second = receive_all(stub, 2)[:2]
    assert stub.AckMessage(ack_request(first), timeout=DEADLINE).status.code == Code.OK
    r = stub.AckMessage(ack_request(first, second), timeout=DEADLINE)
    assert r.status.code == Code.MULTIPLE_RESULTS
    assert [e.status.code for e in r.entries] == [Code.INVALID_RECEIPT_HANDLE, Code.OK]
    assert [e.message_id for e in r.entries] == [m.system_properties.message_id
                                                  for m in (first, second)]  # fmt: skip


def test_ack_of_held_messages_answers_ok(stub: Any) -> None:
    stub.SendMessage(send_request(b"one", b"two"), timeout=DEADLINE)
    got = receive_all(stub, 2)
    r = stub.AckMessage(ack_request(*got), timeout=DEADLINE)
    assert (r.status.code, r.status.message) == (Code.OK, "OK")
    assert [e.status.code for e in r.entries] == [Code.OK] * len(got)
