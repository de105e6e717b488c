"""Transactional messages end to end over the broker: half records invisible to consumers,
END_TRANSACTION commit / rollback with their op records, check-back to a live producer,
embedded (InProcessTransport) and over TCP (RemoteTransport), with the project's
TransactionProducer; record layouts as RocketMQ 5.3.3 / 4.9.8 leave them on disk
(docs/transactions.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.inprocess import InProcessTransport
from mqstore.broker.server import BrokerServer
from mqstore.client.remote import RemoteTransport
from mqstore.client.transaction_producer import LocalTransactionState, TransactionProducer
from mqstore.commitlog import format as fmt
from mqstore.message import Message
from mqstore.message_store import MessageStore
from mqstore.transaction import CHECK_GROUP, CHECK_MAX_TOPIC, HALF_TOPIC, OP_TOPIC
from tests.helpers import make_store, past_this_millisecond, until

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
MANUAL = BrokerConfig(transaction_timeout_ms=0, transaction_check_interval_ms=3_600_000)
"""Check-back only when a test runs a round itself (``core.transactions.check()``): a
round that ran again before the producer's answer came back would check the copy twice."""


def _by_body(msg: Message, arg: object) -> LocalTransactionState:
    body = bytes(msg.body)
    if body.startswith(b"commit"):
        return COMMIT
    return ROLLBACK if body.startswith(b"rollback") else UNKNOW


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    with make_store(tmp_path) as s:
        yield s


def _core(store: MessageStore, config: BrokerConfig = MANUAL) -> BrokerCore:
    core = BrokerCore(store, config)
    core.start()
    return core


def _delivered(store: MessageStore, topic: str) -> list[bytes]:
    store.wait_dispatched(60)
    out: list[bytes] = []
    for q in store.queues.queue_ids(topic):
        g = store.get_message("g", topic, q, 0, 1000, "*")
        out += [bytes(m.body) for m in g.messages]
    return sorted(out)


def _records(store: MessageStore, topic: str) -> list[fmt.MessageRecord]:
    return [r for r in store.iter_records() if r.topic == topic]


def _check_round(core: BrokerCore) -> int:
    """One check-back round over what is stored so far (dispatched, and older than now)."""
    core.store.wait_dispatched(60)
    past_this_millisecond()  # a record stored in this millisecond waits for the next round
    return core.transactions.check()


def _wait(cond: Callable[[], bool], timeout: float = 30.0) -> None:
    until(cond, timeout, 0.05)


def test_commit_delivers_and_rollback_drops_embedded(store: MessageStore) -> None:
    core = _core(store, BrokerConfig())
    try:
        with TransactionProducer("P_tx", InProcessTransport(core), _by_body, lambda r: UNKNOW) as p:
            results = [p.send_in_transaction(Message("T", b, tags="tx"))
                       for b in (b"commit-1", b"rollback-1", b"commit-2")]  # fmt: skip
        assert [r.local_state for r in results] == [COMMIT, ROLLBACK, COMMIT]
        assert _delivered(store, "T") == [b"commit-1", b"commit-2"]
    finally:
        core.shutdown()


def test_half_record_layout_matches_rocketmq(store: MessageStore) -> None:
    core = _core(store, BrokerConfig())
    try:
        with TransactionProducer("P_tx", InProcessTransport(core), _by_body, lambda r: UNKNOW) as p:
            sent = p.send_in_transaction(Message("T", b"commit-1", tags="tx")).send
        half, final = _records(store, HALF_TOPIC)[0], _records(store, "T")[0]
        assert (half.queue_id, half.sys_flag & fmt.TRANSACTION_MASK) == (0, 0)
        props = half.properties
        assert props["REAL_TOPIC"] == "T" and props["REAL_QID"] == str(sent.queue.queue_id)
        assert props["TRAN_MSG"] == "true" and props["PGROUP"] == "P_tx"
        assert props["__transactionId__"] == props["UNIQ_KEY"] == sent.msg_id
        assert final.sys_flag & fmt.TRANSACTION_MASK == fmt.TRANSACTION_COMMIT_TYPE
        assert final.prepared_transaction_offset == half.physical_offset
        assert final.properties_string == half.properties_string  # REAL_* and TRAN_MSG kept
        (op,) = _records(store, OP_TOPIC)
        assert (op.tags, op.body, op.properties_string) == (
            "d",
            b"0,",
            "WAIT\x01true\x02TAGS\x01d\x02",
        )
        assert op.born_host == op.store_host
    finally:
        core.shutdown()


def test_op_record_in_49_format(tmp_path: Path) -> None:
    with make_store(tmp_path, property_format="4.9") as store:
        core = _core(store, BrokerConfig())
        try:
            with TransactionProducer(
                "P", InProcessTransport(core), _by_body, lambda r: UNKNOW
            ) as p:
                p.send_in_transaction(Message("T", b"rollback", tags="tx"))
            (op,) = _records(store, OP_TOPIC)
            assert (op.body, op.properties_string) == (b"0", "WAIT\x01true\x02TAGS\x01d")
            (half,) = _records(store, HALF_TOPIC)
            assert "__transactionId__" not in half.properties
            assert half.properties["WAIT"] == "true"
        finally:
            core.shutdown()


