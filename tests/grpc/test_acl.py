"""The broker's plain ACL on the gRPC endpoint, with the official Python 5.x client
(``rocketmq-python-client``) and raw stubs: signed clients produce and consume; no key or
a wrong one is UNAUTHORIZED, a missing permission FORBIDDEN, with the remoting remark."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mqstore.broker.acl import AccessControl
from mqstore.broker.core import BrokerCore
from mqstore.broker.topics import TopicConfig
from mqstore.grpc import GrpcConfig, GrpcEndpoint
from mqstore.grpc.protocol import Code, pb, svc
from tests.grpc.conftest import GROUP, TOPIC, message, quick_service, until

rmq = pytest.importorskip("rocketmq")

AK, SK = "rocketmq2", "12345678"
ACL_DOC: dict[str, Any] = {
    "accounts": [
        {
            "accessKey": AK,
            "secretKey": SK,
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": [f"{TOPIC}=PUB|SUB", "Secret=DENY", "SubOnly=SUB"],
            "groupPerms": ["banned=DENY"],
        }
    ]
}


@pytest.fixture
def acl_endpoint(core: BrokerCore) -> Iterator[GrpcEndpoint]:
    for topic in ("Secret", "SubOnly"):
        core.create_topic(TopicConfig(topic, 4, 4))
    cfg = GrpcConfig(
        port=0,
        acl=AccessControl.from_dict(ACL_DOC),
        service=quick_service(),
    )
    ep = GrpcEndpoint(core, cfg)
    ep.start()
    yield ep
    ep.stop(grace=0.2)


@pytest.fixture
def client_log() -> Iterator[list[str]]:
    """The official client's error log lines (it logs a failed route query and goes on)."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("rocketmq-python-client")
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(level)


def config(ep: GrpcEndpoint, ak: str = AK, sk: str = SK) -> Any:
    from rocketmq import ClientConfiguration, Credentials

    return ClientConfiguration(ep.address, Credentials(ak, sk), request_timeout=3)


@contextlib.contextmanager
def producing(ep: GrpcEndpoint, ak: str = AK, sk: str = SK) -> Iterator[Any]:
    """A started 5.x producer of ``TOPIC`` signing with ``ak``/``sk``; shut down after."""
    from rocketmq import Producer

    p = Producer(config(ep, ak, sk), (TOPIC,))
    p.startup()
    try:
        yield p
    finally:
        p.shutdown()


def signed(ak: str = AK, sk: str = SK) -> list[tuple[str, str]]:
    """The metadata the official client sends on a call."""
    from rocketmq.v5.util import Signature

    return list(Signature.metadata(config_for_metadata(ak, sk), "test-client"))


def config_for_metadata(ak: str, sk: str) -> Any:
    from rocketmq import ClientConfiguration, Credentials

    return ClientConfiguration("127.0.0.1:1", Credentials(ak, sk))


def stub(ep: GrpcEndpoint) -> Any:
    import grpc
    from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

    return MessagingServiceStub(grpc.insecure_channel(ep.address))


def test_signed_producer_and_consumer_work_under_acl(acl_endpoint: GrpcEndpoint) -> None:
    from rocketmq import FilterExpression, SimpleConsumer

    with producing(acl_endpoint) as p:
        ids = {p.send(message(f"m{i}".encode())).message_id for i in range(3)}
    c = SimpleConsumer(config(acl_endpoint), GROUP, {TOPIC: FilterExpression()}, await_duration=1)
    c.startup()
    got: list[Any] = []

    def all_three() -> bool:
        got.extend(c.receive(32, 10))
        return len(got) >= 3

    try:
        until(all_three)
        for m in got:
            c.ack(m)
    finally:
        c.shutdown()
    assert {m.message_id for m in got} == ids


def test_signed_push_consumer_consumes_under_acl(acl_endpoint: GrpcEndpoint) -> None:
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    with producing(acl_endpoint) as p:
        for i in range(3):
            p.send(message(f"push{i}".encode()))
    seen: set[bytes] = set()

    class Listener(MessageListener):  # type: ignore[misc]
        def consume(self, msg: Any) -> Any:
            seen.add(msg.body)
            return ConsumeResult.SUCCESS

    pc = PushConsumer(config(acl_endpoint), GROUP, Listener(), {TOPIC: FilterExpression()})
    pc.startup()
    try:
        until(lambda: seen == {b"push0", b"push1", b"push2"}, timeout=20)
    finally:
        pc.shutdown()


