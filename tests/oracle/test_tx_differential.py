"""Transactional messages, differential against the real RocketMQ 4.9.8 and 5.3.3 brokers:
the same Java TransactionMQProducer program (tests/oracle/java/TxCheck.java: commit,
rollback, and two UNKNOWs settled by check-back, one to commit and one to roll back) runs
against a real broker and against ``mqstore broker`` at once; the delivered bodies and the
bodies checked back must be equal. Then the half and op records each broker left on disk
are read with mqstore's record reader and compared (docs/transactions.md §2): the half
records' fields and property names, which transactions op records settled, the op records'
properties and sysflag. The check is shortened on every broker alike: transactionTimeOut
8 s (past 5.3.3's 3 s op batching, so an ended transaction is never checked) and
transactionCheckInterval 3 s. Skipped without Java or the oracles.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

from mqstore import Message
from mqstore.client.remote import RemoteTransport
from mqstore.client.transaction_producer import LocalTransactionState, TransactionProducer
from mqstore.commitlog import format as fmt
from mqstore.transaction import HALF_TOPIC, OP_TOPIC
from tests.conftest import SHARED
from tests.helpers import cli_process
from tests.oracle.conftest import Side
from tests.oracle.harness import Fleet, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ORACLE_533 = SHARED / "oracles" / "rocketmq-5.3.3"
REAL_CONF = ("transactionTimeOut=8000", "transactionCheckInterval=3000")
MQ_FLAGS = ("--transaction-timeout-ms", "8000", "--transaction-check-interval-ms", "3000")
WAIT_MS = "60000"


class Outcome(NamedTuple):
    """What the Java program saw, and the half / op records the broker wrote."""

    consumed: str
    checked: str
    halves: list[fmt.MessageRecord]
    ops: list[fmt.MessageRecord]


def _records(store: Path, topic: str) -> list[fmt.MessageRecord]:
    """The records of ``topic`` in a broker's CommitLog files, read beside the broker."""
    out: list[fmt.MessageRecord] = []
    for path in sorted((store / "commitlog").iterdir()):
        buf = path.read_bytes()
        pos = 0
        while isinstance(r := fmt.decode(buf, pos), fmt.Record):
            if r.record.topic == topic:
                out.append(r.record)
            pos += r.size
    return out


def _run(fleet: Fleet, side: Side, unique: str) -> Outcome:
    broker = side.brokers[0]
    create_topic(broker.address, unique)
    ns, store = side.ns, broker.log.parent / "store"
    ran = fleet.java("TxCheck", ns, unique, f"P_{unique}", WAIT_MS, timeout_s=150)
    assert ran.code == 0, ran.err[-2000:]
    (consumed,) = ran.lines("consumed ")
    (checked,) = ran.lines("checked ")
    halves = [r for r in _records(store, HALF_TOPIC) if r.properties["REAL_TOPIC"] == unique]
    return Outcome(consumed, checked, halves, _records(store, OP_TOPIC))


@pytest.fixture(scope="module")
def real49(fleet: Fleet) -> Side:
    ns = fleet.real_namesrv()
    return Side("real 4.9.8", ns, (fleet.real_broker("real-tx", ns.address, *REAL_CONF),))


@pytest.fixture(scope="module")
def mq49(fleet: Fleet) -> Side:
    ns = fleet.mq_namesrv()
    flags = (*MQ_FLAGS, "--property-format", "4.9")
    return Side("mqstore", ns, (fleet.mq_broker("mq-tx", ns.address, *flags),))


@pytest.fixture(scope="module")
def mq5(fleet: Fleet) -> Side:
    ns = fleet.mq_namesrv()
    return Side("mqstore", ns, (fleet.mq_broker("mq-tx5", ns.address, *MQ_FLAGS),))


def _start_533(fleet: Fleet, store: Path | None = None) -> Side:
    """A real 5.3.3 name server and broker (``bin/mkconf``'s small files) on ``store``
    (default: ``store`` beside the broker's log, where :func:`_run` reads it)."""
    ns, broker, _ = fleet.real533("broker-a", *REAL_CONF, store=store)
    return Side("real 5.3.3", ns, (broker,))


@pytest.fixture(scope="module")
def real533(fleet: Fleet) -> Side:
    return _start_533(fleet)


def _checked(line: str) -> dict[str, list[int]]:
    """``checked check-1=1/2,...`` as body -> the TRANSACTION_CHECK_TIMES values seen."""
    items = line.removeprefix("checked ").split(",")
    return {b: [int(t) for t in ts.split("/")] for b, ts in (i.split("=") for i in items if i)}


