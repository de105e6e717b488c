"""The broker's accepted connections send without Nagle's delay, whichever way the
listening socket was made: a pull answer is written as a head and then the records,
and with Nagle the records wait for the client's delayed ACK (about 40 ms a pull)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.server import BrokerServer, bind_listener
from tests.helpers import make_store, until


@pytest.mark.parametrize("listener", ["bind_listener", "host_and_port"])
def test_an_accepted_connection_has_tcp_nodelay(tmp_path: Path, listener: str) -> None:
    store = make_store(tmp_path)
    core = BrokerCore(store, BrokerConfig())
    core.start()
    if listener == "bind_listener":  # what `mqstore broker` does
        server = BrokerServer(core, "127.0.0.1", sock=bind_listener("127.0.0.1"))
    else:
        server = BrokerServer(core, host="127.0.0.1", port=0)
    port = server.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            until(lambda: server.connections, what="the connection accepted")
            (conn,) = server.connections
            assert conn.transport is not None
            sock = conn.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        server.stop()
        core.shutdown()
        store.close()
