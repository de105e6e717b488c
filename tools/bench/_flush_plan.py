"""The plan of ``mqstore bench flush``: its knobs and part 1's contenders, in run order.

See tools/bench/flush.py for what each part measures.
"""

from __future__ import annotations

import functools

from mqstore import FlushDiskType
from mqstore.tools.bench import _mqstore as mq
from mqstore.tools.bench import _references as ref
from mqstore.tools.bench._harness import Contender
from mqstore.tools.bench._workload import Item, items

MODES = (FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH)
THREADS = (1, 4, 16, 64)
SQLITE_THREADS = (1, 16)
SIZES = (100, 1024)
FULL = {"duration": 1.0, "reps": 3, "trials": 100}
QUICK = {"duration": 0.25, "reps": 1, "trials": 10}
CDF_THREADS = 16
CDF_POINTS = (
    [float(q) for q in range(0, 90, 2)]
    + [90 + q / 2 for q in range(0, 19)]
    + [99.5, 99.7, 99.9, 99.95, 99.99, 100.0]
)

NO_FSYNC = "page cache (no fsync per ack)"
FSYNC = "fdatasync before ack"
DURABILITY = {
    FlushDiskType.ASYNC_FLUSH: NO_FSYNC + "; flusher every 500 ms (default)",
    FlushDiskType.SYNC_FLUSH: FSYNC + " (group commit)",
}

# Durability trials: small files so every trial rolls segments and the model's
# per-sync snapshots stay cheap; store defaults otherwise (ASYNC flushes every 500 ms).
TRIAL_THREADS = 4
TRIAL_PER_THREAD = 120
TRIAL_FILE_SIZE = 32 * 1024
CRASH_KINDS = ("acks", "acks", "acks", "before_fdatasync", "after_fdatasync", "before_allocate")


def _key(mode_or_ref: str, threads: int, size: int) -> str:
    return f"{mode_or_ref}_{threads}t_{size}b"


def contenders() -> list[Contender]:
    """Everything part 1 measures, in the order each repetition runs it."""
    p = functools.partial
    plan: list[Contender] = []
    for size in SIZES:
        plan += _size_contenders(size)
    plan.append(
        Contender(
            _key("raw_fdatasync", 1, 100),
            "raw pwrite + fdatasync, 1 thr, 100 B",
            "raw",
            FSYNC,
            ref.raw_single,
            "sync",
        )
    )
    plan.append(
        Contender(
            _key("raw_group_commit", 16, 100),
            "raw group-commit ceiling, 16 thr, 100 B",
            "raw",
            FSYNC,
            p(ref.raw_group_commit, n_threads=16),
            "sync",
        )
    )
    return plan


def _size_contenders(size: int) -> list[Contender]:
    """The contenders of one body size: mqstore and SQLite per thread count, persist-queue."""
    p = functools.partial
    plan: list[Contender] = []
    pool = items(size)
    for n in THREADS:
        for mode in MODES:
            short = "async" if mode is FlushDiskType.ASYNC_FLUSH else "sync"
            plan.append(
                Contender(
                    _key(short, n, size),
                    f"mqstore {mode.value}, {n} thr, {size} B",
                    short,
                    DURABILITY[mode],
                    p(mq.put_threads, pool=pool, n_threads=n, flush=mode),
                    "sync",
                )
            )
        if n in SQLITE_THREADS:
            plan += _sqlite_contenders(pool, n, size)
    plan.append(
        Contender(
            _key("pq_sqlite_queue", 1, size),
            f"persist-queue SQLiteQueue, 1 thr, {size} B",
            "persist_queue",
            "WAL, synchronous=FULL default: fsync per put",
            p(ref.persist_queue, items=pool, kind="sqlite"),
        )
    )
    plan.append(
        Contender(
            _key("pq_file_queue", 1, size),
            f"persist-queue file Queue, 1 thr, {size} B",
            "persist_queue",
            "fsync every 100 puts (chunk full), info file without fsync",
            p(ref.persist_queue, items=pool, kind="file"),
        )
    )
    return plan


def _sqlite_contenders(pool: list[Item], n: int, size: int) -> list[Contender]:
    """SQLite WAL with synchronous=FULL, then NORMAL, for ``n`` threads."""
    p = functools.partial
    plan: list[Contender] = []
    for sync in ("FULL", "NORMAL"):
        plan.append(
            Contender(
                _key(f"sqlite_{sync.lower()}", n, size),
                f"SQLite WAL {sync}, {n} thr, {size} B",
                f"sqlite_{sync.lower()}",
                FSYNC if sync == "FULL" else NO_FSYNC + "; WAL synced at checkpoints",
                p(ref.sqlite_threads, items=pool, n_threads=n, synchronous=sync),
                "sync",
            )
        )
    return plan
