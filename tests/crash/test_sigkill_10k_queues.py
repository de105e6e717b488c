"""SIGKILL during puts over 10,000 queues, then reopen (issue 14).

The store first gets one message in each of 10,000 queues (500 topics of 20) and is
closed cleanly, so the next open takes the queues' summary and reads each queue on
first use. A producer process then opens it and puts round-robin over the same
queues, with a small mapping pool (queues mapped and unmapped all the time) and
small sparse files, and is SIGKILLed after a random number of acknowledged puts,
more than one per queue, typically with the dispatcher behind. Reopened (abnormal
recovery: every queue read, the CommitLog's tail re-dispatched), the store must hold
the first messages and every acknowledged one at its queue offset, and its files
must pass :func:`check_cq_consistency`.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest

from mqstore import GetStatus, Message, MessageStore, StoreConfig
from mqstore.consumequeue.summary import path_for
from tests.cq_consistency import check_cq_consistency
from tests.crash.killed import acks_until_killed

pytestmark = [pytest.mark.crash, pytest.mark.slow]

TOPICS, QUEUES = 500, 20
ALL = TOPICS * QUEUES
SIZES = {
    "commitlog_file_size": 512 * 1024,
    "commitlog_reserve_chunk": 64 * 1024,
    "mapped_file_size_consume_queue": 64 * 20,
    "max_mapped_consume_queue_files": 32,
    "max_hash_slot_num": 1024,
    "max_index_num": 4096,
    "flush_interval_consume_queue_ms": 50,
    "flush_consume_queue_thorough_interval_ms": 300,
}

PRODUCER = r"""
import json, os, sys
from mqstore import Message, MessageStore, StoreConfig
root, sizes, topics, queues = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
store = MessageStore.open(StoreConfig(root_dir=root, **sizes))
out = sys.stdout.fileno()
os.write(out, b"open %d\n" % store.last_exit_ok)
seq = 0
while True:
    q = seq % (topics * queues)
    topic, qid = f"T{q // queues}", q % queues
    r = store.put_message(Message(topic=topic, body=b"%d|" % seq, queue_id=qid))
    if r.status.name == "PUT_OK":
        os.write(out, f"{seq} {topic} {qid} {r.queue_offset}\n".encode())
    seq += 1
"""


def target(q: int) -> tuple[str, int]:
    return f"T{q // QUEUES}", q % QUEUES


def fill_and_close(cfg: StoreConfig) -> None:
    """One message ``first|q`` in each queue, then a clean close (summary written)."""
    with MessageStore.open(cfg) as s:
        for q in range(ALL):
            topic, qid = target(q)
            assert s.put_message(
                Message(topic=topic, body=b"first|%d" % q, queue_id=qid)
            ).status.stored
        assert s.wait_dispatched(120)
    assert path_for(cfg.consume_queue_path).exists()


def run_and_kill(root: Path, acks: int) -> list[tuple[int, str, int, int]]:
    """Start the producer, SIGKILL it after ``acks`` acknowledgements, return them all."""
    argv = [sys.executable, "-c", PRODUCER, str(root), json.dumps(SIZES), str(TOPICS), str(QUEUES)]
    return [
        (int(seq), topic.decode(), int(qid), int(qoff))
        for seq, topic, qid, qoff in acks_until_killed(
            argv, ready=b"open 1\n", acks=acks, timeout_s=180
        )
    ]


def test_sigkill_during_puts_over_10000_queues_after_a_clean_open_is_consistent(
    tmp_path: Path,
):
    root = tmp_path / "s"
    cfg = StoreConfig(root_dir=root, **SIZES)  # type: ignore[arg-type]
    fill_and_close(cfg)
    acked = run_and_kill(root, ALL + 1000 + random.randrange(4000))
    assert len({(t, q) for _s, t, q, _o in acked}) == ALL  # every queue written again
    with MessageStore.open(cfg) as s:
        assert not s.last_exit_ok
        for q in range(ALL):
            topic, qid = target(q)
            got = s.get_message("g", topic, qid, 0, 1)
            assert got.status is GetStatus.FOUND, (topic, qid, got.status)
            assert got.messages[0].body == b"first|%d" % q
        for seq, topic, qid, qoff in acked:
            assert qoff >= 1
            got = s.get_message("g", topic, qid, qoff, 1)
            assert got.status is GetStatus.FOUND, (seq, topic, qid, qoff, got.status)
            assert got.messages[0].body == b"%d|" % seq
    assert check_cq_consistency(root, cfg) == []
    assert os.path.isdir(cfg.consume_queue_path)
