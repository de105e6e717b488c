"""Crashes and consume queues / index: SIGKILL mid-load, and lost unflushed queue pages.

1. A producer *process* (four threads, several topics and queues, keys on every
   message, small files so CommitLog, queue and index files roll) is SIGKILLed after a
   random number of acknowledged puts, typically with the dispatcher behind. The store
   is reopened (abnormal recovery re-dispatches) and: every acknowledged message is
   pullable at its queue and findable by key, exactly once; the files pass
   :func:`check_cq_consistency`; new puts continue the queue offsets.
2. In process, a simulated power loss that keeps the CommitLog (flushed under
   SYNC_FLUSH) but drops every consume-queue and index byte never flushed: the
   checkpoint's logics/index timestamps must make recovery rebuild all of it.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest

from mqstore import FlushDiskType, Message, MessageStore, StoreConfig
from tests.cq_consistency import check_cq_consistency
from tests.crash.killed import REPO, acks_until_killed
from tests.helpers import pull_all

pytestmark = pytest.mark.crash

SIZES = {
    "commitlog_file_size": 64 * 1024,
    "mapped_file_size_consume_queue": 50 * 20,
    "max_hash_slot_num": 64,
    "max_index_num": 200,
    "flush_interval_consume_queue_ms": 50,
    "flush_consume_queue_thorough_interval_ms": 300,
}
TOPICS, QUEUES = 3, 4

PRODUCER = (
    r"""
import json, os, sys, threading
from mqstore import FlushDiskType, Message, MessageStore, StoreConfig
root, mode, sizes = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
store = MessageStore.open(StoreConfig(root_dir=root, flush_disk_type=FlushDiskType[mode], **sizes))
out = sys.stdout.fileno()
os.write(out, b"open\n")
def run(tid):
    seq = 0
    while True:
        topic, qid = f"T{(tid + seq) % %(topics)d}", seq % %(queues)d
        body = b"%%d-%%d|" %% (tid, seq) + os.urandom(seq %% 200)
        r = store.put_message(Message(topic=topic, body=body, tags=f"Tag{seq % 4}",
                                      keys=[f"k{tid}-{seq}"], queue_id=qid))
        if r.status.name == "PUT_OK":
            os.write(out, f"{tid} {seq} {topic} {qid} {r.queue_offset}\n".encode())
        seq += 1
for t in range(4):
    threading.Thread(target=run, args=(t,), daemon=True).start()
threading.Event().wait()
""".replace("%(topics)d", str(TOPICS))
    .replace("%(queues)d", str(QUEUES))
    .replace("%%", "%")
)


def config(root: Path, mode: str) -> StoreConfig:
    return StoreConfig(root_dir=root, flush_disk_type=FlushDiskType[mode], **SIZES)


def run_and_kill(root: Path, mode: str, acks: int) -> list[tuple[int, int, str, int, int]]:
    """Start the producer, SIGKILL it after ``acks`` acknowledgements, return them all."""
    argv = [sys.executable, "-c", PRODUCER, str(root), mode, json.dumps(SIZES)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return [
        (int(tid), int(seq), topic.decode(), int(qid), int(qoff))
        for tid, seq, topic, qid, qoff in acks_until_killed(
            argv, ready=b"open\n", acks=acks, timeout_s=60, env=env
        )
    ]


@pytest.mark.parametrize(
    ("mode", "acks"),
    [("ASYNC_FLUSH", 400), ("ASYNC_FLUSH", 3000), ("SYNC_FLUSH", 300)],
)
def test_sigkill_mid_load_then_reopen_keeps_queues_and_index_consistent(
    tmp_path: Path, mode: str, acks: int
):
    root = tmp_path / "s"
    acked = run_and_kill(root, mode, acks + random.randrange(acks // 2))
    cfg = config(root, mode)
    with MessageStore.open(cfg) as s:
        assert not s.last_exit_ok
        pulled = {
            (t, q): {m.queue_offset: m.body for m in pull_all(s, f"T{t}", q)}
            for t in range(TOPICS)
            for q in range(QUEUES)
        }
        for tid, seq, topic, qid, qoff in acked:
            body = pulled[int(topic[1:]), qid].get(qoff)
            assert body is not None and body.startswith(b"%d-%d|" % (tid, seq)), (
                tid,
                seq,
                topic,
                qid,
                qoff,
            )
        for tid, seq, topic, _qid, qoff in random.sample(acked, min(100, len(acked))):
            found = s.query_by_key(topic, f"k{tid}-{seq}").messages
            assert [m.queue_offset for m in found] == [qoff]
        r = s.put_message(Message(topic="T0", body=b"after", queue_id=0))
        assert r.queue_offset == len(pulled[0, 0])
        assert s.wait_dispatched(60)
    assert check_cq_consistency(root, cfg) == []


def drop_unflushed(paths: dict[Path, int]) -> None:
    """Zero every byte past each file's flushed position (what a power loss drops)."""
    for path, flushed in paths.items():
        if not path.exists():
            continue
        data = bytearray(path.read_bytes())
        data[flushed:] = bytes(len(data) - flushed)
        path.write_bytes(bytes(data))


