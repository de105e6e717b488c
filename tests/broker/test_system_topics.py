"""Topics only the broker writes take no client sends, with or without ACL, over every
send code (``mqstore.system_topics`` Rule 1), and what the schedule service reads back
from ``SCHEDULE_TOPIC_XXXX`` must be the broker's (Rule 2)."""

from __future__ import annotations

import time

import pytest

from mqstore.broker.core import BrokerCore
from mqstore.broker.subscriptions import SubscriptionGroupConfig
from mqstore.client.remoting_client import RemotingClient
from mqstore.commitlog import format as fmt
from mqstore.remoting.batch import encode_batch
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from mqstore.schedule import SCHEDULE_TOPIC, time_up

SYSTEM = [SCHEDULE_TOPIC, "SCHEDULE_TOPIC_XXXX_V2", "rmq_sys_REVIVE_LOG_DefaultCluster",
          "rmq_sys_anything", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
          "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
          "%RETRY%g_T"]  # fmt: skip
REAL = "REAL_TOPIC\x01SecretT\x02REAL_QID\x010\x02"


def _now() -> str:
    return str(int(time.time() * 1000))


def _v1(topic: str) -> RemotingCommand:
    ext = {"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102",
           "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
           "bornTimestamp": _now(), "flag": "0", "properties": REAL}  # fmt: skip
    return RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=ext, body=b"x")


def _v2(topic: str) -> RemotingCommand:
    ext = {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": _now(),
           "h": "0", "i": REAL, "j": "0", "k": "false", "m": "false"}  # fmt: skip
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=b"x")


def _batch(topic: str) -> RemotingCommand:
    body = encode_batch([(0, b"x", REAL), (0, b"y", REAL)])
    ext = {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": _now(),
           "h": "0", "i": "", "j": "0", "k": "false", "m": "true"}  # fmt: skip
    return RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, ext_fields=ext, body=body)


@pytest.fixture
def known(core: BrokerCore) -> BrokerCore:
    """Group g and topic T exist, so ``%RETRY%g_T`` is their POP retry topic."""
    core.groups.put(SubscriptionGroupConfig("g"))
    core.topics.learn("T", 4)
    return core


@pytest.mark.parametrize("build", [_v1, _v2, _batch], ids=["v1", "v2", "batch"])
@pytest.mark.parametrize("topic", SYSTEM)
def test_a_client_send_to_a_system_topic_is_refused_as_rocketmq_does(
    known: BrokerCore, address: str, topic: str, build: object
) -> None:
    before = known.store.max_offset_in_queue(topic, 0)
    with RemotingClient() as client:
        resp = client.invoke(address, build(topic), 5)  # type: ignore[operator]
    assert (resp.code, resp.remark) == (
        ResponseCode.NO_PERMISSION,
        f"Sending message to topic[{topic}] is forbidden.",
    )
    assert known.store.max_offset_in_queue(topic, 0) == before


def test_a_consumer_may_still_send_to_its_own_retry_topic(known: BrokerCore, address: str) -> None:
    with RemotingClient() as client:
        resp = client.invoke(address, _v1("%RETRY%g"), 5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def test_grpc_send_to_the_schedule_topic_is_refused(core: BrokerCore) -> None:
    grpc = pytest.importorskip("grpc")
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as svc
    from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

    from mqstore.grpc import GrpcConfig, GrpcEndpoint

    ep = GrpcEndpoint(core, GrpcConfig(port=0))
    ep.start()
    try:
        msg = pb.Message(
            topic=pb.Resource(name=SCHEDULE_TOPIC), body=b"x",  # REAL_TOPIC is reserved there
            system_properties=pb.SystemProperties(message_id="0A0000000000000000000001",
                                                  body_encoding=pb.IDENTITY),
        )  # fmt: skip
        with grpc.insecure_channel(ep.address) as ch:
            resp = MessagingServiceStub(ch).SendMessage(
                svc.SendMessageRequest(messages=[msg]), timeout=10
            )
        assert resp.entries[0].status.code != pb.Code.OK
        assert "is forbidden" in resp.entries[0].status.message
        assert core.store.max_offset_in_queue(SCHEDULE_TOPIC, 0) == 0
    finally:
        ep.stop(grace=0.2)


# ------------------------------------------------------------- read back (Rule 2)


def _schedule_record(props: str, queue_id: int = 0) -> fmt.MessageRecord:
    return fmt.make_record(topic=SCHEDULE_TOPIC, body=b"b", queue_id=queue_id,
                           properties_string=props)  # fmt: skip


def test_a_schedule_record_without_its_delay_level_is_not_delivered() -> None:
    assert time_up(_schedule_record(REAL)) is None  # a client send an older broker took


def test_a_schedule_record_whose_delay_does_not_match_its_queue_is_not_delivered() -> None:
    assert time_up(_schedule_record("DELAY\x015\x02" + REAL, queue_id=0)) is None


def test_a_schedule_record_naming_a_system_topic_is_not_delivered() -> None:
    props = "DELAY\x011\x02REAL_TOPIC\x01rmq_sys_REVIVE_LOG_c\x02REAL_QID\x010\x02"
    assert time_up(_schedule_record(props)) is None


def test_a_schedule_record_the_broker_wrote_is_delivered() -> None:
    m = time_up(_schedule_record("DELAY\x011\x02" + REAL))
    assert m is not None and m.topic == "SecretT"
