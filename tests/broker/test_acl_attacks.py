"""Every request code the broker serves, sent over TCP to a broker with ACL by an account
without rights on the victim's topic and group: no data is read, written or acked.

The victim's topic ``SecretT`` holds three records whose bodies start ``SECRET-``; the
victim group has popped all three (in flight, 60 s). ``mallory`` may use only its own
topic (and any group's name but the victim's) and is DENY on ``SecretT``; it knows the victim's receipt handles (they
are not secret: the revive topic's checkpoints carry their fields) and the physical
offset of a secret record. After each attack: no response body holds a secret, SecretT
and mallory's retry topics hold nothing new, the topic and the group still exist, and
the victim can still ack all three handles (nothing was acked or re-hidden). A served
code without a case here fails :func:`test_every_served_code_has_an_attack_case`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from mqstore import Message
from mqstore.broker.acl import AccessControl
from mqstore.broker.core import BrokerCore
from mqstore.broker.processors import NAME_SERVER_PROCESSORS, PROCESSORS
from mqstore.broker.server import BrokerServer
from mqstore.client.acl_hook import AclSigner
from mqstore.client.pop_remote import RemotePop
from mqstore.client.remoting_client import RemotingClient
from mqstore.pop.receipt import ReceiptHandle
from mqstore.remoting.batch import encode_batch
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs

SERVED = sorted({*PROCESSORS, *NAME_SERVER_PROCESSORS, Rq.PULL_MESSAGE})
ACL = {
    "accounts": [
        {"accessKey": "admin-key", "secretKey": "admin-secret", "admin": True},
        {"accessKey": "victim-key", "secretKey": "victim-secret",
         "topicPerms": ["SecretT=PUB|SUB"], "groupPerms": ["victim=SUB"]},
        {"accessKey": "mallory-key", "secretKey": "mallory-secret",
         "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB",
         "topicPerms": ["MalloryT=PUB|SUB", "SecretT=DENY"],
         "groupPerms": ["mallory=SUB", "victim=DENY"]},
    ]
}  # fmt: skip
MALLORY = AclSigner("mallory-key", "mallory-secret")
VICTIM = AclSigner("victim-key", "victim-secret")
SECRET = b"SECRET-"


@dataclass(frozen=True)
class Scene:
    core: BrokerCore
    address: str
    handles: tuple[str, ...]
    """The victim's receipt handles of the three secret records (in flight)."""
    offset: int
    """The physical offset of the first secret record."""
    broker_name: str


def _now() -> str:
    return str(int(time.time() * 1000))


@pytest.fixture
def scene(core: BrokerCore) -> Iterator[Scene]:
    core.topics.learn("SecretT", 1)
    core.topics.learn("MalloryT", 1)
    for i in range(3):
        m = Message("SecretT", SECRET + b"%d" % i, keys=["k1"], queue_id=0)
        assert core.store.put_message(m).status.ok
    assert core.store.wait_dispatched(60)
    offset = core.store.get_message("x", "SecretT", 0, 0, 1).messages[0].physical_offset
    srv = BrokerServer(core, host="127.0.0.1", port=0, acl=AccessControl.from_dict(ACL))
    srv.start()
    try:
        with RemotingClient(rpc_hook=VICTIM) as client:
            got = RemotePop(client, srv.address).pop(
                "victim", "SecretT", 3, 60_000, subscription="*", fifo=False, wait_ms=0
            )
        assert [m.body for m in got] == [SECRET + b"%d" % i for i in range(3)]
        yield Scene(core, srv.address, tuple(m.receipt_handle for m in got), offset,
                    core.config.broker_name)  # fmt: skip
    finally:
        srv.stop()


def _cmd(code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code, ext_fields=ext or {}, body=body)


