"""Helpers of the core tests: put messages and run a pull to completion."""

from __future__ import annotations

import threading
from typing import Any

from mqstore.broker.core import BrokerCore
from mqstore.broker.pulls import PullOutcome, PullRequest
from mqstore.message import Message
from mqstore.message_store import MessageStore
from mqstore.remoting.values import MessageQueue, PullQuery


def put(
    store: MessageStore, topic: str, n: int, queue_id: int = 0, tags: str | None = None
) -> None:
    """Store ``n`` messages and wait until they are pullable."""
    for i in range(n):
        store.put_message(Message(topic, f"m{i}".encode(), tags=tags, queue_id=queue_id))
    assert store.wait_dispatched(60)


def query(topic: str, queue_id: int, offset: int, **fields: Any) -> PullQuery:
    """Group ``g``'s pull of ``topic``'s queue ``queue_id`` from ``offset``; ``fields``
    are the query's other fields."""
    return PullQuery("g", MessageQueue(topic, "broker-a", queue_id), offset, **fields)


def pull(core: BrokerCore, request: PullRequest, timeout: float = 10.0) -> PullOutcome:
    """Run ``core.pull`` and wait for its one answer."""
    done = threading.Event()
    box: list[PullOutcome] = []

    def on_done(outcome: PullOutcome) -> None:
        box.append(outcome)
        done.set()

    core.pull(request, on_done)
    assert done.wait(timeout), "pull never answered"
    return box[0]
