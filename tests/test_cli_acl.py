"""``mqstore broker --acl FILE``: a real broker process that refuses unsigned requests,
serves signed ones, refuses a bad ACL file in one line, and warns when it is exposed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore.broker.exposure import BrokerAccess, is_loopback
from mqstore.client.acl_hook import AclSigner
from mqstore.client.remoting_client import RemotingClient
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode

SMALL = ["--file-size", "64K", "--cq-file-size", "4000", "--index-slots", "100",
         "--index-num", "400"]  # fmt: skip
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
    return subprocess.Popen([sys.executable, "-m", "mqstore.tools.cli", "broker", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_broker_with_acl_file_refuses_unsigned_and_serves_signed(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YML)
    p = _cli("--store", str(tmp_path / "s"), *SMALL, "--port", "0", "--acl", str(acl))
    assert p.stdout is not None
    try:
        address = ""
        for line in p.stdout:
            if "remoting on" in line:
                address = line.rsplit(" ", 1)[1].strip()
                break
        assert address, "the broker did not start"
        route = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "t"})
        anon, signed = RemotingClient(), RemotingClient(rpc_hook=AclSigner("RocketMQ", "12345678"))
        try:
            refused = anon.invoke(address, route, 5)
            assert (refused.code, refused.remark) == (16, "No accessKey is configured")
            assert signed.invoke(address, route, 5).code != ResponseCode.NO_PERMISSION
        finally:
            anon.close()
            signed.close()
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)


def test_bad_acl_file_is_one_line_and_usage_exit(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n  - accessKey: someone\n    secretKey: short\n")
    p = _cli("--store", str(tmp_path / "s"), *SMALL, "--port", "0", "--acl", str(acl))
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


def test_ha_secret_defaults_to_the_acl_admin_secret(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YML)
    access = BrokerAccess.from_flags(str(acl), None, "10.0.0.2")
    assert access.store_extra() == {"ha_secret": "87654321", "ha_allowed_slaves": "10.0.0.2"}
    assert access.warnings("0.0.0.0", "0.0.0.0", serves_ha=True) == []
