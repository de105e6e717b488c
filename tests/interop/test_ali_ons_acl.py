"""ali-ons 3.12.0 with accessKey/secretKey against a broker running RocketMQ's plain ACL.

ali-ons signs every request (name server ones too) when given both keys: HMAC-SHA1 over
its sorted header values (plus its ``OnsChannel`` field) and the body. Our broker must
accept those signatures for a produce and a consume, and refuse the client without keys
or with a wrong secret with NO_PERMISSION and RocketMQ's remark.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.broker.acl import AccessControl
from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.client.acl_hook import AclSigner
from mqstore.client.remoting_client import RemotingClient
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from tests.helpers import make_store
from tests.interop.broker_harness import HERE, run_node

pytestmark = [pytest.mark.interop, pytest.mark.integration]

TOPIC = "acl-orders"
ACL = {
    "accounts": [
        {"accessKey": "rocketmq2", "secretKey": "12345678", "admin": True},
        {
            "accessKey": "onsuser",
            "secretKey": "ons-secret-1",
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": [f"{TOPIC}=PUB|SUB"],
        },
    ]
}


@pytest.fixture
def acl_broker(tmp_path: Path) -> Iterator[str]:
    store = make_store(tmp_path)
    core = BrokerCore(store, BrokerConfig())
    srv = BrokerServer(core, "127.0.0.1", 0, acl=AccessControl.from_dict(ACL))
    srv.start()
    admin = RemotingClient(rpc_hook=AclSigner("rocketmq2", "12345678"))
    try:
        ext = {"topic": TOPIC, "readQueueNums": "2", "writeQueueNums": "2"}
        cmd = RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=ext)
        assert admin.invoke(srv.address, cmd, 5).code == ResponseCode.SUCCESS
        yield srv.address
    finally:
        admin.close()
        srv.stop()
        core.shutdown()
        store.close()


def _run_failing(node: str, opts: dict[str, object]) -> str:
    proc = subprocess.run([node, str(HERE / "ons_acl.js"), json.dumps(opts)], cwd=HERE,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 1, proc.stdout
    return proc.stderr


def test_ali_ons_with_keys_produces_and_consumes(node: str, acl_broker: str) -> None:
    opts = {"nameSrv": acl_broker, "topic": TOPIC, "group": "ons-acl-group",
            "accessKey": "onsuser", "secretKey": "ons-secret-1", "count": 5}  # fmt: skip
    lines = run_node(node, "ons_acl.js", opts)
    assert len([x for x in lines if "sent" in x]) == 5
    assert sorted(x["received"] for x in lines if "received" in x) == [f"m{i}" for i in range(5)]
    assert lines[-1] == {"done": True, "count": 5}


def test_ali_ons_without_keys_is_refused(node: str, acl_broker: str) -> None:
    opts = {"nameSrv": acl_broker, "topic": TOPIC, "group": "g", "count": 1}
    err = _run_failing(node, opts)
    assert "No accessKey is configured" in err


def test_ali_ons_with_a_wrong_secret_is_refused(node: str, acl_broker: str) -> None:
    opts = {"nameSrv": acl_broker, "topic": TOPIC, "group": "g",
            "accessKey": "onsuser", "secretKey": "not-the-secret", "count": 1}  # fmt: skip
    err = _run_failing(node, opts)
    assert "Check signature failed for accessKey=onsuser" in err
