"""A SYNC_MASTER with no slave yet, as RocketMQ 4.9 behaves (docs: SYNC_MASTER waiting):
it answers routes, stores every send and answers SLAVE_NOT_AVAILABLE; once a slave has
connected, the same clients get SEND_OK. Driven with ali-ons and the project's producer
against ``mqstore broker`` processes."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.client.producer import Producer
from mqstore.client.remote import RemoteTransport
from mqstore.client.transport import SendStatus
from mqstore.message import Message
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from mqstore.tools.bench._harness import stop
from tests.broker.wire_client import WireClient
from tests.helpers import until
from tests.interop.broker_harness import run_node

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TOPIC = "SyncT"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def broker(store: Path, port: int, *extra: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(store),
           "--port", str(port), "--file-size", str(1 << 20), *extra]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            assert proc.poll() is None, f"{cmd} exited with {proc.returncode}"
            assert time.monotonic() < deadline, f"{cmd} did not listen within 30 s"
            time.sleep(0.05)


@pytest.fixture
def lone_master(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A SYNC_MASTER process (address, HA port) with ``TOPIC`` created, no slave."""
    port, ha_port = free_port(), free_port()
    proc = broker(tmp_path / "master", port, "--role", "SYNC_MASTER", "--ha-port", str(ha_port))
    address = f"127.0.0.1:{port}"
    try:
        with WireClient(address) as c:
            ext = {"topic": TOPIC, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
            assert c.call(Rq.UPDATE_AND_CREATE_TOPIC, ext).code == Rs.SUCCESS
        yield address, ha_port
    finally:
        stop(proc)


def ons_send(node: str, address: str, body: str) -> str:
    out = run_node(
        node,
        "ons_produce.js",
        {"nameSrv": [address], "group": "pg", "topic": TOPIC,
         "messages": [{"tags": "A", "body": body}]},
    )  # fmt: skip
    assert len(out) == 1
    return str(out[0]["sendStatus"])


def py_send(address: str, body: bytes) -> SendStatus:
    with Producer("pg", RemoteTransport(address)) as p:
        return p.send(Message(topic=TOPIC, body=body)).status


def stored(address: str) -> int:
    with WireClient(address) as c:
        return sum(
            int(c.call(Rq.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": q}).ext_fields["offset"])
            for q in range(4)
        )


def test_a_lone_sync_master_answers_routes_and_stores_with_slave_not_available(
    node: str, lone_master: tuple[str, int]
) -> None:
    address, _ = lone_master
    with WireClient(address) as c:
        assert c.call(Rq.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}).code == Rs.SUCCESS
    assert ons_send(node, address, "ons") == "SLAVE_NOT_AVAILABLE"
    assert py_send(address, b"py") is SendStatus.SLAVE_NOT_AVAILABLE
    until(lambda: stored(address) >= 2, what="both messages stored")
    assert stored(address) == 2


def test_once_a_slave_connects_both_clients_get_send_ok(
    node: str, lone_master: tuple[str, int], tmp_path: Path
) -> None:
    address, ha_port = lone_master
    assert py_send(address, b"before") is SendStatus.SLAVE_NOT_AVAILABLE
    slave = broker(tmp_path / "slave", free_port(), "--role", "SLAVE", "--ha-port", "0",
                   "--master-ha", f"127.0.0.1:{ha_port}")  # fmt: skip
    try:
        until(lambda: py_send(address, b"probe") is SendStatus.SEND_OK, 60, 0.2, "SEND_OK")
        assert ons_send(node, address, "after") == "SEND_OK"
    finally:
        stop(slave)
