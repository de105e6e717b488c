"""Fixtures of the broker tests: a started BrokerCore over a small harness store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store.broker.core import BrokerConfig, BrokerCore
from store.message_store import MessageStore
from tests.helpers import make_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    """A fresh harness store, closed after the test."""
    s = make_store(tmp_path)
    yield s
    s.close()


@pytest.fixture
def core(store: MessageStore) -> Iterator[BrokerCore]:
    """A started broker core; shut down (and persisted) after the test."""
    c = BrokerCore(store, BrokerConfig())
    c.start()
    yield c
    c.shutdown()
