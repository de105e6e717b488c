"""Fuzzing the endpoint: random bytes to every method, random requests of the right
shape, unknown methods and oversized bodies. The server keeps serving and every message
stored before is still there, unchanged."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

from mqstore.grpc import GrpcEndpoint
from mqstore.grpc.protocol import SERVICE_NAME
from tests.grpc.conftest import GROUP, TOPIC

UNARY = ["QueryRoute", "Heartbeat", "SendMessage", "QueryAssignment", "AckMessage",
         "ForwardMessageToDeadLetterQueue", "UpdateOffset", "GetOffset", "QueryOffset",
         "EndTransaction", "NotifyClientTermination", "ChangeInvisibleDuration",
         "RecallMessage", "SyncLiteSubscription"]  # fmt: skip
STREAMING = ["ReceiveMessage", "PullMessage"]
DEADLINE = 3.0
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip


@pytest.fixture
def channel(endpoint: GrpcEndpoint) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(endpoint.address) as ch:
        yield ch


@pytest.fixture
def seeded(endpoint: GrpcEndpoint, channel: grpc.Channel) -> list[bytes]:
    """Messages stored before the fuzzing."""
    stub = MessagingServiceStub(channel)
    bodies = [f"keep-{i}".encode() for i in range(10)]
    for i, b in enumerate(bodies):
        req = svc.SendMessageRequest()
        m = req.messages.add(body=b)
        m.topic.name = TOPIC
        m.system_properties.message_id = f"SEED{i:04d}"
        assert stub.SendMessage(req, timeout=DEADLINE).status.code == pb.Code.OK
    return bodies


def stored_bodies(ep: GrpcEndpoint) -> list[bytes]:
    store = ep.core.store
    store.wait_dispatched(60)
    out: list[bytes] = []
    for q in range(4):
        out.extend(m.body for m in store.get_message("audit", TOPIC, q, 0, 1000).messages)
    return out


def still_serving(channel: grpc.Channel) -> None:
    stub = MessagingServiceStub(channel)
    req = svc.QueryRouteRequest()
    req.topic.name = TOPIC
    assert stub.QueryRoute(req, timeout=DEADLINE).status.code == pb.Code.OK


def raw(channel: grpc.Channel, method: str, payload: bytes, stream: bool) -> None:
    path = f"/{SERVICE_NAME}/{method}"
    try:
        if stream:
            list(channel.unary_stream(path)(payload, timeout=DEADLINE))
        else:
            channel.unary_unary(path)(payload, timeout=DEADLINE)
    except grpc.RpcError as e:
        # bytes that do not parse are refused by gRPC itself; never a timeout
        assert e.code() != grpc.StatusCode.DEADLINE_EXCEEDED, (method, payload)


@FUZZ
@given(method=st.sampled_from(UNARY + STREAMING), payload=st.binary(max_size=512))
def test_random_bytes_to_every_method(
    channel: grpc.Channel, seeded: list[bytes], method: str, payload: bytes
) -> None:
    """Each example ends with the server answering a good request."""
    raw(channel, method, payload, method in STREAMING)
    still_serving(channel)


_text = st.text(max_size=30)


@FUZZ
@given(
    topic=st.one_of(st.just(TOPIC), _text), body=st.binary(max_size=64), tag=_text,
    group=_text, mtype=st.integers(0, 8), props=st.dictionaries(_text, _text, max_size=3),
    handle=_text, encoding=st.integers(0, 3), delay=st.integers(-10**12, 10**12),
)  # fmt: skip
def test_random_requests_of_the_right_shape(
    channel: grpc.Channel, seeded: list[bytes], endpoint: GrpcEndpoint, topic: str,
    body: bytes, tag: str, group: str, mtype: int, props: dict[str, str], handle: str,
    encoding: int, delay: int,
) -> None:  # fmt: skip
    stub = MessagingServiceStub(channel)
    req = svc.SendMessageRequest()
    m = req.messages.add(body=body)
    m.topic.name = topic
    m.system_properties.message_id = handle
    m.system_properties.tag = tag
    m.system_properties.message_type = mtype
    m.system_properties.body_encoding = encoding
    m.system_properties.delivery_timestamp.FromMilliseconds(abs(delay))
    for k, v in props.items():
        m.user_properties[k] = v
    r = stub.SendMessage(req, timeout=DEADLINE)
    assert r.status.code != pb.Code.INTERNAL_ERROR, r.status.message
    ack = svc.AckMessageRequest()
    ack.group.name = group or GROUP
    ack.topic.name = topic
    ack.entries.add(message_id=handle, receipt_handle=handle)
    assert stub.AckMessage(ack, timeout=DEADLINE).status.code != pb.Code.INTERNAL_ERROR
    change = svc.ChangeInvisibleDurationRequest(receipt_handle=handle)
    change.group.name = group or GROUP
    change.topic.name = topic
    change.invisible_duration.FromSeconds(1)
    assert stub.ChangeInvisibleDuration(change, timeout=DEADLINE).status.code != (
        pb.Code.INTERNAL_ERROR
    )
    kept = stored_bodies(endpoint)
    assert all(b in kept for b in seeded)


def test_unknown_method_is_unimplemented(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary(f"/{SERVICE_NAME}/NoSuchMethod")(b"", timeout=DEADLINE)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    still_serving(channel)


def test_oversized_request_is_refused_and_the_server_keeps_serving(
    channel: grpc.Channel, endpoint: GrpcEndpoint, seeded: list[bytes]
) -> None:
    limit = endpoint.core.store.cfg.max_message_size
    req = svc.SendMessageRequest()
    m = req.messages.add(body=b"\0" * (limit + 128 * 1024))
    m.topic.name = TOPIC
    m.system_properties.message_id = "BIG"
    with pytest.raises(grpc.RpcError) as e:
        MessagingServiceStub(channel).SendMessage(req, timeout=DEADLINE)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    still_serving(channel)


def test_body_over_the_store_maximum_is_message_body_too_large(
    channel: grpc.Channel, endpoint: GrpcEndpoint
) -> None:
    limit = endpoint.core.store.cfg.max_message_size
    req = svc.SendMessageRequest()
    m = req.messages.add(body=b"\0" * (limit + 1))
    m.topic.name = TOPIC
    m.system_properties.message_id = "BIG"
    r = MessagingServiceStub(channel).SendMessage(req, timeout=DEADLINE)
    assert r.status.code == pb.Code.MESSAGE_BODY_TOO_LARGE


def test_garbage_telemetry_stream_ends_without_harm(channel: grpc.Channel) -> None:
    call = channel.stream_stream(f"/{SERVICE_NAME}/Telemetry")(
        iter([b"\xff\xfe garbage", b"\x0a\xff"]), timeout=DEADLINE
    )
    answers = [svc.TelemetryCommand.FromString(b) for b in call]
    assert [a.status.code for a in answers] == [pb.Code.BAD_REQUEST] * 2
    still_serving(channel)


def test_bytes_that_do_not_parse_are_bad_request(channel: grpc.Channel) -> None:
    raw_reply = channel.unary_unary(f"/{SERVICE_NAME}/SendMessage")(b"\xff\xff", timeout=DEADLINE)
    assert svc.SendMessageResponse.FromString(raw_reply).status.code == pb.Code.BAD_REQUEST
    (item,) = channel.unary_stream(f"/{SERVICE_NAME}/ReceiveMessage")(b"\xff", timeout=DEADLINE)
    assert svc.ReceiveMessageResponse.FromString(item).status.code == pb.Code.BAD_REQUEST


def test_nothing_stored_is_lost_after_fuzzing(
    channel: grpc.Channel, endpoint: GrpcEndpoint, seeded: list[bytes]
) -> None:
    for method in UNARY + STREAMING:
        for payload in (b"", b"\x00", b"\x0a\xff\xff\xff\xff\x0f", bytes(range(256))):
            raw(channel, method, payload, method in STREAMING)
    still_serving(channel)
    kept = stored_bodies(endpoint)
    assert all(b in kept for b in seeded)
