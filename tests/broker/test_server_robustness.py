"""The live server under garbage input, and the ``mqstore broker`` process: restarted
with offsets, and on a free port (``--port 0``)."""

from __future__ import annotations

import os
import random
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.broker.server import BrokerServer
from mqstore.message import decode_offset_msg_id
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from mqstore.remoting.fastjson import loads
from tests.broker.test_server import send_v2
from tests.broker.wire_client import WireClient

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def blast(address: str, data: bytes) -> None:
    """Send ``data`` on a fresh connection, then read until the server closes or idles."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=2) as s:
        s.settimeout(0.2)
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)  # EOF: a partial frame must not keep us waiting
            while s.recv(65536):
                pass
        except OSError:  # reset, timeout: both fine
            pass


CRAFTED = [
    struct.pack(">i", -1) + b"\x00" * 8,  # negative length
    struct.pack(">i", 64 << 20) + b"\x00" * 8,  # over the 16 MiB limit
    struct.pack(">iI", 12, 50) + b"{}\x00\x00",  # header longer than the frame
    struct.pack(">iI", 8, 4) + b"{no}",  # header not JSON
    struct.pack(">iI", 8, 0x05000004) + b"abcd",  # unknown serialize type
    struct.pack(">iI", 9, 0x01000005) + b"\x00" * 5,  # truncated binary header
    struct.pack(">iI", 6, 2) + b"[]",  # JSON header that is not an object
]


@pytest.mark.parametrize("data", CRAFTED, ids=range(len(CRAFTED)))
def test_crafted_bad_frame_leaves_other_connections_served(
    server: BrokerServer, data: bytes
) -> None:
    with WireClient(server.address) as good:
        blast(server.address, data)
        assert good.call(Rq.GET_MAX_OFFSET, {"topic": "T", "queueId": 0}).code == Rs.SUCCESS


# One live server for every example is the point: it must survive them all.
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(min_size=1, max_size=2048))
def test_random_bytes_never_stop_the_server(server: BrokerServer, data: bytes) -> None:
    blast(server.address, data)
    with WireClient(server.address) as good:
        assert good.call(Rq.GET_MIN_OFFSET, {"topic": "T", "queueId": 0}).code == Rs.SUCCESS


def test_garbage_on_a_busy_connection_closes_only_that_connection(
    server: BrokerServer,
) -> None:
    rng = random.Random(5)
    with WireClient(server.address) as good, WireClient(server.address) as bad:
        bad.request(Rq.GET_MAX_OFFSET, {"topic": "T", "queueId": 0})
        bad.send_raw(struct.pack(">i", -5) + rng.randbytes(100))
        with pytest.raises(OSError):  # ConnectionError, or a reset
            while True:  # the answer may or may not make it before the close
                bad.wait_response(10**6)
        assert good.call(Rq.GET_MAX_OFFSET, {"topic": "T", "queueId": 0}).code == Rs.SUCCESS


def start_broker(
    store_dir: Path, *extra: str, new_session: bool = False
) -> tuple[subprocess.Popen[str], str]:
    """``mqstore broker`` on a free port (``extra``: more options; ``new_session``: in
    its own process group, so signals to the group reach it and its children only)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(store_dir), "--port", "0",
         "--ha-port", "0", "--file-size", str(1 << 20), *extra],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=new_session,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if "remoting on " in line:
            return proc, line.rsplit("remoting on ", 1)[1].strip()
    proc.kill()
    raise AssertionError("the broker never printed its address")


def stop_broker(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0


def test_offsets_survive_a_broker_process_restart(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    proc, address = start_broker(store_dir)
    try:
        with WireClient(address) as c:
            ext = {"consumerGroup": "g", "topic": "T", "queueId": 2, "commitOffset": 250}
            assert c.call(Rq.UPDATE_CONSUMER_OFFSET, ext).code == Rs.SUCCESS
    finally:
        stop_broker(proc)
    text = (store_dir / "config" / "consumerOffset.json").read_text()
    assert "{2:250" in text
    assert loads(text) == {"offsetTable": {"T@g": {2: 250}}}
    proc, address = start_broker(store_dir)
    try:
        with WireClient(address) as c:
            r = c.call(Rq.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "T", "queueId": 2})
            assert (r.code, r.ext_fields["offset"]) == (Rs.SUCCESS, "250")
    finally:
        stop_broker(proc)


def test_broker_on_a_free_port_puts_that_port_in_message_ids(tmp_path: Path) -> None:
    proc, address = start_broker(tmp_path / "store")
    try:
        with WireClient(address) as c:
            r = send_v2(c, b"dial me")
    finally:
        stop_broker(proc)
    assert r.code == Rs.SUCCESS
    (host, port), _ = decode_offset_msg_id(r.ext_fields["msgId"])
    assert f"{host}:{port}" == address
