"""The broker fixtures every broker and client test shares: a harness store, a started
BrokerCore over it, and a BrokerServer on a free 127.0.0.1 port in front of that core.

``tests/broker/conftest.py`` re-exports them for the broker tests; a test module
elsewhere imports the ones it uses (pytest finds fixtures by name in the module).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.message_store import MessageStore
from tests.helpers import make_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    """A fresh harness store, closed after the test."""
    with make_store(tmp_path) as s:
        yield s


@pytest.fixture
def core(store: MessageStore) -> Iterator[BrokerCore]:
    """A started broker core; shut down (and persisted) after the test."""
    c = BrokerCore(store, BrokerConfig())
    c.start()
    yield c
    c.shutdown()


@pytest.fixture
def server(core: BrokerCore) -> Iterator[BrokerServer]:
    """``core`` served on a free 127.0.0.1 port (``server.address``); stopped after."""
    srv = BrokerServer(core, host="127.0.0.1", port=0)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def address(server: BrokerServer) -> str:
    """The ``host:port`` of :func:`server`."""
    return server.address