def _handle_ext(s: Scene, group: str, topic: str, i: int = 0) -> dict[str, str]:
    h = ReceiptHandle.parse(s.handles[i])
    return {"consumerGroup": group, "topic": topic, "queueId": str(h.queue_id),
            "extraInfo": s.handles[i], "offset": str(h.queue_offset)}  # fmt: skip


def _send_v1(s: Scene) -> RemotingCommand:
    return _cmd(Rq.SEND_MESSAGE, {"producerGroup": "pg", "topic": "SecretT",
                                  "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
                                  "queueId": "0", "sysFlag": "0", "bornTimestamp": _now(),
                                  "flag": "0", "properties": ""}, b"x")  # fmt: skip


def _v2_ext(batch: bool) -> dict[str, str]:
    return {"a": "pg", "b": "SecretT", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": _now(),
            "h": "0", "i": "", "j": "0", "k": "false", "m": "true" if batch else "false"}  # fmt: skip


def _end_transaction(s: Scene) -> RemotingCommand:
    """COMMIT of a half message the victim's producer left open in SecretT."""
    half = Message("SecretT", SECRET + b"half", properties={"TRAN_MSG": "true", "PGROUP": "pg"})
    (put,) = s.core.sender.send("SecretT", 0, [half]).results
    ext = {"producerGroup": "pg", "tranStateTableOffset": str(put.queue_offset),
           "commitLogOffset": str(put.physical_offset), "commitOrRollback": "8",
           "fromTransactionCheck": "false"}  # fmt: skip
    return _cmd(Rq.END_TRANSACTION, ext)


def _heartbeat(s: Scene) -> RemotingCommand:
    body = {"clientID": "m", "producerDataSet": [], "consumerDataSet": [{
        "groupName": "victim", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [{"topic": "SecretT", "subString": "*", "tagsSet": [],
                                 "codeSet": [], "subVersion": 1}]}]}  # fmt: skip
    return _cmd(Rq.HEART_BEAT, body=json.dumps(body).encode())


def _lock(code: int) -> Callable[[Scene], RemotingCommand]:
    def build(s: Scene) -> RemotingCommand:
        mq = {"topic": "SecretT", "brokerName": s.broker_name, "queueId": 0}
        body = {"consumerGroup": "victim", "clientId": "m", "mqSet": [mq]}
        return _cmd(code, body=json.dumps(body).encode())

    return build


def _copy_in(topic: str) -> Callable[[Scene], int]:
    """Put a redelivery copy of a secret record into ``topic`` (as the POP reviver or a
    send-back writes it: ``RETRY_TOPIC`` names SecretT); its physical offset."""

    def put(s: Scene) -> int:
        s.core.topics.learn(topic, 1)
        copy = Message(topic, SECRET + b"copy", keys=["k1"], queue_id=0,
                       properties={"RETRY_TOPIC": "SecretT"})  # fmt: skip
        result = s.core.store.put_message(copy)
        assert result.status.ok and s.core.store.wait_dispatched(60)
        return result.physical_offset

    return put


def _query_copy(topic: str) -> Callable[[Scene], RemotingCommand]:
    """QUERY_MESSAGE by key on ``topic``, which holds a copy of a secret record."""

    def build(s: Scene) -> RemotingCommand:
        _copy_in(topic)(s)
        return _cmd(Rq.QUERY_MESSAGE, {"topic": topic, "key": "k1", "maxNum": "32",
                                       "beginTimestamp": "0", "endTimestamp": str(2**62)})  # fmt: skip

    return build


def _view_copy(topic: str) -> Callable[[Scene], RemotingCommand]:
    """VIEW_MESSAGE_BY_ID of a copy of a secret record in ``topic``."""
    return lambda s: _cmd(Rq.VIEW_MESSAGE_BY_ID, {"offset": str(_copy_in(topic)(s))})


def _batch_ack(group: str, topic: str) -> Callable[[Scene], RemotingCommand]:
    def build(s: Scene) -> RemotingCommand:
        body = {"consumerGroup": group, "topic": topic, "extraInfoList": list(s.handles)}
        return _cmd(Rq.BATCH_ACK_MESSAGE, body=json.dumps(body).encode())

    return build


