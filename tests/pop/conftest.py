"""Fixtures for POP tests: a small SYNC_FLUSH store with a started PopService, and a
broker (store + core + server on a free port) with a remoting client for the TCP tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore import FlushDiskType, Message, MessageStore
from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.client.remoting_client import RemotingClient
from mqstore.closeable import Closeable
from mqstore.pop import PopConfig, PopService
from tests.helpers import make_store, until

__all__ = ["Broker", "put", "send", "until"]


def put(store: MessageStore, topic: str, bodies: list[bytes], queue_id: int = 0, **kw: Any) -> None:
    """Put ``bodies`` to one queue and wait until they are pullable."""
    for b in bodies:
        r = store.put_message(Message(topic=topic, body=b, queue_id=queue_id, **kw))
        assert r.status.ok, r
    assert store.wait_dispatched(60)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = make_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    yield s
    s.close()


@pytest.fixture
def pop(store: MessageStore) -> Iterator[PopService]:
    svc = PopService(store, PopConfig(max_attempts=3, persist_interval_ms=200))
    svc.start()
    yield svc
    svc.stop()


class Broker(Closeable):
    """Store + core + server on a free port; ``restart`` keeps the directory."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self._open()

    def _open(self) -> None:
        self.store: MessageStore = make_store(
            self.tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH
        )
        self.core = BrokerCore(self.store, BrokerConfig())
        self.core.start()
        self.server = BrokerServer(self.core, host="127.0.0.1", port=0)
        self.server.start()

    def close(self) -> None:
        self.server.stop()
        self.core.shutdown()
        self.store.close()

    def restart(self) -> None:
        self.close()
        self._open()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(tmp_path) as b:
        yield b


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    with RemotingClient() as c:
        yield c


def send(broker: Broker, bodies: list[bytes], queue_id: int = 0) -> None:
    """Put ``bodies`` to topic T (4 queues) of the broker's store, pullable."""
    broker.core.topics.learn("T", 4)
    put(broker.store, "T", bodies, queue_id=queue_id)


def send_to_every_queue(broker: Broker, n: int) -> None:
    """``n`` messages spread evenly over topic T's 4 queues, bodies ``<queue>-<i>``."""
    for q in range(4):
        send(broker, [f"{q}-{i}".encode() for i in range(n // 4)], queue_id=q)