@pytest.mark.parametrize(
    ("ak", "sk", "remark"),
    [
        ("", "", "No accessKey is configured"),
        (AK, "wrong-secret", f"Check signature failed for accessKey={AK}"),
        ("nobody12", SK, "No acl config for nobody12"),
    ],
)
def test_client_without_or_with_wrong_keys_is_refused_unauthorized(
    acl_endpoint: GrpcEndpoint, client_log: list[str], ak: str, sk: str, remark: str
) -> None:
    with (
        producing(acl_endpoint, ak, sk) as p,
        pytest.raises(Exception, match=f"failed to fetch topic:{TOPIC} route"),
    ):
        p.send(message(b"refused"))
    assert f"query topic raise exception, {Code.UNAUTHORIZED}, {remark}" in client_log
    assert acl_endpoint.core.store.max_offset_in_queue(TOPIC, 0) == 0


@pytest.mark.parametrize(
    ("meta", "remark"),
    [
        ([], "No accessKey is configured"),
        (signed("", ""), "No accessKey is configured"),
        (signed(AK, "wrong-secret"), f"Check signature failed for accessKey={AK}"),
    ],
)
def test_unsigned_send_is_unauthorized_and_stores_nothing(
    acl_endpoint: GrpcEndpoint, meta: list[tuple[str, str]], remark: str
) -> None:
    req = svc.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=TOPIC), body=b"x")])
    req.messages[0].system_properties.message_id = "01"
    r = stub(acl_endpoint).SendMessage(req, metadata=meta, timeout=5)
    assert (r.status.code, r.status.message) == (Code.UNAUTHORIZED, remark)
    assert acl_endpoint.core.store.max_offset_in_queue(TOPIC, 0) == 0


def test_unparsable_request_is_still_authenticated(acl_endpoint: GrpcEndpoint) -> None:
    import grpc

    call = grpc.insecure_channel(acl_endpoint.address).unary_unary(
        "/apache.rocketmq.v2.MessagingService/SendMessage",
        request_serializer=lambda b: b,
        response_deserializer=svc.SendMessageResponse.FromString,
    )
    junk = b"\xff\xff\xff"
    unsigned = call(junk, timeout=5)
    assert (unsigned.status.code, unsigned.status.message) == (
        Code.UNAUTHORIZED, "No accessKey is configured")  # fmt: skip
    assert call(junk, metadata=signed(), timeout=5).status.code == Code.BAD_REQUEST


def test_send_without_pub_is_forbidden(acl_endpoint: GrpcEndpoint) -> None:
    from rocketmq.v5.exception import ForbiddenException

    with producing(acl_endpoint) as p, pytest.raises(ForbiddenException) as e:
        p.send(message(b"x", topic="SubOnly"))  # SUB lets it see the route, not send
    assert e.value.code == Code.FORBIDDEN
    assert str(e.value).endswith("No default permission for topic:SubOnly")
    assert all(acl_endpoint.core.store.max_offset_in_queue("SubOnly", q) == 0 for q in range(4))


def test_denied_topic_is_forbidden_even_for_its_route(
    acl_endpoint: GrpcEndpoint, client_log: list[str]
) -> None:
    with (
        producing(acl_endpoint) as p,
        pytest.raises(Exception, match="failed to fetch topic:Secret route"),
    ):
        p.send(message(b"x", topic="Secret"))
    assert (
        f"query topic raise exception, {Code.FORBIDDEN}, No default permission for topic:Secret"
        in client_log
    )


def test_denied_group_cannot_receive(acl_endpoint: GrpcEndpoint) -> None:
    from rocketmq import FilterExpression, SimpleConsumer
    from rocketmq.v5.exception import ForbiddenException

    with producing(acl_endpoint) as p:
        p.send(message(b"for-others"))
    c = SimpleConsumer(config(acl_endpoint), "banned", {TOPIC: FilterExpression()},
                       await_duration=1)  # fmt: skip
    c.startup()
    try:
        with pytest.raises(ForbiddenException, match="No default permission for group:banned"):
            c.receive(32, 10)
    finally:
        c.shutdown()


