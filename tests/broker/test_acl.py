"""Plain ACL on a real broker over TCP: signed requests from the Python remoting client
(``AclSigner``), refusals with NO_PERMISSION (16) and RocketMQ's remark."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from mqstore.broker.acl import AccessControl
from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.client.acl_hook import AclSigner
from mqstore.client.remoting_client import RemotingClient
from mqstore.client.transport import PullQuery
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from tests.helpers import until

ACL = {
    "globalWhiteRemoteAddresses": ["10.10.*.*"],
    "accounts": [
        {"accessKey": "admin-key", "secretKey": "admin-secret", "admin": True},
        {
            "accessKey": "app-key",
            "secretKey": "app-secret",
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["orders=PUB|SUB", "audit=PUB", "secret=DENY"],
            "groupPerms": ["banned=DENY"],
        },
        {
            "accessKey": "trusted-key",
            "secretKey": "never-checked",
            "whiteRemoteAddress": "127.0.0.*",
        },
    ],
}


def _server(core: BrokerCore, acl_doc: dict[str, object]) -> BrokerServer:
    srv = BrokerServer(core, host="127.0.0.1", port=0, acl=AccessControl.from_dict(acl_doc))
    srv.start()
    return srv


@pytest.fixture
def acl_address(core: BrokerCore) -> Iterator[str]:
    srv = _server(core, ACL)
    admin = RemotingClient(rpc_hook=AclSigner("admin-key", "admin-secret"))
    try:
        for topic in ("orders", "audit", "secret"):
            ext = {"topic": topic, "readQueueNums": "1", "writeQueueNums": "1"}
            resp = admin.invoke(srv.address, RemotingCommand(Rq.UPDATE_AND_CREATE_TOPIC,
                                                             ext_fields=ext), 5)  # fmt: skip
            assert resp.code == Rs.SUCCESS, resp.remark
        yield srv.address
    finally:
        admin.close()
        srv.stop()


def _send(topic: str) -> RemotingCommand:
    ext = {"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102",
           "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
           "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
           "properties": ""}  # fmt: skip
    return RemotingCommand(Rq.SEND_MESSAGE, ext_fields=ext, body=b"hello")


def _pull(topic: str, group: str) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0",
           "maxMsgNums": "8", "sysFlag": "0", "commitOffset": "0",
           "suspendTimeoutMillis": "0", "subscription": "*"}  # fmt: skip
    return RemotingCommand(Rq.PULL_MESSAGE, ext_fields=ext)


def _call(address: str, cmd: RemotingCommand, signer: AclSigner | None) -> RemotingCommand:
    client = RemotingClient(rpc_hook=signer)
    try:
        return client.invoke(address, cmd, 5)
    finally:
        client.close()


APP = AclSigner("app-key", "app-secret")


def test_signed_send_and_pull_with_pub_sub_succeed(acl_address: str) -> None:
    assert _call(acl_address, _send("orders"), APP).code == Rs.SUCCESS

    def pulled() -> bool:  # the ConsumeQueue may lag the put by a moment
        code = _call(acl_address, _pull("orders", "g1"), APP).code
        assert code != Rs.NO_PERMISSION
        return code == Rs.SUCCESS

    until(pulled, what="a successful signed pull")


def test_unsigned_request_is_refused_with_no_permission(acl_address: str) -> None:
    resp = _call(acl_address, _send("orders"), None)
    assert resp.code == Rs.NO_PERMISSION == 16
    assert resp.remark == "No accessKey is configured"


def test_unknown_access_key_is_refused(acl_address: str) -> None:
    resp = _call(acl_address, _send("orders"), AclSigner("nobody", "whatever-key"))
    assert (resp.code, resp.remark) == (Rs.NO_PERMISSION, "No acl config for nobody")


def test_wrong_secret_is_refused(acl_address: str) -> None:
    resp = _call(acl_address, _send("orders"), AclSigner("app-key", "wrong-secret"))
    assert resp.code == Rs.NO_PERMISSION
    assert resp.remark == "Check signature failed for accessKey=app-key"


def test_tampered_body_breaks_the_signature(acl_address: str) -> None:
    signed = APP.before_request(_send("orders"))
    resp = _call(acl_address, replace(signed, body=b"evil"), None)
    assert resp.remark == "Check signature failed for accessKey=app-key"


def test_pub_without_sub_cannot_pull(acl_address: str) -> None:
    assert _call(acl_address, _send("audit"), APP).code == Rs.SUCCESS
    resp = _call(acl_address, _pull("audit", "g1"), APP)
    assert (resp.code, resp.remark) == (Rs.NO_PERMISSION, "No default permission for topic:audit")


def test_denied_topic_refuses_send(acl_address: str) -> None:
    resp = _call(acl_address, _send("secret"), APP)
    assert (resp.code, resp.remark) == (Rs.NO_PERMISSION, "No default permission for topic:secret")


def test_default_topic_perm_deny_refuses_unlisted_topic(acl_address: str) -> None:
    resp = _call(acl_address, _send("other"), APP)
    assert (resp.code, resp.remark) == (Rs.NO_PERMISSION, "No default permission for topic:other")


def test_denied_group_cannot_pull_or_commit_offsets(acl_address: str) -> None:
    resp = _call(acl_address, _pull("orders", "banned"), APP)
    assert (resp.code, resp.remark) == (Rs.NO_PERMISSION, "No default permission for group:banned")
    ext = {"consumerGroup": "banned", "topic": "orders", "queueId": "0", "commitOffset": "0"}
    upd = RemotingCommand(Rq.UPDATE_CONSUMER_OFFSET, ext_fields=ext)
    assert _call(acl_address, upd, APP).code == Rs.NO_PERMISSION


def test_lock_of_a_denied_group_is_refused(acl_address: str) -> None:
    body = b'{"consumerGroup":"banned","clientId":"x","mqSet":[]}'
    resp = _call(acl_address, RemotingCommand(Rq.LOCK_BATCH_MQ, body=body), APP)
    assert (resp.code, resp.remark) == (Rs.NO_PERMISSION, "No default permission for group:banned")


def test_topic_update_needs_admin(acl_address: str) -> None:
    ext = {"topic": "orders", "readQueueNums": "1", "writeQueueNums": "1", "perm": "0"}
    resp = _call(acl_address, RemotingCommand(Rq.UPDATE_AND_CREATE_TOPIC, ext_fields=ext), APP)
    assert resp.code == Rs.NO_PERMISSION
    assert resp.remark == "Need admin permission for request code=17, but accessKey=app-key is not"
    assert _call(acl_address, _send("orders"), APP).code == Rs.SUCCESS  # perm unchanged


def test_listing_all_topics_needs_admin(acl_address: str) -> None:
    resp = _call(acl_address, RemotingCommand(Rq.GET_ALL_TOPIC_CONFIG), APP)
    assert resp.code == Rs.NO_PERMISSION


def test_account_white_address_skips_the_signature(acl_address: str) -> None:
    cmd = replace(_send("anything"), ext_fields={**_send("anything").ext_fields,
                                                "AccessKey": "trusted-key"})  # fmt: skip
    assert _call(acl_address, cmd, None).code == Rs.SUCCESS


def test_global_white_list_admits_unsigned_peers(core: BrokerCore) -> None:
    srv = _server(core, {**ACL, "globalWhiteRemoteAddresses": ["127.0.0.1"]})
    try:
        ext = {"topic": "free", "readQueueNums": "1", "writeQueueNums": "1"}
        cmd = RemotingCommand(Rq.UPDATE_AND_CREATE_TOPIC, ext_fields=ext)
        assert _call(srv.address, cmd, None).code == Rs.SUCCESS
    finally:
        srv.stop()


def test_peer_outside_every_white_list_still_needs_a_signature(acl_address: str) -> None:
    # 127.0.0.1 is not in 10.10.*.*: the global list does not admit this test's client
    assert _call(acl_address, _send("orders"), None).code == Rs.NO_PERMISSION


def test_python_producer_and_pull_through_a_signing_transport(acl_address: str) -> None:
    from mqstore.client.producer import Producer
    from mqstore.client.remote import RemoteTransport
    from mqstore.message import Message

    transport = RemoteTransport(acl_address, rpc_hook=APP)
    try:
        Producer("pg-python", transport).start().send(Message("orders", b"signed"))
        queues = transport.topic_queues("orders")
        deadline = time.monotonic() + 60
        bodies: list[bytes] = []
        while not bodies and time.monotonic() < deadline:
            bodies = [
                m.body for q in queues for m in transport.pull(PullQuery("g2", q, 0, 8)).messages
            ]
        assert bodies == [b"signed"]
    finally:
        transport.close()


def test_python_transport_without_keys_is_refused(acl_address: str) -> None:
    from mqstore.client.remote import RemoteTransport
    from mqstore.client.transport import BrokerError

    transport = RemoteTransport(acl_address)
    try:
        with pytest.raises(BrokerError, match="No accessKey is configured"):
            transport.route("orders")
    finally:
        transport.close()


def test_send_to_a_retry_topic_needs_sub_on_its_group(acl_address: str) -> None:
    assert _call(acl_address, _send("%RETRY%g1"), APP).code == Rs.SUCCESS  # default SUB
    resp = _call(acl_address, _send("%RETRY%banned"), APP)
    assert (resp.code, resp.remark) == (Rs.NO_PERMISSION, "No default permission for group:banned")


@pytest.mark.parametrize("code", [215, 200, 222, 40])
def test_admin_tool_changes_need_admin(acl_address: str, code: int) -> None:
    ext = {"topic": "orders", "group": "g", "timestamp": "0", "isForce": "true",
           "consumerGroup": "g"}  # fmt: skip
    resp = _call(acl_address, RemotingCommand(code, ext_fields=ext), APP)
    assert resp.code == Rs.NO_PERMISSION
    assert resp.remark.startswith(f"Need admin permission for request code={code},")


def test_a_non_ascii_signature_gets_one_log_line_and_an_answer_on_a_live_connection(
    acl_address: str, caplog: pytest.LogCaptureFixture
) -> None:
    ext = {"topic": "orders", "AccessKey": "app-key", "Signature": "sïgnätüre"}
    bad = RemotingCommand(Rq.GET_MAX_OFFSET, ext_fields={**ext, "queueId": "0"})
    client = RemotingClient()
    try:
        with caplog.at_level("INFO", logger="mqstore.broker.server"):
            resp = client.invoke(acl_address, bad, 5)
        assert (resp.code, resp.remark) == (Rs.NO_PERMISSION,
                                            "Check signature failed for accessKey=app-key")  # fmt: skip
        lines = [r for r in caplog.records if r.name == "mqstore.broker.server"]
        assert len(lines) == 1 and lines[0].exc_info is None
        assert "Check signature failed" in lines[0].getMessage()
        # the same connection still answers
        again = client.invoke(acl_address, replace(bad, ext_fields={"queueId": "0"}), 5)
        assert again.code == Rs.NO_PERMISSION
    finally:
        client.close()