def _same_checks_and_deliveries(real: Outcome, ours: Outcome) -> None:
    """The same bodies delivered and checked back. How many checks came before the
    producer could answer (the count in TRANSACTION_CHECK_TIMES) is not compared: a
    check-back reaches only a producer the broker has heard a heartbeat from, and when
    that heartbeat lands among the check rounds is the JVM's timing, on either broker."""
    assert real.consumed == "consumed check-1,commit-1"  # the oracle's answer
    assert ours.consumed == real.consumed
    real_checks, our_checks = _checked(real.checked), _checked(ours.checked)
    assert sorted(real_checks) == ["check-1", "checkroll-1"]
    assert sorted(our_checks) == sorted(real_checks)
    assert all(t >= 1 for ts in our_checks.values() for t in ts)


def _layout(records: list[fmt.MessageRecord]) -> set[tuple[object, ...]]:
    """What must agree of half records, originals and check-back copies alike (how many
    copies there are is timing, see :func:`_same_checks_and_deliveries`): body, queue,
    sysflag, and the property names apart from the ones each broker's ordinary send path
    adds."""
    skip = {"MSG_REGION", "TRACE_ON", "CLUSTER"}
    return {(r.body, r.queue_id, r.sys_flag & fmt.TRANSACTION_MASK,
             tuple(sorted(set(r.properties) - skip))) for r in records}  # fmt: skip


def _settled(out: Outcome) -> set[bytes]:
    """The bodies whose transaction an op record settled (it names one of its halves)."""
    named = {int(o) for r in out.ops for o in r.body.split(b",") if o}
    return {r.body for r in out.halves if r.queue_offset in named}


def _same_records(real: Outcome, ours: Outcome) -> None:
    assert _layout(ours.halves) == _layout(real.halves)
    assert _settled(real) == {b"commit-1", b"rollback-1", b"check-1", b"checkroll-1"}
    assert _settled(ours) == _settled(real)
    assert {r.properties_string for r in ours.ops} == {r.properties_string for r in real.ops}
    assert {r.sys_flag for r in ours.ops} == {r.sys_flag for r in real.ops} == {0}


def _both(fleet: Fleet, real: Side, ours: Side, topic: str) -> tuple[Outcome, Outcome]:
    """The program against both brokers at once (each waits on check rounds)."""
    with ThreadPoolExecutor(2) as pool:
        r, o = pool.submit(_run, fleet, real, topic), pool.submit(_run, fleet, ours, topic)
        return r.result(), o.result()


def test_tx_against_real_498(fleet: Fleet, real49: Side, mq49: Side, unique: str) -> None:
    real, ours = _both(fleet, real49, mq49, unique)
    _same_checks_and_deliveries(real, ours)
    _same_records(real, ours)
    # 4.9.8 writes one op record per outcome, its body the half's queue offset alone
    assert all(r.body.isdigit() for r in real.ops + ours.ops)


def test_tx_against_real_533(fleet: Fleet, real533: Side, mq5: Side, unique: str) -> None:
    real, ours = _both(fleet, real533, mq5, unique)
    _same_checks_and_deliveries(real, ours)
    _same_records(real, ours)
    # 5.3.3 batches op bodies ("0,1,3,"), mqstore writes one per outcome ("4,")
    assert all(r.body.endswith(b",") for r in real.ops + ours.ops)


def _leave_open_transactions(store: Path) -> None:
    """With ``mqstore broker`` (the 5.3.3 oracle's file sizes) on ``store``: one committed,
    one rolled-back and two open transactions of group ``P_take`` in topic ``TAKE``."""

    def execute(msg: Message, arg: object) -> LocalTransactionState:
        body = bytes(msg.body)
        if body.startswith(b"commit"):
            return LocalTransactionState.COMMIT_MESSAGE
        if body.startswith(b"rollback"):
            return LocalTransactionState.ROLLBACK_MESSAGE
        return LocalTransactionState.UNKNOW

    flags = ["--file-size", "8M", "--index-slots", "500", "--index-num", "2000"]
    with cli_process(["broker", "--store", str(store), "--port", "0", *flags]) as broker:
        transport = RemoteTransport(broker.address)
        unknown = lambda rec: LocalTransactionState.UNKNOW  # noqa: E731
        with TransactionProducer("P_take", transport, execute, unknown) as p:
            for body in (b"commit-1", b"rollback-1", b"open-commit", b"open-rollback"):
                p.send_in_transaction(Message("TAKE", body, tags="tx"))
        transport.close()


def test_real_533_takes_over_an_mqstore_store_with_open_transactions(
    fleet: Fleet, tmp_path: Path
) -> None:
    """RocketMQ 5.3.3 started on a store mqstore wrote reads its half and op records:
    it checks back exactly the two open transactions and delivers exactly the committed
    message and the open one its producer commits."""
    store = tmp_path / "b" / "store"
    _leave_open_transactions(store)
    side = _start_533(fleet, store)
    ran = fleet.java("TxTakeover", side.ns, "TAKE", "P_take", WAIT_MS, timeout_s=150)
    assert ran.code == 0, ran.err[-2000:]
    assert ran.lines("consumed ") == ["consumed commit-1,open-commit"]
    assert ran.lines("checked ") == ["checked open-commit,open-rollback"]