def test_unknown_is_resolved_by_check_back_embedded(store: MessageStore) -> None:
    core = _core(store)
    checked: list[fmt.MessageRecord] = []

    def check(rec: fmt.MessageRecord) -> LocalTransactionState:
        checked.append(rec)
        return COMMIT if rec.body == b"check-commit" else ROLLBACK

    try:
        with TransactionProducer("P_tx", InProcessTransport(core), _by_body, check) as p:
            p.send_in_transaction(Message("T", b"check-commit", tags="tx"))
            p.send_in_transaction(Message("T", b"check-rollback", tags="tx"))
            assert _check_round(core) == 2
            _wait(lambda: _delivered(store, "T") == [b"check-commit"] and len(checked) == 2)
            _wait(lambda: len(_records(store, OP_TOPIC)) == 2)
        assert {r.topic for r in checked} == {"T"}  # the record names its real topic
        assert {r.properties["TRANSACTION_CHECK_TIMES"] for r in checked} == {"1"}
        assert core.offsets.query(CHECK_GROUP, HALF_TOPIC, 0) is not None
    finally:
        core.shutdown()


def test_check_back_waits_for_transaction_timeout(store: MessageStore) -> None:
    core = _core(store, BrokerConfig(transaction_timeout_ms=60_000,
                                     transaction_check_interval_ms=50))  # fmt: skip
    checked: list[fmt.MessageRecord] = []
    try:
        with TransactionProducer("P", InProcessTransport(core), _by_body,
                                 lambda r: checked.append(r) or COMMIT) as p:  # fmt: skip
            p.send_in_transaction(Message("T", b"open", tags="tx"))
            assert _check_round(core) == 0
        assert checked == [] and _delivered(store, "T") == []
    finally:
        core.shutdown()


def test_immunity_property_delays_the_first_check(store: MessageStore) -> None:
    core = _core(store, BrokerConfig(transaction_timeout_ms=0,
                                     transaction_check_interval_ms=3_600_000))  # fmt: skip
    try:
        with TransactionProducer("P", InProcessTransport(core), _by_body, lambda r: COMMIT) as p:
            msg = Message("T", b"open", tags="tx",
                          properties={"CHECK_IMMUNITY_TIME_IN_SECONDS": "3600"})  # fmt: skip
            p.send_in_transaction(msg)
            assert _check_round(core) == 0
        halves = _records(store, HALF_TOPIC)
        assert len(halves) == 2  # re-put once, naming the original's queue offset
        assert halves[1].properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"
        assert _delivered(store, "T") == []
    finally:
        core.shutdown()


def test_checked_too_often_goes_to_check_max_topic(store: MessageStore) -> None:
    core = _core(store, BrokerConfig(transaction_timeout_ms=0, transaction_check_max=2,
                                     transaction_check_interval_ms=3_600_000))  # fmt: skip
    try:
        with TransactionProducer("P", InProcessTransport(core), _by_body, lambda r: UNKNOW) as p:
            p.send_in_transaction(Message("T", b"never", tags="tx"))
            assert [_check_round(core) for _ in range(3)] == [1, 1, 0]
        (gone,) = _records(store, CHECK_MAX_TOPIC)
        assert gone.properties["TRANSACTION_CHECK_TIMES"] == "2" and gone.body == b"never"
        assert core.transactions.check() == 0 and _delivered(store, "T") == []
    finally:
        core.shutdown()


def test_end_transaction_refuses_wrong_header(store: MessageStore) -> None:
    from mqstore.transaction import EndTransaction, TransactionState

    core = _core(store, BrokerConfig())
    try:
        with TransactionProducer("P", InProcessTransport(core), lambda m, a: UNKNOW,
                                 lambda r: UNKNOW) as p:  # fmt: skip
            sent = p.send_in_transaction(Message("T", b"x", tags="tx")).send
        phys = int(sent.offset_msg_id[-16:], 16)
        end = core.transactions.end
        wrong = [
            (EndTransaction("Q", sent.queue_offset, phys, TransactionState.COMMIT),
             "The producer group wrong"),
            (EndTransaction("P", sent.queue_offset + 1, phys, TransactionState.COMMIT),
             "The transaction state table offset wrong"),
            (EndTransaction("P", sent.queue_offset, phys + 1, TransactionState.COMMIT),
             "Find prepared transaction message failed"),
        ]  # fmt: skip
        assert [end(h).remark for h, _ in wrong] == [r for _, r in wrong]
        assert _delivered(store, "T") == []
    finally:
        core.shutdown()


def test_transactions_over_tcp_with_check_back(store: MessageStore) -> None:
    core = _core(store)
    server = BrokerServer(core, host="127.0.0.1", port=0)
    server.start()
    transport = RemoteTransport(server.address)
    checked = threading.Event()

    def check(rec: fmt.MessageRecord) -> LocalTransactionState:
        checked.set()
        return COMMIT

    try:
        with TransactionProducer("P_tcp", transport, _by_body, check) as p:
            for body in (b"commit-1", b"rollback-1", b"check-1"):
                p.send_in_transaction(Message("T", body, tags="tx"))
            _wait(lambda: len(_records(store, OP_TOPIC)) == 2)  # END_TRANSACTION is oneway
            assert _check_round(core) == 1
            _wait(lambda: _delivered(store, "T") == [b"check-1", b"commit-1"])
        assert checked.is_set()
        assert len(_records(store, OP_TOPIC)) == 3
    finally:
        transport.close()
        server.stop()
        core.shutdown()
