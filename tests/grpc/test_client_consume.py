"""The official Python 5.x client: FIFO and delayed sends, invisible time, redelivery,
the dead-letter queue, and the push consumer's listener."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mqstore.grpc import GrpcEndpoint
from mqstore.pop.records import dlq_topic
from tests.grpc.conftest import (
    FIFO_GROUP,
    GROUP,
    TOPIC,
    client_config,
    consuming,
    message,
    until,
)


def receive_n(consumer: Any, n: int, invisible: int = 10, timeout: float = 15) -> list[Any]:
    got: list[Any] = []

    def more() -> bool:
        got.extend(consumer.receive(32, invisible))
        return len(got) >= n

    until(more, timeout)
    return got


@contextmanager
def received(
    producer: Any, endpoint: GrpcEndpoint, body: bytes, invisible: int
) -> Iterator[tuple[Any, Any]]:
    """Send one message of ``body`` to TOPIC and receive it in GROUP, invisible for
    ``invisible`` seconds: (the consumer, the message)."""
    producer.send(message(body))
    with consuming(endpoint) as c:
        (m,) = receive_n(c, 1, invisible=invisible)
        yield c, m


def dlq_bodies(ep: GrpcEndpoint, group: str) -> list[bytes]:
    store = ep.core.store
    topic = dlq_topic(group)
    out = []
    for cq in store.queues.all():
        if cq.topic == topic:
            r = store.get_message(group, topic, cq.queue_id, 0, 100)
            out.extend(m.body for m in r.messages)
    return out


def test_fifo_messages_of_one_group_go_to_one_queue_in_order(
    producer: Any, endpoint: GrpcEndpoint
) -> None:
    receipts = [producer.send(message(f"{i}".encode(), message_group="g1")) for i in range(6)]
    queues = {r.message_queue.message_queue0().id for r in receipts}
    offsets = [r.offset for r in receipts]
    assert offsets == sorted(offsets)
    with consuming(endpoint, FIFO_GROUP) as c:
        got = receive_n(c, 6)
        assert [m.body for m in got] == [f"{i}".encode() for i in range(6)]
        assert {m.message_group for m in got} == {"g1"}
        assert all(m.message_type == 2 for m in got)  # FIFO
    assert len(queues) >= 1


def test_fifo_group_is_not_delivered_past_a_message_in_flight(
    producer: Any, endpoint: GrpcEndpoint
) -> None:
    for i in range(3):
        producer.send(message(f"{i}".encode(), message_group="held"))
    with consuming(endpoint, FIFO_GROUP) as c:
        first = receive_n(c, 1, invisible=2)
        # held: nothing more while the batch is in flight and unacknowledged
        assert c.receive(32, 2) == []
        time.sleep(2.2)
        again = receive_n(c, 1, invisible=10)
        assert again[0].body == first[0].body == b"0"
        assert again[0].delivery_attempt == 2


def test_delayed_message_is_not_received_before_its_delivery_time(
    producer: Any, endpoint: GrpcEndpoint
) -> None:
    at = int(time.time()) + 3  # the Python client takes seconds
    r = producer.send(message(b"later", delivery_timestamp=at))
    assert r.message_id
    with consuming(endpoint) as c:
        assert c.receive(32, 10) == []
        got = receive_n(c, 1)
        arrived = time.time()
        assert got[0].body == b"later"
        assert got[0].message_type == 3  # DELAY
        # the timer wheel (docs/timer.md): at its time, not a delay level's, and it says so
        # RocketMQ's precision (1 s), plus a receive round and a loaded machine's delays
        assert at - 0.05 <= arrived < at + 1 + 3
        assert got[0].delivery_timestamp == at * 1000


def test_unacked_message_comes_back_with_attempt_raised(
    producer: Any, endpoint: GrpcEndpoint
) -> None:
    with received(producer, endpoint, b"retry-me", invisible=1) as (c, m1):
        assert m1.delivery_attempt == 1
        (m2,) = receive_n(c, 1, invisible=10)
        assert m2.message_id == m1.message_id
        assert m2.delivery_attempt == 2
        c.ack(m2)


def test_change_invisible_duration_extends_the_hold(producer: Any, endpoint: GrpcEndpoint) -> None:
    with received(producer, endpoint, b"extend", invisible=1) as (c, m):
        c.change_invisible_duration(m, 4)
        time.sleep(1.5)  # past the first invisible time
        assert c.receive(32, 1) == []
        c.ack(m)  # the handle the change returned (the client keeps it on the message)


def test_message_goes_to_dlq_after_the_maximum_attempts(
    producer: Any, endpoint: GrpcEndpoint
) -> None:
    # GROUP: retryMaxTimes 1 -> 2 attempts
    with received(producer, endpoint, b"poison", invisible=1) as (c, m1):
        (m2,) = receive_n(c, 1, invisible=1)
        assert (m1.delivery_attempt, m2.delivery_attempt) == (1, 2)
        until(lambda: dlq_bodies(endpoint, GROUP) == [b"poison"])
        assert c.receive(32, 1) == []


def test_ack_of_a_handle_no_longer_in_flight_is_refused(
    producer: Any, endpoint: GrpcEndpoint
) -> None:
    from rocketmq.v5.exception import BadRequestException

    with received(producer, endpoint, b"late", invisible=10) as (c, m):
        c.ack(m)
        with pytest.raises(BadRequestException):
            c.ack(m)


def test_push_consumer_consumes_with_its_listener(producer: Any, endpoint: GrpcEndpoint) -> None:
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    seen: dict[bytes, int] = defaultdict(int)
    lock = threading.Lock()

    class Listener(MessageListener):  # type: ignore[misc]
        def consume(self, msg: Any) -> Any:
            with lock:
                seen[msg.body] += 1
                first = seen[msg.body] == 1
            if msg.body == b"fail-once" and first:
                return ConsumeResult.FAILURE
            return ConsumeResult.SUCCESS

    bodies = [f"p{i}".encode() for i in range(20)] + [b"fail-once"]
    for b in bodies:
        producer.send(message(b))
    pc = PushConsumer(client_config(endpoint), GROUP, Listener(), {TOPIC: FilterExpression()},
                      consumption_thread_count=2)  # fmt: skip
    pc.startup()
    try:
        until(lambda: set(seen) == set(bodies) and seen[b"fail-once"] >= 2, timeout=20)
    finally:
        pc.shutdown()
    assert all(seen[b] == 1 for b in bodies if b != b"fail-once")


@pytest.mark.parametrize("fifo", [False, True], ids=["normal", "fifo"])
def test_never_acked_message_is_delivered_max_attempts_times_then_dead_lettered(
    core: Any, fifo: bool
) -> None:
    """retryMaxTimes 2 -> max attempts 3 (the settings' ``max_attempts``): attempts 1, 2, 3,
    then one copy in ``%DLQ%group``, FIFO or not (the proxy's PopMessageResultFilterImpl
    dead-letters a message received with reconsumeTimes >= max attempts)."""
    from mqstore.broker.subscriptions import SubscriptionGroupConfig
    from mqstore.grpc import GrpcConfig
    from tests.grpc.conftest import quick_service, simple_consumer

    group = "AttemptsFifo" if fifo else "AttemptsNormal"
    core.groups.put(SubscriptionGroupConfig(group, retry_max_times=2))
    fifo_groups = frozenset({group} if fifo else ())
    ep = GrpcEndpoint(core, GrpcConfig(port=0, service=quick_service(fifo_groups=fifo_groups)))
    ep.start()
    try:
        from rocketmq import Producer

        p: Any = Producer(client_config(ep), (TOPIC,))
        p.startup()
        p.send(message(b"poison", **({"message_group": "mg"} if fifo else {})))
        p.shutdown()
        c = simple_consumer(ep, group)
        attempts: list[int] = []
        until(lambda: (attempts.extend(m.delivery_attempt for m in c.receive(32, 1))
                       or dlq_bodies(ep, group) != []), timeout=30)  # fmt: skip
        time.sleep(1.5)  # nothing more comes after the dead-lettering
        attempts.extend(m.delivery_attempt for m in c.receive(32, 1))
        c.shutdown()
        assert attempts == [1, 2, 3]
        assert dlq_bodies(ep, group) == [b"poison"]
    finally:
        ep.stop(grace=0.2)
