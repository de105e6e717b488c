"""Simulated power loss (tests/powerloss.py) against the store in this process.

Each trial runs a store through several *lives*. In each life four producer threads
put messages (one of them sometimes in batches) until the power fails at a random
instant: after a random number of acknowledgements, inside the n-th fdatasync (before
or after it), inside a segment allocation, or once everything is put. The store is
abandoned, the disk model decides which unsynced pages survive, and the next life
reopens the store and judges the recovery:

* the log is consistent (``check_consistency``) and ends where the store says;
* SYNC_FLUSH: every put acknowledged PUT_OK before the failure is present and intact,
  and its bytes were durable (no ack before a completed fdatasync);
* ASYNC_FLUSH: every acknowledged put inside the durable part of the log is present
  and intact; only later ones may be missing;
* no phantom: every recovered record is the latest put made at its offset (nothing
  torn or resurrected from before an earlier recovery cut is served);
* no record an earlier open recovered is lost later;
* queue offsets are restored; the last life accepts new writes and closes cleanly.

Lives chain crashes: recovery's own unsynced work (zeroing a torn tail) is subject to
the next power loss too, and sometimes the power fails during the open itself.
"""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from pathlib import Path

import pytest

from mqstore import FlushDiskType, Message, MessageStore, PutStatus, StoreConfig
from mqstore.commitlog.recovery import RecoveryMode
from mqstore.tools._pageloss import Decide
from tests.crash.workload import STATS, Put, message_for, put_from, verify
from tests.helpers import check_consistency, queue_next_offsets, scan_log, store_config
from tests.powerloss import PAGE, DiskModel, PowerLossReport, power_loss, run_producers

pytestmark = pytest.mark.crash

FILE_SIZE = 16 * 1024
LARGE_FILE_SIZE = 2 << 20
"""Above 1 MiB: what a limit tied to sizes (a zero-run cap, a chunk count) must survive."""
HOLE = 3 << 19
THREADS = 4
LIVES = 3
TRIALS = int(os.environ.get("MQSTORE_POWERLOSS_TRIALS", "16"))
PER_THREAD = {FlushDiskType.SYNC_FLUSH: 50, FlushDiskType.ASYNC_FLUSH: 150}
CRASH_KINDS = ("acks", "acks", "before_fdatasync", "after_fdatasync", "before_allocate", "end")


def _config(tmp_path: Path, mode: FlushDiskType, file_size: int = FILE_SIZE) -> StoreConfig:
    return store_config(
        tmp_path,
        flush_disk_type=mode,
        commitlog_file_size=file_size,
        sync_flush_timeout_ms=3000,
        flush_interval_commitlog_ms=2,
        flush_commitlog_least_pages=1,
        flush_commitlog_thorough_interval_ms=20,
        compress_msg_body_over=1024,
        message_index_enable=False,  # the index is not what these trials judge
    )


def _arm(model: DiskModel, rng: random.Random, total: int) -> int | None:
    """Choose when the power fails; returns an ack count to cut after, or None."""
    kind = rng.choice(CRASH_KINDS)
    if kind == "acks":
        return rng.randrange(1, total)
    if kind == "before_allocate":
        model.crash_at(kind, rng.randrange(1, 4))
    elif kind != "end":
        model.crash_at(kind, rng.randrange(1, 40))
    return None


def _produce(
    store: MessageStore,
    model: DiskModel,
    life: int,
    per_thread: int,
    cut_after: int | None,
    fixed_size: int | None,
    batches: bool,
) -> list[Put]:
    """Run the producer threads until they are done or the power fails."""
    puts: list[Put] = []
    lock = threading.Lock()
    acks = [0]

    def worker(tid: int) -> None:
        seq = 0
        while seq < per_thread and not model.crashed.is_set():
            n = 1
            if batches and tid == 0:
                n = random.Random(f"batch:{life}:{seq}").randrange(1, 5)
            msgs = [message_for(life, tid, seq + i, fixed_size) for i in range(n)]
            results = store.put_messages(msgs) if n > 1 else [store.put_message(msgs[0])]
            before_crash = not model.crashed.is_set()
            mine = [
                put_from(life, tid, seq + i, m, r, r.status is PutStatus.PUT_OK and before_crash)
                for i, (m, r) in enumerate(zip(msgs, results, strict=True))
            ]
            seq += n
            with lock:
                puts.extend(mine)
                acks[0] += sum(p.acked for p in mine)
                due = cut_after is not None and acks[0] >= cut_after
            if due:
                model.cut(f"after {cut_after} acks")
            if not all(r.status.stored for r in results):
                break

    run_producers(THREADS, worker)
    return puts


