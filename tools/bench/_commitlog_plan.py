"""The contenders of ``mqstore bench commitlog``, in the order each repetition runs them.

See tools/bench/commitlog.py for the sections and the ratios they feed.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from mqstore import affinity
from mqstore.tools.bench import _mqstore as mq
from mqstore.tools.bench import _references as ref
from mqstore.tools.bench._harness import Contender
from mqstore.tools.bench._workload import Item, items

_NO_FSYNC = "page cache (no fsync per ack)"
_FSYNC = "fdatasync before ack"


def split(cs: list[Contender]) -> list[Contender]:
    """The split-CPU contenders (``mqstore.affinity``): only where there are 2+ CPUs."""
    return cs if (os.cpu_count() or 1) >= 2 and affinity.supported() else []


def contenders(recovery_root: Path) -> list[Contender]:
    """Everything measured, in the order each repetition runs it."""
    p100 = items(100)
    return [
        *_async_contenders(p100),
        *_batch_contenders(p100),
        *_sync16_contenders(p100),
        *_sync64_contenders(p100),
        *_recovery_contenders(recovery_root),
    ]


def _async_contenders(p100: list[Item]) -> list[Contender]:
    """One producer, ASYNC_FLUSH: mqstore, SQLite WAL NORMAL, LMDB, persist-queue."""
    p = functools.partial
    return [
        Contender("mqstore_async_1t", "mqstore put_message, ASYNC_FLUSH", "async",
                  _NO_FSYNC + "; flusher every 500 ms", p(mq.async_single, pool=p100)),
        Contender("mqstore_async_1t_log_only", "mqstore put_message, dispatcher stopped", "async",
                  _NO_FSYNC + "; CommitLog only (CQ/index dispatch off the clock)",
                  p(mq.async_single, pool=p100, dispatch=False)),
        Contender("mqstore_async_1t_proc", "mqstore put_message, dispatcher process", "async",
                  _NO_FSYNC + "; CQ/index built by a child process (dispatch_process)",
                  p(mq.async_single, pool=p100, dispatch_process=True)),
        Contender("sqlite_normal_1t", "SQLite WAL NORMAL, commit per message", "async",
                  _NO_FSYNC + "; WAL synced at checkpoints",
                  p(ref.sqlite_single, items=p100, batch=1)),
        Contender("lmdb_1t", "LMDB sync=False, one write txn per message", "async",
                  _NO_FSYNC + "; map pages written back by the kernel",
                  p(ref.lmdb_puts, items=p100, batch=1)),
        Contender("pq_sqlite_queue", "persist-queue SQLiteQueue (defaults)", "async",
                  "WAL, synchronous=FULL default: fsync per put",
                  p(ref.persist_queue, items=p100, kind="sqlite")),
        Contender("pq_file_queue", "persist-queue file Queue (defaults)", "async",
                  "fsync every 100 puts (chunk full), info file without fsync",
                  p(ref.persist_queue, items=p100, kind="file")),
    ]  # fmt: skip


def _batch_contenders(p100: list[Item]) -> list[Contender]:
    """Batches of 32 messages, ASYNC_FLUSH: mqstore put_messages, SQLite and LMDB."""
    p = functools.partial
    return [
        Contender("mqstore_batch32", "mqstore put_messages(32), ASYNC_FLUSH", "batch",
                  _NO_FSYNC, p(mq.async_batch, pool=p100, batch=32)),
        Contender("mqstore_batch32_log_only", "mqstore put_messages(32), dispatcher stopped",
                  "batch", _NO_FSYNC + "; CommitLog only",
                  p(mq.async_batch, pool=p100, batch=32, dispatch=False)),
        Contender("mqstore_batch32_proc", "mqstore put_messages(32), dispatcher process",
                  "batch", _NO_FSYNC + "; CQ/index built by a child process",
                  p(mq.async_batch, pool=p100, batch=32, dispatch_process=True)),
        Contender("sqlite_normal_batch32", "SQLite WAL NORMAL, 32 rows per commit", "batch",
                  _NO_FSYNC, p(ref.sqlite_single, items=p100, batch=32)),
        Contender("lmdb_batch32", "LMDB sync=False, 32 records per write txn", "batch",
                  _NO_FSYNC, p(ref.lmdb_puts, items=p100, batch=32)),
    ]  # fmt: skip


def _sync16_contenders(p100: list[Item]) -> list[Contender]:
    """Durable acks with 16 producers (and the raw disk ceilings)."""
    p = functools.partial
    return [
        Contender("raw_fdatasync_1t", "raw: 1 thread, pwrite + fdatasync", "sync", _FSYNC,
                  ref.raw_single, "sync"),
        Contender("raw_group_commit_16t", "raw group-commit ceiling, 16 threads", "sync", _FSYNC,
                  p(ref.raw_group_commit, n_threads=16), "sync"),
        Contender("mqstore_sync_16t", "mqstore SYNC_FLUSH, 16 threads", "sync", _FSYNC,
                  p(mq.sync_threads, pool=p100, n_threads=16), "sync"),
        Contender("mqstore_sync_16t_log_only", "mqstore SYNC_FLUSH, 16 thr., no dispatcher",
                  "sync", _FSYNC + "; CommitLog only",
                  p(mq.sync_threads, pool=p100, n_threads=16, dispatch=False), "sync"),
        Contender("mqstore_sync_16t_proc", "mqstore SYNC_FLUSH, 16 thr., dispatcher process",
                  "sync", _FSYNC + "; CQ/index built by a child process",
                  p(mq.sync_threads, pool=p100, n_threads=16, dispatch_process=True), "sync"),
        *split([
            Contender("mqstore_sync_16t_split", "mqstore SYNC_FLUSH, 16 thr., split CPUs", "sync",
                      _FSYNC + "; producers on CPU 0, dispatcher process on the others",
                      p(mq.sync_threads, pool=p100, n_threads=16, dispatch_process=True,
                        split_cpus=True), "sync"),
        ]),
        Contender("sqlite_full_16t", "SQLite WAL FULL, 16 threads", "sync", _FSYNC,
                  p(ref.sqlite_full_threads, items=p100, n_threads=16), "sync"),
    ]  # fmt: skip


def _sync64_contenders(p100: list[Item]) -> list[Contender]:
    """Durable acks with 64 producers."""
    p = functools.partial
    return [
        Contender("mqstore_sync_64t", "mqstore SYNC_FLUSH, 64 threads", "sync", _FSYNC,
                  p(mq.sync_threads, pool=p100, n_threads=64), "sync"),
        Contender("mqstore_sync_64t_proc", "mqstore SYNC_FLUSH, 64 thr., dispatcher process",
                  "sync", _FSYNC + "; CQ/index built by a child process",
                  p(mq.sync_threads, pool=p100, n_threads=64, dispatch_process=True), "sync"),
        *split([
            Contender("mqstore_sync_64t_split", "mqstore SYNC_FLUSH, 64 thr., split CPUs", "sync",
                      _FSYNC + "; producers on CPU 0, dispatcher process on the others",
                      p(mq.sync_threads, pool=p100, n_threads=64, dispatch_process=True,
                        split_cpus=True), "sync"),
        ]),
        Contender("sqlite_full_64t", "SQLite WAL FULL, 64 threads", "sync", _FSYNC,
                  p(ref.sqlite_full_threads, items=p100, n_threads=64), "sync"),
        *split([
            Contender("sqlite_full_64t_cpu0", "SQLite WAL FULL, 64 threads on CPU 0", "sync",
                      _FSYNC + "; pinned like the split-CPU contenders",
                      p(ref.sqlite_full_threads, items=p100, n_threads=64, one_cpu=True),
                      "sync"),
        ]),
    ]  # fmt: skip


def _recovery_contenders(recovery_root: Path) -> list[Contender]:
    """Abnormal recovery of the store built under ``recovery_root``: scan, warm, cold."""
    return [
        Contender("recovery_scan_only", "CommitLog scan alone (recovery.scan)", "recovery",
                  "CRC-checked scan without re-dispatch, page cache warm",
                  lambda _w, _d: mq.scan_only(recovery_root), "recovery"),
        Contender("recovery_warm", "mqstore open(), page cache warm", "recovery",
                  "after a process crash; scan + CQ re-dispatch (index after open)",
                  lambda _w, _d: mq.recovery(recovery_root, cold=False), "recovery"),
        Contender("recovery_cold", "mqstore open(), page cache dropped", "recovery",
                  "after a reboot (fadvise DONTNEED); scan + CQ re-dispatch (index after)",
                  lambda _w, _d: mq.recovery(recovery_root, cold=True), "recovery"),
    ]  # fmt: skip
