"""Part 2 of ``mqstore bench flush``: power losses at random moments, and what the
reopened store lost or got wrong (see tools/bench/flush.py)."""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mqstore import FlushDiskType, Message, MessageStore, PutStatus, StoreConfig
from mqstore.tools.bench._flush_plan import (
    CRASH_KINDS,
    DURABILITY,
    MODES,
    TRIAL_FILE_SIZE,
    TRIAL_PER_THREAD,
    TRIAL_THREADS,
)
from mqstore.tools.bench._harness import progress
from mqstore.tools.logcheck import LogScan, check_consistency, scan_log
from mqstore.tools.powerloss import DiskModel, power_loss, run_producers


def _trial_config(root: Path, mode: FlushDiskType) -> StoreConfig:
    return StoreConfig(
        root_dir=root,
        flush_disk_type=mode,
        commitlog_file_size=TRIAL_FILE_SIZE,
        mapped_file_size_consume_queue=1024 * 20,
        message_index_enable=False,  # the CommitLog is what the trial judges
        sync_flush_timeout_ms=3000,
    )


def _body(rng: random.Random, tid: int, seq: int) -> bytes:
    head = f"t{tid}-s{seq}-".encode()
    return head + rng.randbytes(rng.randrange(60, 600))


def _produce(
    store: MessageStore, model: DiskModel, seed: int, cut_after: int | None
) -> list[tuple[int, bytes, bool]]:
    """Producer threads until done or the power fails: (offset, body, acked) per stored put."""
    puts: list[tuple[int, bytes, bool]] = []
    lock = threading.Lock()
    acks = [0]

    def worker(tid: int) -> None:
        rng = random.Random(f"{seed}:{tid}")
        for seq in range(TRIAL_PER_THREAD):
            if model.crashed.is_set():
                return
            body = _body(rng, tid, seq)
            r = store.put_message(Message("FlushLab", body, tags=f"T{tid}", keys=[f"k{seq}"]))
            acked = r.status is PutStatus.PUT_OK and not model.crashed.is_set()
            with lock:
                if r.status.stored:
                    puts.append((r.physical_offset, body, acked))
                acks[0] += acked
                due = cut_after is not None and acks[0] >= cut_after
            if due:
                model.cut(f"after {cut_after} acks")
            if not r.status.stored:
                return

    run_producers(TRIAL_THREADS, worker)
    return puts


def trial(root: Path, mode: FlushDiskType, seed: int) -> dict[str, Any]:
    """One power loss at a random moment; what the reopened store lost or got wrong, and
    ``put_s``: how long the producers put before the power failed (they stop at the
    cut), to hold against the flush interval."""
    rng = random.Random(seed)
    cfg = _trial_config(root, mode)
    model = DiskModel(root)
    cut_after = _arm(model, rng)
    puts: list[tuple[int, bytes, bool]] = []
    image = None
    put_s = 0.0
    with model.installed():
        try:
            store = MessageStore.open(cfg)
        except OSError:  # the power failed while the store was opening
            store = None
        if store is not None:
            started = time.monotonic()
            puts = _produce(store, model, seed, cut_after)
            put_s = time.monotonic() - started  # the producers stop at the cut
            image = store.abandon()
    loss = power_loss(image, rng, model)

    problems, acked_lost, lost, log, recovery_mode = _verify(cfg, root, puts)
    return {
        "seed": seed,
        "crash": loss.reason,
        "puts_stored": len(puts),
        "acked": sum(1 for p in puts if p[2]),
        "acked_lost": acked_lost,
        "records_lost": lost,
        "recovered": len(log.records),
        "problems": problems[:5],
        "pages_kept": loss.kept,
        "pages_dropped": loss.dropped,
        "pages_torn": loss.torn,
        "abort_lost": loss.abort_lost,
        "recovery_mode": recovery_mode,
        "put_s": round(put_s, 4),
    }