def _pull_copies(topic: str, group: str) -> Callable[[Scene], RemotingCommand]:
    """PULL_MESSAGE of ``topic`` (a retry or dead-letter topic of ``group``, which
    mallory may use) holding a copy of a secret record that another member's
    consumption put there."""

    def build(s: Scene) -> RemotingCommand:
        _copy_in(topic)(s)
        return _cmd(Rq.PULL_MESSAGE, {
            "consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0",
            "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0",
            "suspendTimeoutMillis": "0", "subscription": "*"})  # fmt: skip

    return build


def _pop_copies(topic: str, group: str) -> Callable[[Scene], RemotingCommand]:
    """POP_MESSAGE of ``topic`` as :func:`_pull_copies` pulls it."""

    def build(s: Scene) -> RemotingCommand:
        _copy_in(topic)(s)
        return _cmd(Rq.POP_MESSAGE, {
            "consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": "32",
            "invisibleTime": "60000", "pollTime": "0", "bornTime": _now(), "initMode": "0"})  # fmt: skip

    return build


REFUSED, ANY = "refused", "any answer without a secret"
_SUB = {"consumerGroup": "victim", "topic": "SecretT", "queueId": "0"}
_RESET = {"topic": "SecretT", "group": "victim", "timestamp": "0", "isForce": "true"}
_SG = {"groupName": "victim", "consumeEnable": False}