def _judge(
    store: MessageStore,
    cfg: StoreConfig,
    mode: FlushDiskType,
    puts: list[Put],
    report: PowerLossReport,
    expected_at: dict[int, Put],
    stats: Counter[str],
) -> None:
    """Assert what a recovered store must satisfy after the previous life's power loss."""
    size = cfg.commitlog_file_size
    problems = check_consistency(cfg.root, size, end=store.max_physical_offset)
    assert problems == [], f"inconsistent after {report.reason}: {problems}"
    log = scan_log(cfg.root, size)
    acked = [p for p in puts if p.acked]
    assert report.claimed_flushed <= report.durable_end, "the store claims unsynced bytes"
    if mode is FlushDiskType.SYNC_FLUSH:
        early = [p for p in acked if p.end > report.durable_end]
        assert not early, f"acked before its bytes were durable: {early[:3]}"

        def must(p: Put) -> bool:
            return p.acked
    else:

        def must(p: Put) -> bool:
            return p.acked and p.end <= report.durable_end

    index = log.by_offset()
    acked_lost = sum(1 for p in acked if p.physical_offset not in index)
    verdict = verify(store, log, puts, expected_at, must)
    stats.update(
        lives=1,
        acked=len(acked),
        acked_lost=acked_lost,
        must_survive=verdict.must_survive,
        pages_kept=report.kept,
        pages_dropped=report.dropped,
        pages_torn=report.torn,
        abort_lost=report.abort_lost,
        normal_recovery=store.recovery is not None and store.recovery.mode is RecoveryMode.NORMAL,
    )
    assert verdict.lost == [], f"lost after {report.reason}: {verdict.lost[:5]}"
    assert verdict.phantoms == [], f"phantoms after {report.reason}: {verdict.phantoms[:5]}"
    for (topic, qid), n in queue_next_offsets(log).items():
        assert store.next_queue_offset(topic, qid) == n, (topic, qid)


def _hole(rng: random.Random, span: int) -> Decide:
    """A power loss that drops a contiguous run of at least 1.5 MiB of the CommitLog's
    unsynced pages and keeps every other page (writeback that wrapped around)."""
    first = rng.randrange(max(1, span - HOLE)) // PAGE
    last = first + HOLE // PAGE

    def decide(path: str, page: int) -> str:
        name = Path(path).name
        if not name.isdigit():
            return "kept"
        at = (int(name) + page * PAGE) // PAGE
        return "dropped" if first <= at < last else "kept"

    return decide


def _trial(
    tmp_path: Path,
    seed: int,
    mode: FlushDiskType,
    *,
    file_size: int = FILE_SIZE,
    holes: bool = False,
) -> None:
    rng = random.Random(seed)
    cfg = _config(tmp_path, mode, file_size)
    fixed_size = rng.choice([None, None, 180])  # fixed: old and new records align
    if holes:
        fixed_size = rng.choice([None, 4000])  # megabytes per life
    batches = rng.random() < 0.5
    stats = STATS[f"power loss {mode.value}"]
    stats["trials"] += 1
    expected_at: dict[int, Put] = {}
    previous: tuple[list[Put], PowerLossReport] | None = None
    for life in range(1, LIVES + 2):
        model = DiskModel(cfg.root)
        crash_in_open = 1 < life <= LIVES and rng.random() < 0.2
        if crash_in_open:  # in recovery's sync of the cut, the abort file's, a queue's
            model.crash_at(rng.choice(["before_fdatasync", "after_fdatasync"]), 1)
        with model.installed():
            try:
                store = MessageStore.open(cfg)
            except OSError:
                assert crash_in_open and model.crashed.is_set()
                stats["crashed_in_open"] += 1
                # Nothing was put: the previous life's puts are judged at the next open.
                power_loss(None, rng, model)
                continue
            if previous is not None:
                _judge(store, cfg, mode, *previous, expected_at, stats)
            if life > LIVES:
                r = store.put_message(Message(topic="after", body=b"new write"))
                assert r.status is PutStatus.PUT_OK
                store.close()
                break
            cut_after = _arm(model, rng, PER_THREAD[mode] * THREADS)
            puts = _produce(store, model, life, PER_THREAD[mode], cut_after, fixed_size, batches)
            image = store.abandon()
        segments = cfg.commitlog_path.iterdir()  # none if the first allocation failed
        written = max((int(p.name) + p.stat().st_size for p in segments), default=0)
        decide = _hole(rng, written) if holes else None
        report = power_loss(image, rng, model, decide=decide)
        assert report.violations == [], report.violations
        previous = (puts, report)
    assert check_consistency(cfg.root, file_size) == []


@pytest.mark.parametrize("seed", range(TRIALS))
def test_sync_flush_power_loss_keeps_every_acked_message(tmp_path: Path, seed: int):
    _trial(tmp_path, seed, FlushDiskType.SYNC_FLUSH)


@pytest.mark.parametrize("seed", range(TRIALS))
def test_async_flush_power_loss_loses_only_unflushed_messages(tmp_path: Path, seed: int):
    _trial(tmp_path, 1000 + seed, FlushDiskType.ASYNC_FLUSH)


@pytest.mark.parametrize("seed", range(4))
def test_async_flush_power_loss_with_a_multi_mib_hole_in_large_segments(tmp_path: Path, seed: int):
    """2 MiB segments, megabytes per life, and a power loss dropping 1.5 MiB of pages in
    one run while keeping those after it: no phantom, nothing durable lost."""
    _trial(tmp_path, 2000 + seed, FlushDiskType.ASYNC_FLUSH, file_size=LARGE_FILE_SIZE, holes=True)


def test_a_failing_producer_surfaces_after_every_other_producer_finished() -> None:
    finished: list[int] = []

    def worker(tid: int) -> None:
        if tid == 0:
            raise OSError("disk cut")
        threading.Event().wait(0.05)  # still running when worker 0 fails
        finished.append(tid)

    with pytest.raises(OSError, match="disk cut"):
        run_producers(4, worker)
    assert sorted(finished) == [1, 2, 3]
