"""Helpers of the core tests: put messages and run a pull to completion."""

from __future__ import annotations

import threading

from mqstore.broker.core import BrokerCore
from mqstore.broker.pulls import PullOutcome, PullRequest
from mqstore.message import Message
from mqstore.message_store import MessageStore


def put(
    store: MessageStore, topic: str, n: int, queue_id: int = 0, tags: str | None = None
) -> None:
    """Store ``n`` messages and wait until they are pullable."""
    for i in range(n):
        store.put_message(Message(topic, f"m{i}".encode(), tags=tags, queue_id=queue_id))
    assert store.wait_dispatched()


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
