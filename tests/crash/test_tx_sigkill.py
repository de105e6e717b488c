"""SIGKILL the broker while transactional messages are between half and commit: after
recovery and check-back, every committed message is delivered and no rolled-back one is.

A producer thread sends transactional messages to a ``mqstore broker`` process over TCP,
with the Java client's flow (half message, local transaction, END_TRANSACTION oneway).
The local transaction decides by the message's number (even: commit, odd: rollback)
and records the decision in a dict, the application's database; every third one answers
UNKNOW, so it stays a half message until checked back. The broker is SIGKILLed after a
random number of sends, in the middle of that stream. A second broker process opens
the same store (recovery), and a new producer of the group answers its check-backs from
the database (a message the database does not know, one whose send never came back, is
rolled back). Then, with the broker stopped, the store must hold: every committed number
in the topic (duplicates allowed: a commit and its check may both land, as in RocketMQ),
no rolled-back or unknown one, and consume queues and index consistent with the
CommitLog (``tests.cq_consistency``).
"""

from __future__ import annotations

import random
import signal
import threading
from pathlib import Path

import pytest

from mqstore import Message, MessageStore
from mqstore.client.remote import RemoteTransport
from mqstore.client.transaction_producer import LocalTransactionState, TransactionProducer
from mqstore.commitlog import format as fmt
from mqstore.transaction import HALF_TOPIC, OP_TOPIC
from tests.cq_consistency import check_cq_consistency
from tests.helpers import TEST_DEFAULTS, cli_process, store_config, until

pytestmark = [pytest.mark.crash, pytest.mark.integration]

TOPIC = "TxCrash"
GROUP = "P_tx_crash"
FAST_CHECK = ["--transaction-timeout-ms", "0", "--transaction-check-interval-ms", "300"]
SLOW_CHECK = ["--transaction-check-interval-ms", "3600000"]
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE


GEOMETRY = [
    "--file-size", str(TEST_DEFAULTS["commitlog_file_size"]),
    "--cq-file-size", str(TEST_DEFAULTS["mapped_file_size_consume_queue"]),
    "--index-slots", str(TEST_DEFAULTS["max_hash_slot_num"]),
    "--index-num", str(TEST_DEFAULTS["max_index_num"]),
]  # fmt: skip
"""The harness store's file sizes (``tests.helpers.store_config``), so the checks after
the run read the store the broker wrote with the same geometry."""


def _broker(root: Path, check: list[str]) -> list[str]:
    return ["broker", "--store", str(root), "--port", "0", *GEOMETRY, *check]


def _number(body: bytes) -> int:
    return int(body.split(b"-")[1])


class Application:
    """The producer side: its database of local decisions, and a sending thread."""

    def __init__(self) -> None:
        self.decided: dict[int, LocalTransactionState] = {}
        self.acked: list[int] = []
        self.lock = threading.Lock()

    def execute(self, msg: Message, arg: object) -> LocalTransactionState:
        n = _number(bytes(msg.body))
        state = COMMIT if n % 2 == 0 else ROLLBACK
        with self.lock:
            self.decided[n] = state
        return LocalTransactionState.UNKNOW if n % 3 == 0 else state

    def check(self, rec: fmt.MessageRecord) -> LocalTransactionState:
        with self.lock:
            return self.decided.get(_number(rec.body), ROLLBACK)

    def send_until_error(self, producer: TransactionProducer, limit: int) -> None:
        for n in range(limit):
            try:
                producer.send_in_transaction(Message(TOPIC, b"tx-%d" % n, tags="tx"))
            except Exception:  # the broker died under the send
                return
            with self.lock:
                self.acked.append(n)


def _log(root: Path) -> list[fmt.MessageRecord]:
    """The records in the CommitLog files as they are now (read beside the broker)."""
    out: list[fmt.MessageRecord] = []
    for path in sorted((root / "commitlog").iterdir()):
        buf = path.read_bytes()
        pos = 0
        while isinstance(r := fmt.decode(buf, pos), fmt.Record):
            out.append(r.record)
            pos += r.size
    return out


def _all_settled(root: Path) -> bool:
    """Whether every transaction has an op record naming one of its half records."""
    records = _log(root)
    named = {int(b) for r in records if r.topic == OP_TOPIC for b in r.body.split(b",") if b}
    halves: dict[str, set[int]] = {}
    for r in records:
        if r.topic == HALF_TOPIC:
            halves.setdefault(r.uniq_key or "", set()).add(r.queue_offset)
    return all(offsets & named for offsets in halves.values())


def _stored(tmp_path: Path) -> tuple[list[fmt.MessageRecord], list[int]]:
    """The records and the topic's delivered numbers, the store opened after the run."""
    with MessageStore.open(store_config(tmp_path)) as store:
        records = store.iter_records()
    return records, sorted(_number(r.body) for r in records if r.topic == TOPIC)


def test_sigkill_between_half_and_commit_loses_no_commit_and_delivers_no_rollback(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    app = Application()
    kill_after = random.randrange(5, 40)
    with cli_process(_broker(root, SLOW_CHECK)) as first:
        transport = RemoteTransport(first.address)
        producer = TransactionProducer(GROUP, transport, app.execute, app.check).start()
        sender = threading.Thread(target=app.send_until_error, args=(producer, 400))
        sender.start()
        until(lambda: len(app.acked) >= kill_after, 30, what="sends before the kill")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        sender.join(30)
        producer.shutdown()
        transport.close()
    assert app.decided, "no local transaction ran before the kill"
    with cli_process(_broker(root, FAST_CHECK)) as second:
        transport = RemoteTransport(second.address)
        with TransactionProducer(GROUP, transport, app.execute, app.check):
            until(lambda: _all_settled(root), 60, 0.2, "check-back of every transaction")
        transport.close()
    records, delivered = _stored(tmp_path)
    committed = {n for n, s in app.decided.items() if s is COMMIT}
    assert set(delivered) == committed, (sorted(committed), delivered)
    assert check_cq_consistency(root, store_config(tmp_path)) == []
    assert all(r.sys_flag & fmt.TRANSACTION_MASK == fmt.TRANSACTION_COMMIT_TYPE
               for r in records if r.topic == TOPIC)  # fmt: skip
