"""Fixtures for POP tests: a small SYNC_FLUSH store with a started PopService."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore import FlushDiskType, Message, MessageStore
from mqstore.pop import PopConfig, PopService
from tests.helpers import make_store


def put(store: MessageStore, topic: str, bodies: list[bytes], queue_id: int = 0, **kw: Any) -> None:
    """Put ``bodies`` to one queue and wait until they are pullable."""
    for b in bodies:
        r = store.put_message(Message(topic=topic, body=b, queue_id=queue_id, **kw))
        assert r.status.ok, r
    assert store.wait_dispatched(10)


def until(cond: Callable[[], Any], timeout: float = 10.0, step: float = 0.01) -> Any:
    """Poll ``cond`` until it is truthy (returned) or the deadline passes (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        time.sleep(step)


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
    svc.close()
