"""Transactional messages with the official Python 5.x client (``rocketmq-python-client``):
a committed half message is delivered, a rolled-back one never; an undecided one is
checked back over the producer's Telemetry stream (RecoverOrphanedTransactionCommand) and
the checker's answer settles it (mqstore.grpc.transactions)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

from mqstore import MessageStore
from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.topics import TopicConfig
from mqstore.grpc import GrpcConfig, GrpcEndpoint
from mqstore.transaction import HALF_TOPIC, OP_TOPIC
from tests.grpc.conftest import TOPIC, client_config, consuming, message, quick_service
from tests.helpers import past_this_millisecond, until

MANUAL = BrokerConfig(transaction_timeout_ms=0, transaction_check_interval_ms=3_600_000)
"""Check-back rounds only when the test runs one (``core.transactions.check()``)."""


@pytest.fixture
def core(store: MessageStore) -> Iterator[BrokerCore]:
    c = BrokerCore(store, MANUAL)
    c.start()
    c.create_topic(TopicConfig(TOPIC, 4, 4, attributes=(("message.type", "TRANSACTION"),)))
    yield c
    c.shutdown()


@pytest.fixture
def endpoint(core: BrokerCore) -> Iterator[GrpcEndpoint]:
    ep = GrpcEndpoint(core, GrpcConfig(port=0, service=quick_service()))
    ep.start()
    yield ep
    ep.stop(grace=0.2)


class Checker:
    """Answers COMMIT for bodies starting ``commit``, else ROLLBACK; records what it saw."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.called = threading.Event()

    def check(self, msg: Any) -> Any:
        from rocketmq import TransactionResolution

        self.seen.append(msg)
        self.called.set()
        body = bytes(msg.body)
        return TransactionResolution.COMMIT if body.startswith(b"commit") else (
            TransactionResolution.ROLLBACK)  # fmt: skip


def _tx_producer(ep: GrpcEndpoint, checker: Checker) -> Any:
    from rocketmq import Producer, TransactionChecker

    class _Adapter(TransactionChecker):
        def check(self, message: Any) -> Any:
            return checker.check(message)

    p = Producer(client_config(ep), (TOPIC,), _Adapter())
    p.startup()
    return p


def _received(ep: GrpcEndpoint, want: int, deadline_s: float = 15.0) -> list[bytes]:
    got: list[bytes] = []
    end = time.monotonic() + deadline_s
    with consuming(ep) as c:
        while len(got) < want and time.monotonic() < end:
            for m in c.receive(16, 15) or []:
                got.append(bytes(m.body))
                c.ack(m)
        for m in c.receive(16, 15) or []:  # nothing more arrives
            got.append(bytes(m.body))
    return sorted(got)


def _send(p: Any, body: bytes) -> Any:
    tx = p.begin_transaction()
    receipt = p.send(message(body, tag="tx"), tx)
    return tx, receipt


def test_commit_is_delivered_and_rollback_is_not(endpoint: GrpcEndpoint) -> None:
    p = _tx_producer(endpoint, Checker())
    try:
        tx1, r1 = _send(p, b"commit-1")
        tx2, _ = _send(p, b"rollback-1")
        tx1.commit()
        tx2.rollback()
    finally:
        p.shutdown()
    assert r1.transaction_id == r1.message_id
    assert _received(endpoint, 1) == [b"commit-1"]


def test_half_message_carries_the_proxys_properties(
    core: BrokerCore, endpoint: GrpcEndpoint
) -> None:
    p = _tx_producer(endpoint, Checker())
    try:
        tx, receipt = _send(p, b"commit-1")
        tx.commit()
    finally:
        p.shutdown()
    (half,) = [r for r in core.store.iter_records() if r.topic == HALF_TOPIC]
    props = half.properties
    assert props["PGROUP"] == TOPIC and props["TRAN_MSG"] == "true"
    assert props["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "0"
    assert props["UNIQ_KEY"] == receipt.message_id and props["REAL_TOPIC"] == TOPIC
    assert [r.body for r in core.store.iter_records() if r.topic == OP_TOPIC] == [b"0,"]


def test_undecided_message_is_checked_back_over_telemetry(
    core: BrokerCore, endpoint: GrpcEndpoint
) -> None:
    checker = Checker()
    p = _tx_producer(endpoint, checker)
    try:
        _send(p, b"commit-later")
        _send(p, b"rollback-later")
        core.store.wait_dispatched(60)
        past_this_millisecond()
        assert core.transactions.check() == 2
        until(
            lambda: len([r for r in core.store.iter_records() if r.topic == OP_TOPIC]) >= 2,
            what="the checker's answers",
        )
    finally:
        p.shutdown()
    assert sorted(bytes(m.body) for m in checker.seen) == [b"commit-later", b"rollback-later"]
    assert {m.topic for m in checker.seen} == {TOPIC}
    assert _received(endpoint, 1) == [b"commit-later"]


def test_end_transaction_of_an_unknown_message_is_invalid_transaction_id(
    endpoint: GrpcEndpoint,
) -> None:
    with grpc.insecure_channel(endpoint.address) as ch:
        req = svc.EndTransactionRequest(message_id="01NOSUCH", transaction_id="01NOSUCH",
                                        resolution=pb.TransactionResolution.COMMIT)  # fmt: skip
        req.topic.name = TOPIC
        r = MessagingServiceStub(ch).EndTransaction(req, timeout=10)
    assert r.status.code == pb.Code.INVALID_TRANSACTION_ID