CASES: list[tuple[int, str, Callable[[Scene], RemotingCommand], str]] = [
    (Rq.SEND_MESSAGE, "send", _send_v1, REFUSED),
    (Rq.END_TRANSACTION, "commit a half message", _end_transaction, REFUSED),
    (Rq.CHECK_CLIENT_CONFIG, "check the victim's subscription", lambda s: _cmd(
        Rq.CHECK_CLIENT_CONFIG, body=json.dumps({"clientId": "m", "group": "victim",
        "subscriptionData": {"topic": "SecretT", "subString": "a > 1",
                             "expressionType": "SQL92"}}).encode()), REFUSED),
    (Rq.SEND_MESSAGE_V2, "send", lambda s: _cmd(Rq.SEND_MESSAGE_V2, _v2_ext(False), b"x"), REFUSED),
    (Rq.SEND_BATCH_MESSAGE, "send", lambda s: _cmd(Rq.SEND_BATCH_MESSAGE, _v2_ext(True),
                                                   encode_batch([(0, b"x", "")])), REFUSED),
    (Rq.PULL_MESSAGE, "own group", lambda s: _cmd(Rq.PULL_MESSAGE, {
        "consumerGroup": "mallory", "topic": "SecretT", "queueId": "0", "queueOffset": "0",
        "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*"}), REFUSED),
    (Rq.PULL_MESSAGE, "victim's POP retry topic", lambda s: _cmd(Rq.PULL_MESSAGE, {
        "consumerGroup": "mallory", "topic": "%RETRY%victim_SecretT", "queueId": "0",
        "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0",
        "suspendTimeoutMillis": "0", "subscription": "*"}), REFUSED),
    (Rq.POP_MESSAGE, "victim's POP retry topic", lambda s: _cmd(Rq.POP_MESSAGE, {
        "consumerGroup": "mallory", "topic": "%RETRY%victim_SecretT", "queueId": "-1",
        "maxMsgNums": "32", "invisibleTime": "60000", "pollTime": "0", "bornTime": _now(),
        "initMode": "0"}), REFUSED),
    (Rq.QUERY_MESSAGE, "by key", lambda s: _cmd(Rq.QUERY_MESSAGE, {
        "topic": "SecretT", "key": "k1", "maxNum": "32", "beginTimestamp": "0",
        "endTimestamp": str(2**62)}), REFUSED),
    (Rq.QUERY_MESSAGE, "victim's POP retry topic", _query_copy("%RETRY%victim_SecretT"), REFUSED),
    (Rq.QUERY_MESSAGE, "victim's retry topic", _query_copy("%RETRY%victim"), REFUSED),
    (Rq.QUERY_MESSAGE, "victim's dead letters", _query_copy("%DLQ%victim"), REFUSED),
    (Rq.QUERY_MESSAGE, "another group's copy of SecretT", _query_copy("%RETRY%other"), REFUSED),
    (Rq.VIEW_MESSAGE_BY_ID, "victim's POP retry record", _view_copy("%RETRY%victim_SecretT"),
     REFUSED),
    (Rq.VIEW_MESSAGE_BY_ID, "victim's dead letter", _view_copy("%DLQ%victim"), REFUSED),
    (Rq.CONSUMER_SEND_MSG_BACK, "copy a POP retry record", lambda s: _cmd(
        Rq.CONSUMER_SEND_MSG_BACK, {"group": "mallory", "delayLevel": "-1",
        "offset": str(_copy_in("%RETRY%victim_SecretT")(s))}), REFUSED),
    (Rq.QUERY_CONSUMER_OFFSET, "victim", lambda s: _cmd(Rq.QUERY_CONSUMER_OFFSET, _SUB), REFUSED),
    (Rq.UPDATE_CONSUMER_OFFSET, "victim", lambda s: _cmd(Rq.UPDATE_CONSUMER_OFFSET,
                                                         {**_SUB, "commitOffset": "3"}), REFUSED),
    (Rq.UPDATE_AND_CREATE_TOPIC, "overwrite", lambda s: _cmd(Rq.UPDATE_AND_CREATE_TOPIC, {
        "topic": "SecretT", "readQueueNums": "1", "writeQueueNums": "1", "perm": "0"}), REFUSED),
    (Rq.GET_BROKER_CONFIG, "metadata", lambda s: _cmd(Rq.GET_BROKER_CONFIG), ANY),
    (Rq.GET_BROKER_RUNTIME_INFO, "metadata", lambda s: _cmd(Rq.GET_BROKER_RUNTIME_INFO), ANY),
    (Rq.SEARCH_OFFSET_BY_TIMESTAMP, "metadata", lambda s: _cmd(Rq.SEARCH_OFFSET_BY_TIMESTAMP, {
        "topic": "SecretT", "queueId": "0", "timestamp": "0"}), REFUSED),
    (Rq.GET_MAX_OFFSET, "metadata", lambda s: _cmd(Rq.GET_MAX_OFFSET, _SUB), REFUSED),
    (Rq.GET_MIN_OFFSET, "metadata", lambda s: _cmd(Rq.GET_MIN_OFFSET, _SUB), REFUSED),
    (Rq.GET_EARLIEST_MSG_STORETIME, "metadata", lambda s: _cmd(Rq.GET_EARLIEST_MSG_STORETIME,
                                                               _SUB), REFUSED),
    (Rq.VIEW_MESSAGE_BY_ID, "by offset", lambda s: _cmd(Rq.VIEW_MESSAGE_BY_ID,
                                                        {"offset": str(s.offset)}), REFUSED),
    (Rq.HEART_BEAT, "join victim", _heartbeat, REFUSED),
    (Rq.UNREGISTER_CLIENT, "victim", lambda s: _cmd(Rq.UNREGISTER_CLIENT, {
        "clientID": "m", "consumerGroup": "victim"}), REFUSED),
    (Rq.CONSUMER_SEND_MSG_BACK, "copy into own retry", lambda s: _cmd(Rq.CONSUMER_SEND_MSG_BACK, {
        "group": "mallory", "offset": str(s.offset), "delayLevel": "-1",
        "originTopic": "SecretT"}), REFUSED),
    (Rq.GET_CONSUMER_LIST_BY_GROUP, "victim", lambda s: _cmd(Rq.GET_CONSUMER_LIST_BY_GROUP,
                                                             {"consumerGroup": "victim"}), REFUSED),
    (Rq.NOTIFY_CONSUMER_IDS_CHANGED, "victim", lambda s: _cmd(Rq.NOTIFY_CONSUMER_IDS_CHANGED,
                                                              {"consumerGroup": "victim"}), REFUSED),
    (Rq.LOCK_BATCH_MQ, "victim", _lock(Rq.LOCK_BATCH_MQ), REFUSED),
    (Rq.UNLOCK_BATCH_MQ, "victim", _lock(Rq.UNLOCK_BATCH_MQ), REFUSED),
    (Rq.GET_KV_CONFIG, "metadata", lambda s: _cmd(Rq.GET_KV_CONFIG, {
        "namespace": "ORDER_TOPIC_CONFIG", "key": "SecretT"}), ANY),
    (Rq.GET_ROUTEINFO_BY_TOPIC, "metadata", lambda s: _cmd(Rq.GET_ROUTEINFO_BY_TOPIC,
                                                           {"topic": "SecretT"}), ANY),
    (Rq.GET_BROKER_CLUSTER_INFO, "metadata", lambda s: _cmd(Rq.GET_BROKER_CLUSTER_INFO), ANY),
    (Rq.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, "metadata",
     lambda s: _cmd(Rq.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), ANY),
    (Rq.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, "disable victim", lambda s: _cmd(
        Rq.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(_SG).encode()), REFUSED),
    (Rq.GET_TOPIC_STATS_INFO, "metadata", lambda s: _cmd(Rq.GET_TOPIC_STATS_INFO,
                                                         {"topic": "SecretT"}), REFUSED),
    (Rq.GET_CONSUMER_CONNECTION_LIST, "metadata", lambda s: _cmd(
        Rq.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "victim"}), REFUSED),
    (Rq.GET_PRODUCER_CONNECTION_LIST, "metadata", lambda s: _cmd(
        Rq.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg"}), ANY),
    (Rq.GET_CONSUME_STATS, "metadata", lambda s: _cmd(Rq.GET_CONSUME_STATS, {
        "consumerGroup": "victim", "topic": "SecretT"}), REFUSED),
    (Rq.DELETE_TOPIC_IN_BROKER, "delete", lambda s: _cmd(Rq.DELETE_TOPIC_IN_BROKER,
                                                         {"topic": "SecretT"}), REFUSED),
    (Rq.INVOKE_BROKER_TO_RESET_OFFSET, "rewind victim", lambda s: _cmd(
        Rq.INVOKE_BROKER_TO_RESET_OFFSET, _RESET), REFUSED),
    (Rq.GET_ALL_TOPIC_CONFIG, "dump", lambda s: _cmd(Rq.GET_ALL_TOPIC_CONFIG), REFUSED),
    (Rq.UPDATE_BROKER_CONFIG, "close the broker", lambda s: _cmd(
        Rq.UPDATE_BROKER_CONFIG, body=b"brokerPermission=0\n"), REFUSED),
    (Rq.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "dump", lambda s: _cmd(
        Rq.GET_ALL_SUBSCRIPTIONGROUP_CONFIG), REFUSED),
    (Rq.DELETE_SUBSCRIPTIONGROUP, "victim", lambda s: _cmd(Rq.DELETE_SUBSCRIPTIONGROUP, {
        "groupName": "victim", "cleanOffset": "true"}), REFUSED),
    (Rq.QUERY_TOPIC_CONSUME_BY_WHO, "metadata", lambda s: _cmd(Rq.QUERY_TOPIC_CONSUME_BY_WHO,
                                                               {"topic": "SecretT"}), REFUSED),
    (305, "metadata", lambda s: _cmd(305), ANY),  # GET_SYSTEM_TOPIC_LIST_FROM_BROKER
    (Rq.GET_ALL_PRODUCER_INFO, "metadata", lambda s: _cmd(Rq.GET_ALL_PRODUCER_INFO), ANY),
    (Rq.CLEAN_EXPIRED_CONSUMEQUEUE, "drop queues", lambda s: _cmd(
        Rq.CLEAN_EXPIRED_CONSUMEQUEUE), REFUSED),
    (Rq.CLEAN_UNUSED_TOPIC, "drop queues", lambda s: _cmd(Rq.CLEAN_UNUSED_TOPIC), REFUSED),
    (Rq.DELETE_EXPIRED_COMMITLOG, "delete files", lambda s: _cmd(
        Rq.DELETE_EXPIRED_COMMITLOG), REFUSED),
    (Rq.GET_CONSUMER_RUNNING_INFO, "metadata", lambda s: _cmd(Rq.GET_CONSUMER_RUNNING_INFO, {
        "consumerGroup": "victim", "clientId": "m", "jstackEnable": "false"}), REFUSED),
    (Rq.VIEW_BROKER_STATS_DATA, "metadata", lambda s: _cmd(Rq.VIEW_BROKER_STATS_DATA, {
        "statsName": "TOPIC_PUT_NUMS", "statsKey": "SecretT"}), REFUSED),
    (Rq.GET_BROKER_CONSUME_STATS, "metadata", lambda s: _cmd(Rq.GET_BROKER_CONSUME_STATS, {
        "isOrder": "false", "timeoutMillis": "3000"}), REFUSED),
    (Rq.QUERY_CONSUME_QUEUE, "units, not records", lambda s: _cmd(Rq.QUERY_CONSUME_QUEUE, {
        "topic": "SecretT", "queueId": "0", "index": "0", "count": "3",
        "consumerGroup": "victim"}), REFUSED),
    (Rq.QUERY_ASSIGNMENT, "victim", lambda s: _cmd(Rq.QUERY_ASSIGNMENT, body=json.dumps({
        "topic": "SecretT", "consumerGroup": "victim", "clientId": "m"}).encode()), REFUSED),
    (Rq.SET_MESSAGE_REQUEST_MODE, "victim", lambda s: _cmd(Rq.SET_MESSAGE_REQUEST_MODE,
        body=json.dumps({"topic": "SecretT", "consumerGroup": "victim", "mode": "POP",
                         "popShareQueueNum": 0}).encode()), REFUSED),
    (Rq.POP_MESSAGE, "as victim", lambda s: _cmd(Rq.POP_MESSAGE, {
        **_SUB, "queueId": "-1", "maxMsgNums": "32", "invisibleTime": "60000", "pollTime": "0",
        "bornTime": _now(), "initMode": "0"}), REFUSED),
    (Rq.PULL_MESSAGE, "a group's retry copy of SecretT", _pull_copies("%RETRY%other", "other"),
     ANY),
    (Rq.PULL_MESSAGE, "a group's dead-letter copy of SecretT", _pull_copies("%DLQ%other", "other"),
     ANY),
    (Rq.POP_MESSAGE, "a group's retry copy of SecretT", _pop_copies("%RETRY%other", "other"),
     ANY),
    (Rq.POP_MESSAGE, "own group", lambda s: _cmd(Rq.POP_MESSAGE, {
        **_SUB, "consumerGroup": "mallory", "queueId": "-1", "maxMsgNums": "32",
        "invisibleTime": "60000", "pollTime": "0", "bornTime": _now(), "initMode": "0"}), REFUSED),
    (Rq.ACK_MESSAGE, "victim handle", lambda s: _cmd(
        Rq.ACK_MESSAGE, _handle_ext(s, "victim", "SecretT")), REFUSED),
    (Rq.ACK_MESSAGE, "victim handle, own names", lambda s: _cmd(
        Rq.ACK_MESSAGE, _handle_ext(s, "mallory", "MalloryT")), ANY),
    (Rq.PEEK_MESSAGE, "own group", lambda s: _cmd(Rq.PEEK_MESSAGE, {
        **_SUB, "consumerGroup": "mallory", "maxMsgNums": "32"}), REFUSED),
    (Rq.CHANGE_MESSAGE_INVISIBLETIME, "hide 12 h", lambda s: _cmd(
        Rq.CHANGE_MESSAGE_INVISIBLETIME,
        {**_handle_ext(s, "victim", "SecretT"), "invisibleTime": str(12 * 3600_000)}), REFUSED),
    (Rq.CHANGE_MESSAGE_INVISIBLETIME, "own names", lambda s: _cmd(
        Rq.CHANGE_MESSAGE_INVISIBLETIME,
        {**_handle_ext(s, "mallory", "MalloryT"), "invisibleTime": "60000"}), ANY),
    (Rq.NOTIFICATION, "victim", lambda s: _cmd(Rq.NOTIFICATION, {**_SUB, "pollTime": "0"}),
     REFUSED),
    (Rq.BATCH_ACK_MESSAGE, "victim handles", _batch_ack("victim", "SecretT"), REFUSED),
    (Rq.BATCH_ACK_MESSAGE, "victim handles, own names", _batch_ack("mallory", "MalloryT"), ANY),
]  # fmt: skip


def test_every_served_code_has_an_attack_case() -> None:
    assert set(SERVED) <= {code for code, *_ in CASES}


def _nothing_leaked_or_changed(s: Scene) -> None:
    store = s.core.store
    assert store.max_offset_in_queue("SecretT", 0) == 3, "SecretT written"
    for topic in ("%RETRY%mallory", "%RETRY%mallory_SecretT", "%RETRY%mallory_MalloryT"):
        assert store.max_offset_in_queue(topic, 0) == 0, f"{topic} written"
    assert s.core.topics.get("SecretT") is not None, "SecretT deleted"
    with RemotingClient(rpc_hook=VICTIM) as client:
        pop = RemotePop(client, s.address)
        acked = [pop.ack("victim", "SecretT", h) for h in s.handles]
    assert acked == [True, True, True], "a victim's message was acked or re-hidden"


@pytest.mark.parametrize(
    ("code", "build", "expect"),
    [pytest.param(code, build, expect, id=f"{code}-{name}") for code, name, build, expect in CASES],
)
def test_an_account_without_rights_reads_writes_and_acks_nothing(
    scene: Scene, code: int, build: Callable[[Scene], RemotingCommand], expect: str
) -> None:
    with RemotingClient(rpc_hook=MALLORY) as client:
        resp = client.invoke(scene.address, build(scene), 5)
    assert SECRET not in resp.body
    if expect == REFUSED:
        assert resp.code == Rs.NO_PERMISSION, (resp.code, resp.remark)
    _nothing_leaked_or_changed(scene)


def test_a_retry_copy_of_a_topic_the_account_may_read_is_still_pulled(scene: Scene) -> None:
    """Only copies of a denied topic are left out of a retry topic's pull."""
    scene.core.topics.learn("%RETRY%other", 1)
    for origin in ("SecretT", "MalloryT"):
        copy = Message("%RETRY%other", b"copy of " + origin.encode(), queue_id=0,
                       properties={"RETRY_TOPIC": origin})  # fmt: skip
        assert scene.core.store.put_message(copy).status.ok
    assert scene.core.store.wait_dispatched(60)
    with RemotingClient(rpc_hook=MALLORY) as client:
        resp = client.invoke(scene.address, _cmd(Rq.PULL_MESSAGE, {
            "consumerGroup": "other", "topic": "%RETRY%other", "queueId": "0",
            "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0",
            "suspendTimeoutMillis": "0", "subscription": "*"}), 5)  # fmt: skip
    assert resp.code == Rs.SUCCESS, (resp.code, resp.remark)
    assert b"copy of MalloryT" in resp.body
    assert b"copy of SecretT" not in resp.body
