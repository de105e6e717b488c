"""``mqstore broker --grpc-port``: a broker process serving the 5.x clients beside
remoting, and a busy gRPC port as one line and exit code 3."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.grpc.conftest import message
from tests.helpers import SMALL_STORE_FLAGS as SMALL

pytestmark = pytest.mark.integration


def start(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(root),
         "--port", "0", *SMALL, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def assigned_queue_ids(address: str, group: str) -> list[int]:
    import grpc
    from rocketmq.grpc_protocol import service_pb2 as svc
    from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

    req = svc.QueryAssignmentRequest()
    req.topic.name = "CliTopic"
    req.group.name = group
    with grpc.insecure_channel(address) as ch:
        r = MessagingServiceStub(ch).QueryAssignment(req, timeout=5)
    return sorted(a.message_queue.id for a in r.assignments)


def test_broker_serves_grpc_clients_beside_remoting(tmp_path: Path) -> None:
    from rocketmq import (
        ClientConfiguration,
        Credentials,
        FilterExpression,
        Producer,
        SimpleConsumer,
    )

    p = start(tmp_path / "s", "--grpc-port", "0", "--grpc-fifo-group", "CliFifo")
    assert p.stdout is not None
    address = ""
    try:
        for line in p.stdout:
            if "grpc on" in line:
                address = line.rsplit(" ", 1)[1].strip()
                break
        assert address.startswith("127.0.0.1:")
        cfg = ClientConfiguration(address, Credentials(), request_timeout=3)
        prod = Producer(cfg, ("CliTopic",))
        prod.startup()
        sent = prod.send(message(b"via-cli", topic="CliTopic")).message_id
        prod.shutdown()
        c: Any = SimpleConsumer(cfg, "CliGroup", {"CliTopic": FilterExpression()}, await_duration=5)
        c.startup()
        got = c.receive(8, 10)
        for m in got:
            c.ack(m)
        c.shutdown()
        assert [(m.message_id, m.body) for m in got] == [(sent, b"via-cli")]
        assert assigned_queue_ids(address, "CliFifo") == [0, 1, 2, 3]  # FIFO: every queue
        assert assigned_queue_ids(address, "CliGroup") == [-1]
    finally:
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=60)
    assert p.returncode == 0
    assert "stopped" in out


def test_busy_grpc_port_is_one_line_and_exit_3(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = start(tmp_path / "s", "--grpc-port", str(port))
        _, err = p.communicate(timeout=60)
    assert p.returncode == 3
    lines = [ln for ln in err.splitlines() if "grpc" in ln.lower()]
    assert lines == [f"mqstore broker: cannot listen for gRPC on 127.0.0.1:{port}: "
                     "the port is in use (choose another --grpc-port)"], err  # fmt: skip
    assert "Traceback" not in err
