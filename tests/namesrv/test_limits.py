"""The name server's connection limits (``mqstore.limits``), over real sockets."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest

from mqstore.limits import ServerLimits
from mqstore.namesrv.server import NameServer
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from tests.broker.test_server_limits import is_closed
from tests.broker.wire_client import WireClient

pytestmark = pytest.mark.integration


@pytest.fixture
def small() -> Iterator[NameServer]:
    """A 1 MiB cap on buffered partial frames (RocketMQ's idle timeout: a client waiting
    on a loaded machine is not taken for an idle one)."""
    srv = NameServer(port=0, limits=ServerLimits(max_buffered_total=1 << 20))
    srv.start()
    yield srv
    srv.stop()


def test_an_idle_connection_is_closed() -> None:
    srv = NameServer(port=0, limits=ServerLimits(idle_timeout_s=0.4))
    srv.start()
    try:
        with socket.create_connection(("127.0.0.1", srv.port)) as sock:
            assert is_closed(sock, 60)
    finally:
        srv.stop()


def test_the_largest_half_frame_is_dropped_and_a_small_request_still_answered(
    small: NameServer,
) -> None:
    hog = socket.create_connection(("127.0.0.1", small.port))
    with hog, WireClient(small.address) as client:
        hog.sendall(struct.pack(">iI", (4 << 20) - 4, 16) + bytes(900 * 1024))
        time.sleep(0.1)
        hog.sendall(bytes(200 * 1024))  # passes the 1 MiB cap: the hog goes
        assert is_closed(hog, 60)
        resp = client.call(Rq.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert resp.code == Rs.TOPIC_NOT_EXIST


def test_connections_past_the_cap_are_closed_at_accept() -> None:
    srv = NameServer(port=0, limits=ServerLimits(max_connections=1))
    srv.start()
    try:
        with WireClient(srv.address) as client:
            assert client.call(Rq.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).code == Rs.TOPIC_NOT_EXIST
            second = socket.create_connection(("127.0.0.1", srv.port))
            with second:
                assert is_closed(second, 60)
            assert client.call(Rq.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).code == Rs.TOPIC_NOT_EXIST
    finally:
        srv.stop()
