"""Test harness for consumer tests: an in-process broker, a producer helper, and a
thread-safe record of what every consumer saw."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.inprocess import InProcessTransport
from mqstore.broker.topics import TopicConfig
from mqstore.client.allocate import MessageQueue
from mqstore.client.consumer import (
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    PushConsumer,
)
from mqstore.client.consumer_config import ConsumeFromWhere, ConsumerConfig
from mqstore.client.transport import Transport
from mqstore.config import StoreConfig
from mqstore.message import Message
from mqstore.message_store import MessageStore
from mqstore.records import StoredMessage
from tests.helpers import until

FAST = ConsumerConfig(
    suspend_ms=200,
    rebalance_interval_ms=2000,
    persist_offset_interval_ms=200,
    consume_thread_max=4,
    exception_delay_ms=100,
)
"""Test timings: short long-polls so shutdown is quick; everything else RocketMQ's."""

FIRST = dataclasses.replace(FAST, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
""":data:`FAST`, a new group starting at each queue's first message."""


@contextmanager
def broker(
    root: Path,
    *,
    delay_levels: str | None = None,
    file_size: int = 1 << 20,
    config: BrokerConfig | None = None,
) -> Iterator[BrokerCore]:
    """A started BrokerCore over a fresh store in ``root`` (``config`` defaults to a
    200 ms long-poll check); the core is shut down and the store closed after."""
    kw: dict[str, object] = {
        "root_dir": str(root),
        "commitlog_file_size": file_size,  # small files: a test's store stays a few MB on disk
        "mapped_file_size_consume_queue": 1024 * 20,
        "max_hash_slot_num": 1024,
        "max_index_num": 4096,
    }
    if delay_levels is not None:
        kw["message_delay_level"] = delay_levels
    with MessageStore.open(StoreConfig(**kw)) as store:  # type: ignore[arg-type]
        core = BrokerCore(store, config or BrokerConfig(hold_check_interval_ms=200))
        core.start()
        try:
            yield core
        finally:
            core.shutdown()


def create_topic(core: BrokerCore, topic: str, queues: int) -> list[MessageQueue]:
    core.create_topic(TopicConfig(topic, queues, queues))
    return [MessageQueue(topic, core.config.broker_name, q) for q in range(queues)]


def produce(
    core: BrokerCore, queues: list[MessageQueue], n: int, *, prefix: str = "m", tags: str = "A"
) -> list[str]:
    """Send ``n`` messages round-robin over ``queues``; bodies are ``prefix-i``."""
    t = InProcessTransport(core)
    bodies = []
    expect: dict[MessageQueue, int] = {}
    for i in range(n):
        body = f"{prefix}-{i}"
        mq = queues[i % len(queues)]
        r = t.send("pg", mq, [Message(mq.topic, body.encode(), tags=tags, queue_id=mq.queue_id)])
        expect[mq] = r.queue_offset + 1
        bodies.append(body)
    wait_dispatched(core, expect)
    return bodies


def wait_dispatched(core: BrokerCore, expect: dict[MessageQueue, int], timeout: float = 60) -> None:
    """Wait until the reput thread has built the consume queues up to ``expect``."""
    ok = wait_until(
        lambda: all(
            core.queries.max_offset(mq.topic, mq.queue_id) >= n for mq, n in expect.items()
        ),
        timeout,
    )
    assert ok, "consume queues not dispatched in time"


class Seen:
    """Bodies seen per consumer and per queue, in arrival order. Thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_consumer: dict[str, list[str]] = defaultdict(list)
        self.by_queue: dict[int, list[tuple[str, int]]] = defaultdict(list)
        self.deliveries: dict[int, list[tuple[str, int]]] = defaultdict(list)  # (who, offset)
        self.changed = threading.Condition(self.lock)

    def add(self, who: str, body: str, queue_id: int, offset: int) -> None:
        with self.changed:
            self.by_consumer[who].append(body)
            self.by_queue[queue_id].append((body, offset))
            self.deliveries[queue_id].append((who, offset))
            self.changed.notify_all()

    def counts(self) -> Counter[str]:
        with self.lock:
            return Counter(b for bodies in self.by_consumer.values() for b in bodies)

    def wait_for(self, pred: Callable[[Counter[str]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                c = Counter(b for bodies in self.by_consumer.values() for b in bodies)
                if pred(c):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.2))


def wait_until(pred: Callable[[], bool], timeout: float, step: float = 0.02) -> bool:
    """Poll ``pred`` until true or ``timeout`` (for state with no event to wait on)."""
    try:
        until(pred, timeout, step)
    except AssertionError:
        return False
    return True


def started_with(
    core: BrokerCore,
    listener: Callable[..., object],
    cfg: ConsumerConfig,
    *,
    orderly: bool = False,
    topic: str = "T",
    transport: Transport | None = None,
    group: str = "g",
    offset_dir: Path | None = None,
) -> PushConsumer:
    """A started push consumer of ``group`` subscribed to ``topic`` with ``listener``,
    through ``transport``, else a new in-process one to ``core``."""
    c = PushConsumer(group, transport or InProcessTransport(core), cfg, offset_dir=offset_dir)
    c.subscribe(topic)
    c.register_message_listener(listener, orderly=orderly)  # type: ignore[arg-type]
    c.start()
    return c


def started_consumer(
    core: BrokerCore,
    seen: Seen,
    name: str,
    cfg: ConsumerConfig,
    *,
    orderly: bool = False,
    work_s: float = 0.0,
    **where: Any,
) -> PushConsumer:
    """:func:`started_with` a listener that records every message in ``seen`` as
    ``name`` and succeeds; ``work_s``: a pause per batch first, keeping batches in
    flight while the group rebalances. ``where``: ``topic``, ``transport``, ``group``,
    ``offset_dir`` as for :func:`started_with`."""

    def on_msgs(msgs: list[StoredMessage], ctx: object) -> object:
        if work_s:
            time.sleep(work_s)
        for m in msgs:
            seen.add(name, m.body.decode(), m.queue_id, m.queue_offset)
        return (
            ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        )

    return started_with(core, on_msgs, cfg, orderly=orderly, **where)
