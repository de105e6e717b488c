"""The broker's event loop and how it writes answers (``mqstore.eventloop``, Rule 8 of
``mqstore.broker.server``): uvloop when installed, the standard loop on request, and the
answers to requests that arrived together written together, over real TCP."""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from collections.abc import Iterator

import pytest

from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.eventloop import ENV, loop_kind
from mqstore.remoting.codec import RemotingCommand, encode
from mqstore.remoting.codes import RequestCode, ResponseCode
from tests.broker.wire_client import WireClient

LOOPS = ["uvloop", "asyncio"]


def _max_offset(opaque: int) -> bytes:
    ext = {"topic": "TopicTest", "queueId": "0"}
    return encode(RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=opaque, ext_fields=ext))


@pytest.fixture(params=LOOPS)
def served(
    request: pytest.FixtureRequest, core: BrokerCore, monkeypatch: pytest.MonkeyPatch
) -> Iterator[BrokerServer]:
    """``core`` served on each kind of loop."""
    if request.param == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop is not installed")
    monkeypatch.setenv(ENV, request.param)
    srv = BrokerServer(core, host="127.0.0.1", port=0)
    srv.start()
    yield srv
    srv.stop()


def test_the_broker_runs_on_uvloop_when_it_is_installed(core: BrokerCore) -> None:
    pytest.importorskip("uvloop", reason="uvloop is not installed")
    srv = BrokerServer(core, host="127.0.0.1", port=0)
    try:
        assert type(srv.loop).__module__.startswith("uvloop")
    finally:
        srv.loop.close()


def test_the_environment_variable_selects_the_standard_loop(
    core: BrokerCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "asyncio")
    assert loop_kind() == "asyncio"
    srv = BrokerServer(core, host="127.0.0.1", port=0)
    try:
        assert isinstance(srv.loop, asyncio.BaseEventLoop)
    finally:
        srv.loop.close()


def test_a_request_is_answered_on_either_loop(served: BrokerServer) -> None:
    with WireClient(served.address) as client:
        resp = client.call(RequestCode.GET_MAX_OFFSET, {"topic": "TopicTest", "queueId": 0})
    assert resp.code == ResponseCode.SUCCESS


@pytest.mark.skipif(sys.platform != "linux", reason="reads Linux's tcp_info")
def test_answers_to_requests_sent_together_arrive_in_one_segment(served: BrokerServer) -> None:
    host, port = served.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:

        def segments_in() -> int:  # struct tcp_info's tcpi_segs_in (Linux 4.2+)
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
            return int(struct.unpack_from("<I", info, 140)[0])

        sock.sendall(_max_offset(1))  # the connection settled: accepted, first answer read
        answer = _max_offset(1)  # an answer is no longer than this request
        sock.recv(1 << 16)
        before = segments_in()
        sock.sendall(b"".join(_max_offset(n) for n in range(2, 10)))  # 8 in one segment
        got = b""
        deadline = time.monotonic() + 60
        while got.count(b'"code":0') < 8 and time.monotonic() < deadline:
            got += sock.recv(1 << 16)
        assert got.count(b'"code":0') == 8 and len(got) < 8 * len(answer) * 2
        # one segment of answers (and maybe one bare ACK), not one segment per answer
        assert segments_in() - before <= 2


def test_answers_before_a_malformed_frame_still_arrive(served: BrokerServer) -> None:
    host, port = served.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        bad = struct.pack(">ii", 8, 0x7F000004) + b"{bad"  # header length past the frame
        sock.sendall(b"".join(_max_offset(n) for n in range(1, 4)) + bad)
        got = b""
        while chunk := sock.recv(1 << 16):
            got += chunk
    opaques = [f'"opaque":{n},'.encode() for n in range(1, 4)]
    assert all(o in got for o in opaques)
