"""SIGKILL a producer process at random points; every acknowledged message survives.

Each trial is one *life* of a store directory shared by all trials of a mode: a
producer process (tests/crash/producer.py, four threads, thread 0 in batches) opens
the store, recovering whatever the previous kill left, and puts messages, printing
each PUT_OK. The test kills it with SIGKILL at a random point: a random delay after
spawning (which may land in imports, recovery or the first puts) or after a random
number of acknowledgements. Then, in this process, it reopens the store and checks:

* the log is consistent (``check_consistency``) and ends where the store says;
* every message acknowledged in any life so far is present and intact (body, topic,
  queue, queue offset, UNIQ_KEY), read back through ``look_message_by_offset``;
* every record in the log is a message some producer really sent (nothing corrupt,
  nothing invented), and queue offsets are restored;
* a new write is accepted; the store then closes cleanly for the next life.

A killed process leaves its page cache behind, so under ASYNC_FLUSH too nothing
acknowledged may be lost (power loss is tests/crash/test_power_loss.py's job).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqstore import FlushDiskType, Message, MessageStore, PutStatus, StoreConfig
from mqstore.compression import decompress
from tests.crash.workload import STATS, message_for
from tests.helpers import check_consistency, queue_next_offsets, scan_log, store_config

pytestmark = [pytest.mark.crash, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TRIALS = int(os.environ.get("MQSTORE_SIGKILL_TRIALS", "12"))
FILE_SIZE = 64 * 1024
LARGE_FILE_SIZE = 8 << 20
"""Above 1 MiB and inside one 64 MiB reservation: the segment is one unwritten extent
with the records in dirty pages when the process is killed, the case recovery must read
right (the extent map, see ``mqstore.commitlog.recovery_extents``) on every open of a
default store. (1 GiB itself costs the checker seconds per life to read.)"""
MAX_ACKS_BEFORE_KILL = {FlushDiskType.SYNC_FLUSH: 1500, FlushDiskType.ASYNC_FLUSH: 2500}


@dataclass(frozen=True, slots=True)
class Ack:
    """One ``A ...`` line of the producer: an acknowledged message and where it went."""

    life: int
    tid: int
    seq: int
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size: int
    uniq_key: str

    @classmethod
    def parse(cls, line: str) -> Ack:
        _a, life, tid, seq, topic, qid, qoff, phys, size, uniq = line.split()
        return cls(
            int(life), int(tid), int(seq), topic, int(qid), int(qoff), int(phys), int(size), uniq
        )


class Producer:
    """A producer process whose acknowledgements are read as they come."""

    def __init__(
        self, root: Path, mode: FlushDiskType, life: int, file_size: int = FILE_SIZE
    ) -> None:
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "tests.crash.producer", str(root)),
                *("--flush", mode.value, "--life", str(life), "--file-size", str(file_size)),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.acks: list[Ack] = []
        self.ready = threading.Event()
        self.done = threading.Event()
        self._target = -1
        self._reached = threading.Event()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode()
            if line.startswith("A "):
                with self._lock:
                    self.acks.append(Ack.parse(line))
                    if 0 <= self._target <= len(self.acks):
                        self._reached.set()
            elif line.startswith("READY"):
                self.ready.set()
        self.done.set()
        self._reached.set()

    def wait_for_acks(self, n: int, timeout: float) -> None:
        """Block until ``n`` acks were read, the process ended, or ``timeout`` passed."""
        with self._lock:
            self._target = n
            if len(self.acks) >= n:
                self._reached.set()
        self._reached.wait(timeout)

    def kill(self) -> str:
        """SIGKILL the process, collect every line it managed to print; return stderr."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._reader.join(30)
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")


def _config(root: Path, mode: FlushDiskType, file_size: int = FILE_SIZE) -> StoreConfig:
    return store_config(root, root_dir=root, flush_disk_type=mode, commitlog_file_size=file_size)


def _check_life(cfg: StoreConfig, acks: list[Ack], life_start: int) -> int:
    """Reopen after a kill and check everything; return the offset the next life starts at."""
    store = MessageStore.open(cfg)
    try:
        end = store.max_physical_offset
        size = cfg.commitlog_file_size
        assert check_consistency(cfg.root, size, end=end) == []
        log = scan_log(cfg.root, size)
        index = log.by_offset()
        for a in acks:
            info = index.get(a.physical_offset)
            assert info is not None, f"acked message lost: {a}"
            got = (info.topic, info.queue_id, info.queue_offset, info.uniq_key, info.size)
            assert got == (a.topic, a.queue_id, a.queue_offset, a.uniq_key, a.size), a
            if a.physical_offset >= life_start:  # bodies of this life's acks: via the API
                rec = store.look_message_by_offset(a.physical_offset)
                assert rec is not None
                assert rec.decompressed_body() == message_for(a.life, a.tid, a.seq).body
        for phys, info in log.records:
            if phys < life_start or info.topic not in ("TopicA", "TopicB", "TopicC"):
                continue
            body = decompress(log.bodies[phys], info.sys_flag)
            life, tid, seq = (int(x) for x in body.split(b":", 3)[:3])
            sent = message_for(life, tid, seq)
            assert (info.topic, info.queue_id, body) == (sent.topic, sent.queue_id, sent.body)
        for (topic, qid), n in queue_next_offsets(log).items():
            assert store.next_queue_offset(topic, qid) == n, (topic, qid)
        r = store.put_message(Message(topic="after", body=b"new write after the kill"))
        assert r.status is PutStatus.PUT_OK
        return store.max_physical_offset
    finally:
        store.close()


def _sigkill_trials(
    tmp_path: Path, mode: FlushDiskType, seed: int, file_size: int = FILE_SIZE, trials: int = TRIALS
) -> None:
    rng = random.Random(seed)
    root = tmp_path / "store"
    cfg = _config(root, mode, file_size)
    stats = STATS[f"sigkill {mode.value}"]
    acks: list[Ack] = []
    life_start = 0
    t0 = time.monotonic()
    for life in range(1, trials + 1):
        producer = Producer(root, mode, life, file_size)
        if rng.random() < 0.25:  # anywhere from interpreter start to the first puts
            producer.done.wait(rng.uniform(0.0, 0.6))
            stats["killed_early"] += 1
        else:
            assert producer.ready.wait(30) or producer.done.is_set()
            producer.wait_for_acks(rng.randrange(1, MAX_ACKS_BEFORE_KILL[mode]), timeout=3.0)
        stderr = producer.kill()
        assert producer.proc.returncode == -signal.SIGKILL, stderr[-2000:]
        assert "Traceback" not in stderr, stderr[-2000:]
        acks += producer.acks
        stats.update(lives=1, acked=len(producer.acks))
        life_start = _check_life(cfg, acks, life_start)
    stats["acked_lost"] += 0  # _check_life asserts every ack survived
    stats["seconds"] += round(time.monotonic() - t0)


def test_sigkill_under_sync_flush_loses_no_acked_message(tmp_path: Path):
    _sigkill_trials(tmp_path, FlushDiskType.SYNC_FLUSH, seed=1)


def test_sigkill_under_async_flush_loses_no_acked_message(tmp_path: Path):
    _sigkill_trials(tmp_path, FlushDiskType.ASYNC_FLUSH, seed=2)


def test_sigkill_with_segments_above_a_mebibyte_loses_no_acked_message(tmp_path: Path):
    _sigkill_trials(
        tmp_path, FlushDiskType.ASYNC_FLUSH, seed=3, file_size=LARGE_FILE_SIZE, trials=6
    )