def test_refused_receive_streams_one_status_and_pops_nothing(acl_endpoint: GrpcEndpoint) -> None:
    with producing(acl_endpoint) as p:
        p.send(message(b"kept"))
    req = svc.ReceiveMessageRequest(group=pb.Resource(name=GROUP), batch_size=8, auto_renew=True)
    req.message_queue.topic.name = TOPIC
    got = list(stub(acl_endpoint).ReceiveMessage(req, metadata=signed(AK, "bad-secret"), timeout=5))
    assert [(r.status.code, r.status.message) for r in got] == [
        (Code.UNAUTHORIZED, f"Check signature failed for accessKey={AK}")
    ]
    again = list(stub(acl_endpoint).ReceiveMessage(req, metadata=signed(), timeout=5))
    assert [m.message.body for m in again if m.HasField("message")] == [b"kept"]


def test_refused_telemetry_settings_end_the_stream_with_the_status(
    acl_endpoint: GrpcEndpoint,
) -> None:
    cmd = svc.TelemetryCommand()
    cmd.settings.subscription.group.name = "banned"
    cmd.settings.subscription.subscriptions.add().topic.name = TOPIC
    answers = list(stub(acl_endpoint).Telemetry(iter([cmd, cmd]), metadata=signed(), timeout=5))
    assert [(a.status.code, a.status.message) for a in answers] == [
        (Code.FORBIDDEN, "No default permission for group:banned")
    ]


def test_allowed_telemetry_settings_are_answered(acl_endpoint: GrpcEndpoint) -> None:
    cmd = svc.TelemetryCommand()
    cmd.settings.publishing.topics.add().name = TOPIC
    (answer,) = list(stub(acl_endpoint).Telemetry(iter([cmd]), metadata=signed(), timeout=5))
    assert answer.status.code == Code.OK
    assert answer.settings.publishing.max_body_size > 0


def test_endpoint_without_acl_serves_unsigned_clients(endpoint: GrpcEndpoint) -> None:
    req = svc.QueryRouteRequest(topic=pb.Resource(name=TOPIC))
    assert stub(endpoint).QueryRoute(req, timeout=5).status.code == Code.OK


@pytest.mark.integration
def test_cli_broker_with_acl_guards_its_grpc_port(tmp_path: Path) -> None:
    import signal

    from tests.helpers import SMALL_STORE_FLAGS as SMALL

    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(yaml.safe_dump(ACL_DOC))
    p = subprocess.Popen(
        [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(tmp_path / "s"),
         "--port", "0", *SMALL, "--grpc-port", "0", "--acl", str(acl_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert p.stdout is not None
    try:
        address = next(ln.rsplit(" ", 1)[1].strip() for ln in p.stdout if "grpc on" in ln)
        import grpc
        from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

        req = svc.QueryRouteRequest(topic=pb.Resource(name=TOPIC))
        with grpc.insecure_channel(address) as ch:
            s = MessagingServiceStub(ch)
            refused = s.QueryRoute(req, timeout=5)
            allowed = s.QueryRoute(req, metadata=signed(), timeout=5)
        assert (refused.status.code, refused.status.message) == (
            Code.UNAUTHORIZED, "No accessKey is configured")  # fmt: skip
        assert allowed.status.code == Code.OK
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    assert p.returncode == 0


def test_a_retry_topics_copies_are_not_received_through_grpc(
    acl_endpoint: GrpcEndpoint, core: BrokerCore
) -> None:
    """A group's retry topic holds copies of every topic the group consumes, ``Secret``
    included; gRPC has no per-copy check, so a receive naming a retry or dead-letter
    topic is FORBIDDEN (remoting reads them with each copy's origin checked)."""
    from mqstore import Message

    core.create_topic(TopicConfig("%RETRY%other", 1, 1))
    copy = Message("%RETRY%other", b"copy of Secret", properties={"RETRY_TOPIC": "Secret"})
    assert core.store.put_message(copy).status.ok
    assert core.store.wait_dispatched(60)
    req = svc.ReceiveMessageRequest(group=pb.Resource(name="other"), batch_size=8)
    req.message_queue.topic.name = "%RETRY%other"
    req.invisible_duration.seconds = 30
    got = list(stub(acl_endpoint).ReceiveMessage(req, metadata=signed(), timeout=10))
    assert [m.message.body for m in got if m.HasField("message")] == []
    assert [r.status.code for r in got if r.HasField("status")][:1] == [Code.FORBIDDEN]
