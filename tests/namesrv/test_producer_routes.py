"""The Python Producer over a name-server route spanning two broker processes."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from mqstore.client.allocate import MessageQueue
from mqstore.client.consumer import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer
from mqstore.client.consumer_config import ConsumerConfig
from mqstore.client.producer import Producer
from mqstore.client.remote import RemoteTransport
from mqstore.client.remoting_client import RemotingClient
from mqstore.client.transport import SendResult, TransportError
from mqstore.message import Message
from tests.namesrv.processes import (
    broker,
    create_topic,
    namesrv,
    route_brokers,
    two_brokers,
    wait_for,
)

pytestmark = pytest.mark.integration


class CountingTransport:
    """The real RemoteTransport, counting the send attempts per broker."""

    def __init__(self, inner: RemoteTransport) -> None:
        self.inner = inner
        self.attempts: Counter[str] = Counter()
        self.broker_name = inner.broker_name

    def topic_queues(self, topic: str) -> list[MessageQueue]:
        return self.inner.topic_queues(topic)

    def send(self, group: str, queue: MessageQueue, messages: Sequence[Message]) -> SendResult:
        self.attempts[queue.broker_name] += 1
        return self.inner.send(group, queue, messages)


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    c = RemotingClient()
    yield c
    c.close()


def _send(producer: Producer, n: int, prefix: str = "m") -> tuple[Counter[str], int]:
    """Send ``n`` messages (bodies ``prefix<i>``); (stored per broker, failures)."""
    stored: Counter[str] = Counter()
    failed = 0
    for i in range(n):
        try:
            body = f"{prefix}{i}".encode()
            stored[producer.send(Message("Orders", body)).queue.broker_name] += 1
        except TransportError:
            failed += 1
    return stored, failed


@pytest.mark.parametrize("fault_tolerance", [False, True])
def test_sends_spread_over_both_brokers_and_skip_a_killed_one(
    tmp_path: Path, client: RemotingClient, fault_tolerance: bool
):
    with two_brokers(tmp_path, client, "Orders") as (ns, _, _, pb):
        remote = RemoteTransport(ns)
        transport = CountingTransport(remote)
        producer = Producer("pg", transport, send_latency_fault_enable=fault_tolerance)  # type: ignore[arg-type]
        with producer:
            stored, failed = _send(producer, 100)
            assert failed == 0 and sum(stored.values()) == 100
            # round-robin; a slow send (>= 550 ms on a loaded machine) may rightly skip a
            # broker for a while with fault tolerance, a timed-out one retries elsewhere
            assert min(stored["broker-a"], stored["broker-b"]) >= 30
            pb.kill()
            pb.wait()
            transport.attempts.clear()
            start = time.monotonic()
            stored, failed = _send(producer, 100)
            elapsed = time.monotonic() - start
        remote.close()
        assert failed == 0 and stored == Counter({"broker-a": 100})  # retried on broker-a
        print(f"fault tolerance {fault_tolerance}: {dict(transport.attempts)}, {elapsed:.2f} s")
        if fault_tolerance:
            assert transport.attempts["broker-b"] <= 1  # the failure opens a 600 s window
        else:
            assert transport.attempts["broker-b"] >= 30  # round-robin keeps landing on it


class _CountingGroup:
    """Push consumer group ``cg`` of topic ``Orders`` through the name server ``ns``,
    from the first offset, counting every body it is given (``seen``); not started.
    ``changes``: ConsumerConfig fields besides ``suspend_ms`` = 200."""

    def __init__(self, ns: str, **changes: int) -> None:
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        cfg = dataclasses.replace(
            ConsumerConfig(),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            suspend_ms=200,
            **changes,
        )
        self.transport = RemoteTransport(ns)
        self.consumer = PushConsumer("cg", self.transport, cfg)
        self.consumer.subscribe("Orders")
        self.consumer.register_message_listener(self._on_msgs)

    def _on_msgs(self, msgs, ctx):  # type: ignore[no-untyped-def]
        with self._lock:
            self.seen.update(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def close(self) -> None:
        self.consumer.shutdown()
        self.transport.close()


def test_a_push_group_consumes_every_message_of_both_brokers(
    tmp_path: Path, client: RemotingClient
):
    with two_brokers(tmp_path, client, "Orders") as (ns, _, _, _):
        remote = RemoteTransport(ns)
        with Producer("pg", remote) as producer:
            stored, failed = _send(producer, 100)
        assert failed == 0 and set(stored) == {"broker-a", "broker-b"}
        group = _CountingGroup(ns, rebalance_interval_ms=1000)
        group.consumer.start()
        try:
            wait_for(lambda: len(group.seen) == 100, timeout_s=20)
        finally:
            group.close()
            remote.close()
        assert max(group.seen.values()) == 1


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_killed_broker_is_skipped_until_its_penalty_ends_then_used_again(
    tmp_path: Path, client: RemotingClient
):
    from mqstore.client.fault import FaultStrategy

    now = [0.0]
    port_b = str(_free_port())
    b_args = ("--port", port_b)  # the same address when it comes back
    with (
        namesrv(expiry_s=60.0) as (_, ns),
        broker(tmp_path / "a", "broker-a", ns) as (_, a),
    ):
        create_topic(client, a, "Orders", 4)
        remote = RemoteTransport(ns)
        producer = Producer("pg", remote, send_latency_fault_enable=True)
        producer.faults = FaultStrategy(True, clock=lambda: now[0])
        with producer:
            with broker(tmp_path / "b", "broker-b", ns, *b_args) as (pb, b):
                create_topic(client, b, "Orders", 4)
                wait_for(lambda: route_brokers(client, ns, "Orders") == ["broker-a", "broker-b"])
                assert set(_send(producer, 20)[0]) == {"broker-a", "broker-b"}
                pb.kill()
                pb.wait()
            stored, failed = _send(producer, 40)
            assert failed == 0 and set(stored) == {"broker-a"}
            assert not producer.faults.available("broker-b")
            with broker(tmp_path / "b", "broker-b", ns, *b_args):
                wait_for(lambda: route_brokers(client, ns, "Orders") == ["broker-a", "broker-b"])
                stored, failed = _send(producer, 40)
                assert set(stored) == {"broker-a"}  # still inside the 600 s window
                now[0] += 600.0
                stored, failed = _send(producer, 40)
                assert failed == 0 and stored["broker-b"] >= 10  # back in the rotation
        remote.close()


def test_a_push_group_started_before_any_broker_registered_consumes_once_one_does(
    tmp_path: Path, client: RemotingClient
):
    """Built and started while the name server knows no broker (a broker process that
    is listening but has not registered yet is the same): no error reaches the caller,
    and the group finds the broker through the route poll once it registers."""
    with namesrv(expiry_s=60.0) as (_, ns):
        group = _CountingGroup(
            ns,
            rebalance_interval_ms=500,
            poll_name_server_interval_ms=300,
            heartbeat_interval_ms=500,  # the broker lists the group from its first beat
        )
        try:
            group.consumer.start()
            with broker(tmp_path / "a", "broker-a", ns) as (_, a):
                create_topic(client, a, "Orders", 4)
                wait_for(lambda: route_brokers(client, ns, "Orders") == ["broker-a"])
                remote = RemoteTransport(ns)
                with Producer("pg", remote) as producer:
                    stored, failed = _send(producer, 20)
                remote.close()
                assert failed == 0 and stored == Counter({"broker-a": 20})
                wait_for(lambda: len(group.seen) == 20, timeout_s=20)
        finally:
            group.close()


def test_a_push_group_keeps_consuming_when_a_broker_dies_and_returns(
    tmp_path: Path, client: RemotingClient
):
    def sent_on(stored: Counter[str], name: str) -> bool:
        return stored[name] > 0

    port_b = str(_free_port())
    with (
        namesrv(expiry_s=60.0) as (_, ns),
        broker(tmp_path / "a", "broker-a", ns) as (_, a),
    ):
        create_topic(client, a, "Orders", 4)
        remote = RemoteTransport(ns)
        group = _CountingGroup(
            ns,
            rebalance_interval_ms=500,
            poll_name_server_interval_ms=300,
            heartbeat_interval_ms=500,
            persist_offset_interval_ms=200,
        )
        c, seen = group.consumer, group.seen
        try:
            with Producer("pg", remote) as producer:
                with broker(tmp_path / "b", "broker-b", ns, "--port", port_b) as (pb, b):
                    create_topic(client, b, "Orders", 4)
                    wait_for(
                        lambda: route_brokers(client, ns, "Orders") == ["broker-a", "broker-b"]
                    )
                    c.start()
                    stored, _ = _send(producer, 40)
                    assert sent_on(stored, "broker-b")
                    wait_for(lambda: len(seen) == 40, timeout_s=20)
                    pb.kill()
                    pb.wait()
                # the route poll sees broker-b gone and the group drops its queues
                wait_for(lambda: {q.broker_name for q in c.owned()} == {"broker-a"}, 20)
                stored, failed = _send(producer, 40, "dead-b-")
                assert failed == 0 and stored == Counter({"broker-a": 40})
                wait_for(lambda: len(seen) == 80, timeout_s=20)
                with broker(tmp_path / "b", "broker-b", ns, "--port", port_b):
                    wait_for(
                        lambda: route_brokers(client, ns, "Orders") == ["broker-a", "broker-b"]
                    )
                    wait_for(lambda: any(q.broker_name == "broker-b" for q in c.owned()), 20)
                    stored = Counter()
                    for r in range(50):  # until the producer reaches broker-b again
                        stored += _send(producer, 10, f"back-{r}-")[0]
                        if sent_on(stored, "broker-b"):
                            break
                    assert sent_on(stored, "broker-b")
                    total = 80 + sum(stored.values())
                    wait_for(lambda: len(seen) == total, timeout_s=20)
        finally:
            group.close()
            remote.close()