def test_queue_and_index_pages_lost_in_a_power_failure_are_rebuilt(tmp_path: Path):
    cfg = StoreConfig(
        root_dir=tmp_path / "s",
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        **{**SIZES, "flush_interval_consume_queue_ms": 60_000, "max_index_num": 40},
    )
    s = MessageStore.open(cfg)
    for i in range(150):
        assert s.put_message(
            Message(topic="T", body=b"m%d" % i, keys=[f"k{i}"], queue_id=i % 2)
        ).status.ok
    assert s.wait_dispatched(60)
    assert s.logics.flusher is not None
    s.logics.flusher.flush_once(thorough=True)  # queues durable up to here, checkpoint too
    for i in range(150, 300):
        assert s.put_message(
            Message(topic="T", body=b"m%d" % i, keys=[f"k{i}"], queue_id=i % 2)
        ).status.ok
    assert s.wait_dispatched(60)
    flushed = {mf.path: mf.flushed_position for cq in s.queues.all() for mf in cq.segments.files}
    assert s.index is not None
    index_files = [f.path for f in s.index.files]
    s.abandon()
    drop_unflushed(flushed)
    for path in index_files[-1:]:  # the open index file was never flushed
        drop_unflushed({path: 0})
    with MessageStore.open(cfg) as s:
        assert s.max_offset_in_queue("T", 0) == s.max_offset_in_queue("T", 1) == 150
        for i in (0, 149, 150, 299):
            assert [m.body for m in s.query_by_key("T", f"k{i}").messages] == [b"m%d" % i]
    assert check_cq_consistency(cfg.root, cfg) == []


@pytest.mark.parametrize(
    ("byte", "value"),
    [(10, 1), (19, 0x55)],  # a size still > 0 but wrong; a wrong tags code
    ids=["size", "tags"],
)
def test_a_torn_queue_unit_before_the_replay_start_is_cut_and_rebuilt(
    tmp_path: Path, byte: int, value: int
):
    cfg = StoreConfig(root_dir=tmp_path / "s", commitlog_file_size=4096, **{
        k: v for k, v in SIZES.items() if k != "commitlog_file_size"})  # fmt: skip
    s = MessageStore.open(cfg)
    for i in range(40):
        s.put_message(Message(topic="T", body=b"q0-%d" % i, tags="TagA", queue_id=0))
    for i in range(30):  # more files after queue 0's last record
        s.put_message(Message(topic="T", body=b"q1-%d" % i, queue_id=1))
    assert s.wait_dispatched(60)
    cq = s.consume_queue("T", 0)
    assert cq is not None
    last = cq.unit_at(39)
    assert last is not None and last[0] < s.segments.files[-1].file_from_offset
    # A checkpoint that trusts everything before the last file: replay starts there.
    s.checkpoint.physic_msg_timestamp = s.checkpoint.logics_msg_timestamp = 1 << 50
    s.checkpoint.flush()
    s.abandon()
    path = tmp_path / "s" / "consumequeue" / "T" / "0" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[39 * 20 + byte] = value  # part of the unit's sectors never reached the disk
    path.write_bytes(bytes(data))
    with MessageStore.open(cfg) as s:
        assert s.recovery is not None
        assert s.recovery.start_offset == s.segments.files[-1].file_from_offset
        assert s.max_offset_in_queue("T", 0) == 40
        cq = s.consume_queue("T", 0)
        assert cq is not None and cq.unit_at(39) == last
        assert [m.body for m in s.get_message("g", "T", 0, 39, 1, "TagA").messages] == [b"q0-39"]
    assert check_cq_consistency(cfg.root, cfg) == []
