"""SimpleConsumer embedded: the module docstring's few lines, and its errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore import Message, MessageStore
from mqstore.client.simple_consumer import EmbeddedPop, ReceivedMessage, SimpleConsumer
from mqstore.errors import InvalidReceiptHandleError
from mqstore.pop import PopService
from tests.helpers import store_config


def test_embedded_use_in_a_few_lines(tmp_path: Path) -> None:
    cfg = store_config(tmp_path)
    with MessageStore.open(cfg) as store, PopService(store) as pop:
        store.put_message(Message(topic="orders", body=b"hello"))
        store.wait_dispatched(60)
        consumer = SimpleConsumer("group", {"orders": "*"}, EmbeddedPop(pop), await_duration=2)
        got = consumer.receive(16, invisible_duration=30)
        for m in got:
            consumer.ack(m)
    assert [m.body for m in got] == [b"hello"]


@pytest.fixture
def received(tmp_path: Path) -> Iterator[tuple[SimpleConsumer, ReceivedMessage]]:
    """A consumer of ``orders`` and the one message it received (hidden for 30 s)."""
    with MessageStore.open(store_config(tmp_path)) as store, PopService(store) as pop:
        store.put_message(Message(topic="orders", body=b"x"))
        store.wait_dispatched(60)
        c = SimpleConsumer("g", {"orders": "*"}, EmbeddedPop(pop), await_duration=2)
        yield c, c.receive(1, 30)[0]


def test_ack_of_an_acknowledged_message_raises(
    received: tuple[SimpleConsumer, ReceivedMessage],
) -> None:
    c, m = received
    c.ack(m)
    with pytest.raises(InvalidReceiptHandleError):
        c.ack(m)
    with pytest.raises(InvalidReceiptHandleError):
        c.change_invisible_duration(m, 5)


def test_receive_takes_topics_in_turn_and_filters_tags(tmp_path: Path) -> None:
    with MessageStore.open(store_config(tmp_path)) as store, PopService(store) as pop:
        store.put_message(Message(topic="A", body=b"a", tags="x"))
        store.put_message(Message(topic="A", body=b"skip", tags="y"))
        store.put_message(Message(topic="B", body=b"b"))
        store.wait_dispatched(60)
        c = SimpleConsumer("g", {"A": "x", "B": "*"}, EmbeddedPop(pop))
        bodies = sorted(m.body for _ in range(4) for m in c.receive(16, 30))
    assert bodies == [b"a", b"b"]


def test_consumer_needs_a_subscription(tmp_path: Path) -> None:
    with (
        MessageStore.open(store_config(tmp_path)) as store,
        PopService(store) as pop,
        pytest.raises(ValueError),
    ):
        SimpleConsumer("g", {}, EmbeddedPop(pop))


def test_a_changed_invisible_duration_renews_the_messages_receipt(
    received: tuple[SimpleConsumer, ReceivedMessage],
) -> None:
    c, m = received
    first_handle, first_deadline = m.receipt_handle, m.invisible_deadline_ms
    c.change_invisible_duration(m, 60)
    assert m.receipt_handle != first_handle
    assert m.invisible_deadline_ms >= first_deadline + 29_000
    c.ack(m)  # the renewed receipt: the first one is stale now