def _arm(model: DiskModel, rng: random.Random) -> int | None:
    """Pick when the power fails: after N acks (returned) or at a fault point of ``model``."""
    kind = rng.choice(CRASH_KINDS)
    cut_after = None
    if kind == "acks":
        cut_after = rng.randrange(1, TRIAL_THREADS * TRIAL_PER_THREAD)
    elif kind == "before_allocate":
        model.crash_at(kind, rng.randrange(1, 4))
    else:
        model.crash_at(kind, rng.randrange(1, 40))
    return cut_after


def _verify(
    cfg: StoreConfig, root: Path, puts: list[tuple[int, bytes, bool]]
) -> tuple[list[str], int, int, LogScan, str]:
    """Reopen after the loss; (problems, acked lost, puts lost, the log, recovery mode)."""
    problems: list[str] = []
    store = MessageStore.open(cfg)
    try:
        problems += check_consistency(root, TRIAL_FILE_SIZE, end=store.max_physical_offset)
        log = scan_log(root, TRIAL_FILE_SIZE)
        put_at = {off: body for off, body, _a in puts}
        for off, _r in log.records:
            if log.bodies.get(off) != put_at.get(off):
                problems.append(f"record at {off} is not the message put there")
        acked_lost = sum(1 for off, b, a in puts if a and log.bodies.get(off) != b)
        lost = sum(1 for off, b, _a in puts if log.bodies.get(off) != b)
        after = store.put_message(Message("FlushLab", b"after recovery"))
        if after.status is not PutStatus.PUT_OK:
            problems.append(f"put after recovery returned {after.status}")
        recovery = store.recovery
        recovery_mode = recovery.mode.value if recovery is not None else "?"
    finally:
        store.close()
    return problems, acked_lost, lost, log, recovery_mode


class _Captured(logging.Handler):
    """Keeps the store's log records (the simulated EIO makes its threads log errors)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}")


@contextlib.contextmanager
def _store_logs_captured() -> Iterator[_Captured]:
    """Route the ``store`` and ``mqstore`` loggers into a list instead of stderr."""
    handler = _Captured()
    loggers = [logging.getLogger(name) for name in ("store", "mqstore")]
    saved = [lg.propagate for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.propagate = False
    try:
        yield handler
    finally:
        for lg, prop in zip(loggers, saved, strict=True):
            lg.removeHandler(handler)
            lg.propagate = prop


def durability(work: Path, n_trials: int, seed: int) -> dict[str, Any]:
    """``n_trials`` power losses per mode (modes interleaved), summed per mode."""
    out: dict[str, Any] = {}
    trials: dict[str, list[dict[str, Any]]] = {m.value: [] for m in MODES}
    with (
        progress(n_trials * len(MODES), "flush lab: power losses") as bar,
        _store_logs_captured() as logs,
    ):
        for i in range(n_trials):
            for mode in MODES:
                d = work / f"trial-{mode.value}-{i}"
                d.mkdir()
                try:
                    trials[mode.value].append(trial(d / "store", mode, seed * 1000 + i))
                finally:
                    shutil.rmtree(d, ignore_errors=True)
                bar.update(1)
    for mode in MODES:
        ts = trials[mode.value]
        out[mode.value] = {
            "durability": DURABILITY[mode],
            "trials": len(ts),
            "acked": sum(t["acked"] for t in ts),
            "acked_lost": sum(t["acked_lost"] for t in ts),
            "trials_with_acked_lost": sum(1 for t in ts if t["acked_lost"]),
            "puts_stored": sum(t["puts_stored"] for t in ts),
            "records_lost": sum(t["records_lost"] for t in ts),
            "recovery_problems": sum(len(t["problems"]) for t in ts),
            "pages_kept": sum(t["pages_kept"] for t in ts),
            "pages_dropped": sum(t["pages_dropped"] for t in ts),
            "pages_torn": sum(t["pages_torn"] for t in ts),
            "abort_lost": sum(1 for t in ts if t["abort_lost"]),
            "per_trial": ts,
        }
    out["store_log_messages"] = {  # expected: threads hitting the simulated EIO
        "count": len(logs.messages),
        "first": logs.messages[:10],
    }
    return out
