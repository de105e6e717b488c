"""The official Python 5.x client against the endpoint: send, receive, ack."""

from __future__ import annotations

import threading
import time
from typing import Any

from mqstore.grpc import GrpcEndpoint
from tests.grpc.conftest import consuming, message, until


def receive_all(consumer: Any, n: int, invisible: int = 10) -> list[Any]:
    got: list[Any] = []

    def more() -> bool:
        got.extend(consumer.receive(32, invisible))
        return len(got) >= n

    until(more)
    return got


def test_producer_sends_normal_message_and_gets_its_id(
    producer: Any, endpoint: GrpcEndpoint
) -> None:
    receipt = producer.send(message(b"hello", tag="TagA", keys="k1"))
    assert receipt.message_id
    assert receipt.offset >= 0


def test_simple_consumer_receives_what_was_sent_and_acks(
    producer: Any, endpoint: GrpcEndpoint
) -> None:
    ids = {producer.send(message(f"m{i}".encode(), tag="TagA")).message_id for i in range(5)}
    with consuming(endpoint) as c:
        got = receive_all(c, 5)
        assert {m.message_id for m in got} == ids
        assert all(m.tag == "TagA" and m.delivery_attempt == 1 for m in got)
        assert not any(m.corrupted for m in got)
        for m in got:
            c.ack(m)
        assert c.receive(32, 1) == []


def test_acked_message_is_not_delivered_again(producer: Any, endpoint: GrpcEndpoint) -> None:
    producer.send(message(b"once"))
    with consuming(endpoint) as c:
        (m,) = receive_all(c, 1, invisible=1)
        c.ack(m)
        time.sleep(1.5)  # past the invisible time: an unacked message would be back
        assert c.receive(32, 1) == []


def test_receive_long_polls_until_a_message_arrives(producer: Any, endpoint: GrpcEndpoint) -> None:
    with consuming(endpoint, wait=20) as c:
        timer = threading.Timer(0.5, lambda: producer.send(message(b"arrives")))
        t0 = time.monotonic()
        timer.start()
        got = c.receive(32, 10)
        waited = time.monotonic() - t0
        timer.join()
        assert [m.body for m in got] == [b"arrives"]
        assert 0.4 <= waited < 15  # woken by the arrival, not by the 20 s poll's end
