"""``mqstore broker --acl FILE``: a real broker process that refuses unsigned requests,
serves signed ones, refuses a bad ACL file in one line, and warns when it is exposed."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

import pytest

from mqstore.broker.exposure import BrokerAccess, is_loopback
from mqstore.client.acl_hook import AclSigner
from mqstore.client.remoting_client import RemotingClient
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from tests.helpers import CLI, SMALL_STORE_FLAGS, Started, cli_process, until

ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=PUB|SUB
  - accessKey: rocketmq2
    secretKey: "87654321"
    admin: true
"""


def _cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*CLI, "broker", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _acl_file(tmp_path: Path) -> Path:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YML)
    return acl


def _admin_client() -> contextlib.closing[RemotingClient]:
    """A client signing as the ACL file's admin account; closed at exit."""
    return contextlib.closing(RemotingClient(rpc_hook=AclSigner("rocketmq2", "87654321")))


def test_broker_with_acl_file_refuses_unsigned_and_serves_signed(tmp_path: Path) -> None:
    args = ["broker", "--store", str(tmp_path / "s"), *SMALL_STORE_FLAGS, "--port", "0"]
    with (
        cli_process([*args, "--acl", str(_acl_file(tmp_path))]) as started,
        contextlib.closing(RemotingClient()) as anon,
        contextlib.closing(RemotingClient(rpc_hook=AclSigner("RocketMQ", "12345678"))) as signed,
    ):
        route = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "t"})
        refused = anon.invoke(started.address, route, 5)
        assert (refused.code, refused.remark) == (16, "No accessKey is configured")
        assert signed.invoke(started.address, route, 5).code != ResponseCode.NO_PERMISSION


def test_bad_acl_file_is_one_line_and_usage_exit(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n  - accessKey: someone\n    secretKey: short\n")
    p = _cli("--store", str(tmp_path / "s"), *SMALL_STORE_FLAGS, "--port", "0", "--acl", str(acl))
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2
    assert err.strip().splitlines() == [
        "mqstore broker: account someone: the accessKey and secretKey must be longer than 6 "
        "characters"
    ]


def test_missing_acl_file_is_one_line(tmp_path: Path) -> None:
    p = _cli("--store", str(tmp_path / "s"), "--port", "0", "--acl", str(tmp_path / "none.yml"))
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1
    assert "cannot read ACL file" in err


@pytest.mark.parametrize(("host", "expected"), [("127.0.0.1", True), ("::1", True),
                         ("localhost", True), ("0.0.0.0", False), ("10.0.0.5", False)])  # fmt: skip
def test_loopback_addresses(host: str, expected: bool) -> None:
    assert is_loopback(host) is expected


def test_exposed_ports_without_protection_are_named() -> None:
    open_ = BrokerAccess(None, None, None)
    lines = open_.warnings("0.0.0.0", "0.0.0.0", serves_ha=True)
    assert len(lines) == 2
    assert "without --acl" in lines[0] and "without --ha-secret" in lines[1]
    assert open_.warnings("127.0.0.1", "127.0.0.1", serves_ha=True) == []


def test_exposed_grpc_port_without_acl_is_named(tmp_path: Path) -> None:
    open_ = BrokerAccess(None, None, None)
    (line,) = open_.warnings("127.0.0.1", "127.0.0.1", serves_ha=True, grpc_host="0.0.0.0")
    assert line.startswith("warning: gRPC on 0.0.0.0 without --acl")
    assert open_.warnings("127.0.0.1", "127.0.0.1", serves_ha=True, grpc_host="127.0.0.1") == []
    guarded = BrokerAccess.from_flags(str(_acl_file(tmp_path)), None, None)
    assert guarded.warnings("127.0.0.1", "127.0.0.1", serves_ha=True, grpc_host="0.0.0.0") == []


def test_ha_secret_defaults_to_the_acl_admin_secret(tmp_path: Path) -> None:
    access = BrokerAccess.from_flags(str(_acl_file(tmp_path)), None, "10.0.0.2")
    assert access.store_settings() == {"ha_secret": "87654321", "ha_allowed_slaves": ("10.0.0.2",)}
    assert access.warnings("0.0.0.0", "0.0.0.0", serves_ha=True) == []


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sync_master(tmp_path: Path, ha: int) -> contextlib.AbstractContextManager[Started]:
    """A SYNC_MASTER guarded by ``ACL_YML``, serving HA on port ``ha``."""
    args = ["broker", "--store", str(tmp_path / "m"), *SMALL_STORE_FLAGS, "--port", "0"]
    args += ["--role", "SYNC_MASTER", "--ha-port", str(ha), "--acl", str(_acl_file(tmp_path))]
    return cli_process(args)


def _slave(tmp_path: Path, ha: int, *extra: str) -> contextlib.AbstractContextManager[Started]:
    """A SLAVE of the master whose HA port is ``ha``."""
    args = ["broker", "--store", str(tmp_path / "s"), *SMALL_STORE_FLAGS, "--port", "0"]
    args += ["--role", "SLAVE", "--master-ha", f"127.0.0.1:{ha}", "--ha-port", "0", *extra]
    return cli_process(args)


@pytest.mark.integration
def test_sync_master_and_slave_sharing_the_acl_file_replicate(tmp_path: Path) -> None:
    """The HA secret defaults to the ACL admin's secretKey on both sides: SEND_OK."""

    ha = _free_port()
    with _sync_master(tmp_path, ha) as master, _admin_client() as client:
        ext = {"topic": "topicA", "readQueueNums": "1", "writeQueueNums": "1"}
        create = RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=ext)
        assert client.invoke(master.address, create, 5).code == ResponseCode.SUCCESS
        send_ext = {"producerGroup": "pg", "topic": "topicA", "defaultTopic": "TBW102",
                    "defaultTopicQueueNums": "1", "queueId": "0", "sysFlag": "0",
                    "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
                    "properties": ""}  # fmt: skip
        send = RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=send_ext, body=b"x")
        assert client.invoke(master.address, send, 5).code == ResponseCode.SLAVE_NOT_AVAILABLE
        with _slave(tmp_path, ha, "--acl", str(tmp_path / "plain_acl.yml")):

            def sent() -> bool:
                code = client.invoke(master.address, send, 5).code
                assert code in (ResponseCode.SUCCESS, ResponseCode.SLAVE_NOT_AVAILABLE)
                return code == ResponseCode.SUCCESS

            until(sent, 60, 0.1, "SUCCESS once the slave is in")


@pytest.mark.integration
def test_slave_with_a_wrong_ha_secret_never_makes_send_ok(tmp_path: Path) -> None:

    ha = _free_port()
    with (
        _sync_master(tmp_path, ha) as master,
        _admin_client() as client,
        _slave(tmp_path, ha, "--ha-secret", "not-the-admin-secret"),
    ):
        send_ext = {"producerGroup": "pg", "topic": "TBW102", "queueId": "0", "sysFlag": "0",
                    "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
                    "properties": ""}  # fmt: skip
        send = RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=send_ext, body=b"x")
        end = time.monotonic() + 2  # the slave has connected and answered by then
        while time.monotonic() < end:
            assert client.invoke(master.address, send, 5).code == ResponseCode.SLAVE_NOT_AVAILABLE
            time.sleep(0.1)
