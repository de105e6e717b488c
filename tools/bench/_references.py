"""Reference contenders: SQLite, LMDB, persist-queue and the raw disk, measured in the same run.

Each function takes a fresh directory and a duration and returns a :class:`Run`;
setup (schema, file allocation) and teardown happen off the clock.

* **SQLite WAL, synchronous=NORMAL**: a commit appends to the WAL without fsync (the
  WAL is synced at checkpoints), the durability class of an ASYNC_FLUSH put.
* **SQLite WAL, synchronous=FULL**: every commit fsyncs the WAL, the class of a
  SYNC_FLUSH put. Each thread has its own connection and takes the write lock with
  ``BEGIN IMMEDIATE``; a busy timeout makes waiters sleep in SQLite's busy handler,
  and a ``database is locked`` that still escapes is retried (and counted).
* **persist-queue** with its defaults: ``SQLiteQueue`` (WAL, ``auto_commit=True``,
  SQLite's default synchronous=FULL: one fsync per put) and the file ``Queue``
  (pickles appended to a chunk file, fsync only when a 100-item chunk is full, the
  info file rewritten on every put without fsync).
* **LMDB** (the ``lmdb`` package, ``sync=False``: commits reach the page cache, no
  fsync, the class of an ASYNC_FLUSH put): one write transaction per put or per batch
  (``putmulti``), appended keys; reads through one read transaction's cursor.
* **raw disk**: 100-byte records ``pwrite``-appended to a preallocated plain file
  (``posix_fallocate``, as the store allocates its segments). Single thread: write +
  ``fdatasync`` per record. Group commit ceiling: 16 threads append under one lock
  and wait; one flusher thread ``fdatasync``s everything written so far and wakes
  every waiter it covered. No encoding, no mapping, no bookkeeping: the best a
  group commit can do on this disk.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mqstore import affinity
from mqstore.tools.bench._harness import Deadline, Run, Worker, chunked, drive, run_threads
from mqstore.tools.bench._workload import SQLITE_INSERT, SQLITE_SCHEMA, Item

RAW_RECORD = b"r" * 100
RAW_FILE_SIZE = 256 << 20
BUSY_TIMEOUT_S = 0.1
Row = tuple[str, str, str, bytes]
WorkerPair = tuple[Worker, Callable[[], None]]


# ---------------------------------------------------------------------- SQLite


def _sqlite_open(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_S)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(SQLITE_SCHEMA)
    return conn


def sqlite_single(workdir: Path, duration: float, items: Sequence[Item], batch: int) -> Run:
    """One thread, WAL + synchronous=NORMAL, ``batch`` rows per transaction."""
    conn = _sqlite_open(workdir / "bench.db", "NORMAL")
    execute = conn.execute
    rows = [it.row() for it in items]
    try:
        if batch == 1:

            def one(chunk: Sequence[Row]) -> None:
                for row in chunk:
                    execute("BEGIN")
                    execute(SQLITE_INSERT, row)
                    execute("COMMIT")

            return drive(duration, rows, one)
        many = conn.executemany
        groups = chunked(rows, batch)

        def grouped(chunk: Sequence[list[Row]]) -> None:
            for group in chunk:
                execute("BEGIN")
                many(SQLITE_INSERT, group)
                execute("COMMIT")

        return drive(duration, groups, grouped, per_item=batch)
    finally:
        conn.close()


def sqlite_full_threads(
    workdir: Path, duration: float, items: Sequence[Item], n_threads: int, one_cpu: bool = False
) -> Run:
    """``n_threads`` threads, each its own connection, WAL + synchronous=FULL
    (``one_cpu``: this process pinned to CPU 0 meanwhile, as mqstore's split-CPU
    contenders are, so the reference gets the same treatment)."""
    if not one_cpu:
        return sqlite_threads(workdir, duration, items, n_threads, "FULL")
    with affinity.pinned((0,)):
        return sqlite_threads(workdir, duration, items, n_threads, "FULL")


def sqlite_threads(
    workdir: Path, duration: float, items: Sequence[Item], n_threads: int, synchronous: str
) -> Run:
    """``n_threads`` threads, each its own connection, WAL + ``synchronous`` (FULL or
    NORMAL), one INSERT + COMMIT per message, each timed."""
    path = workdir / "bench.db"
    _sqlite_open(path, synchronous).close()
    rows = [it.row() for it in items]
    retries = [0]
    lock = threading.Lock()

    def make(i: int, deadline: Deadline) -> WorkerPair:
        conn = _sqlite_open(path, synchronous)
        execute = conn.execute
        k = [i * 131]

        def op() -> bool:
            row = rows[k[0] % len(rows)]
            k[0] += 1
            while True:
                try:
                    execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as e:
                    if "locked" not in str(e) and "busy" not in str(e):
                        raise
                    with lock:
                        retries[0] += 1
                    if deadline.passed():
                        return False  # still waiting for the lock when time is up
                    continue
                execute(SQLITE_INSERT, row)
                execute("COMMIT")
                return True

        return op, conn.close

    run = run_threads(n_threads, duration, make)
    run.extra["busy_retries"] = retries[0]
    return run


# --------------------------------------------------------------- persist-queue


def persist_queue(workdir: Path, duration: float, items: Sequence[Item], kind: str) -> Run:
    """persist-queue with default durability: ``kind`` is "sqlite" or "file"."""
    import persistqueue

    values = [(it.topic, it.tags, it.keys, it.body) for it in items]
    q: persistqueue.SQLiteQueue | persistqueue.Queue
    if kind == "sqlite":
        q = persistqueue.SQLiteQueue(str(workdir / "q"), auto_commit=True)
    else:
        tmp = workdir / "tmp"
        tmp.mkdir()
        q = persistqueue.Queue(str(workdir / "q"), tempdir=str(tmp))
    put = q.put

    def process(chunk: Sequence[tuple[str, str, str, bytes]]) -> None:
        for v in chunk:
            put(v)

    try:
        # persist-queue is slow: small chunks keep the overshoot past the deadline short.
        return drive(duration, values[:64], process)
    finally:
        if kind == "sqlite":
            q.close()  # type: ignore[union-attr]
        else:
            q.headf.close()  # type: ignore[union-attr]
            q.tailf.close()  # type: ignore[union-attr]


# -------------------------------------------------------------------- raw disk


def _raw_file(workdir: Path) -> int:
    fd = os.open(workdir / "raw.dat", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    os.posix_fallocate(fd, 0, RAW_FILE_SIZE)
    os.fsync(fd)
    return fd


def raw_single(workdir: Path, duration: float) -> Run:
    """One thread: pwrite a 100-byte record, fdatasync, repeat."""
    fd = _raw_file(workdir)
    rec = RAW_RECORD
    size = len(rec)
    pos = [0]

    def make(_i: int, _d: Deadline) -> WorkerPair:
        def op() -> None:
            p = pos[0]
            os.pwrite(fd, rec, p)
            os.fdatasync(fd)
            pos[0] = (p + size) % RAW_FILE_SIZE

        return op, lambda: None

    try:
        run = run_threads(1, duration, make)
    finally:
        os.close(fd)
    run.extra["fdatasyncs"] = run.ops
    return run


class _RawGroupCommit:
    """Appends under one lock; a flusher thread syncs for every waiter at once."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.cond = threading.Condition()
        self.written = 0
        self.flushed = 0
        self.syncs = 0
        self.work = threading.Event()
        self.stopped = False

    def append(self) -> None:
        cond = self.cond
        with cond:
            p = self.written
            os.pwrite(self.fd, RAW_RECORD, p % RAW_FILE_SIZE)
            end = self.written = p + len(RAW_RECORD)
        self.work.set()
        with cond:
            while self.flushed < end:
                cond.wait()

    def flusher(self) -> None:
        while not self.stopped:
            target = self.written
            if target <= self.flushed:
                self.work.wait(0.01)
                self.work.clear()
                continue
            os.fdatasync(self.fd)
            self.syncs += 1
            with self.cond:
                self.flushed = target
                self.cond.notify_all()


def raw_group_commit(workdir: Path, duration: float, n_threads: int) -> Run:
    """The disk's group-commit ceiling with ``n_threads`` appenders."""
    fd = _raw_file(workdir)
    gc = _RawGroupCommit(fd)
    flusher = threading.Thread(target=gc.flusher, name="raw-flusher", daemon=True)
    flusher.start()
    try:
        run = run_threads(n_threads, duration, lambda _i, _d: (gc.append, lambda: None))
        syncs = gc.syncs
    finally:
        gc.stopped = True
        gc.work.set()
        flusher.join()
        os.close(fd)
    run.extra["fdatasyncs"] = syncs
    return run


# ------------------------------------------------------------------------ LMDB

LMDB_MAP_SIZE = 1 << 36
"""LMDB's map: reserved address space (a sparse file), ample for 10M small records."""
_LMDB_KEY = struct.Struct(">Q")
_LMDB_HEAD = struct.Struct(">BBH")


def lmdb_value(it: Item) -> bytes:
    """One item as the LMDB value: topic, tags and keys lengths, then the four fields
    (built off the clock, as SQLite's rows are)."""
    t, g, k = it.topic.encode(), it.tags.encode(), it.keys.encode()
    return _LMDB_HEAD.pack(len(t), len(g), len(k)) + t + g + k + it.body


def _lmdb_env(path: Path) -> Any:
    import lmdb

    return lmdb.open(str(path), map_size=LMDB_MAP_SIZE, sync=False, subdir=True)


def lmdb_puts(workdir: Path, duration: float, items: Sequence[Item], batch: int) -> Run:
    """LMDB ``sync=False``: one write transaction per put (``batch`` 1) or per batch of
    ``batch`` puts (``putmulti``); keys are a big-endian counter, appended."""
    env = _lmdb_env(workdir / "lmdb")
    values = [lmdb_value(it) for it in items]
    pack = _LMDB_KEY.pack
    begin = env.begin
    n = [0]
    try:
        if batch == 1:

            def one(chunk: Sequence[bytes]) -> None:
                i = n[0]
                for v in chunk:
                    with begin(write=True) as txn:
                        txn.put(pack(i), v, append=True)
                    i += 1
                n[0] = i

            return drive(duration, values, one)
        groups = chunked(values, batch)

        def grouped(chunk: Sequence[list[bytes]]) -> None:
            i = n[0]
            for group in chunk:
                with begin(write=True) as txn:
                    txn.cursor().putmulti(
                        [(pack(i + j), v) for j, v in enumerate(group)], append=True
                    )
                i += len(group)
            n[0] = i

        return drive(duration, groups, grouped, per_item=batch)
    finally:
        env.close()


def lmdb_fill(path: Path, items: Sequence[Item], count: int) -> None:
    """An LMDB environment at ``path`` holding ``count`` items (cycled), closed."""
    env = _lmdb_env(path)
    values = [lmdb_value(it) for it in items]
    pack = _LMDB_KEY.pack
    try:
        for start in range(0, count, 100_000):
            with env.begin(write=True) as txn:
                cur = txn.cursor()
                stop = min(count, start + 100_000)
                cur.putmulti(
                    ((pack(i), values[i % len(values)]) for i in range(start, stop)), append=True
                )
        env.sync(True)
    finally:
        env.close()


def lmdb_read(path: Path) -> Run:
    """Every value of a filled environment through one read transaction's cursor
    (values only, as bytes: no field decoded)."""
    env = _lmdb_env(path)
    try:
        t0 = time.perf_counter()
        n = 0
        with env.begin() as txn:
            for v in txn.cursor().iternext(keys=False):
                n += v is not None
        return Run(n, time.perf_counter() - t0)
    finally:
        env.close()


def lmdb_open(path: Path) -> float:
    """Seconds to open a filled environment and find its last key (where an appender
    resumes)."""
    t0 = time.perf_counter()
    env = _lmdb_env(path)
    with env.begin() as txn:
        cur = txn.cursor()
        if not cur.last():
            raise RuntimeError(f"{path}: empty LMDB environment")
    seconds = time.perf_counter() - t0
    env.close()
    return seconds


def sqlite_fill(path: Path, items: Sequence[Item], count: int) -> None:
    """A WAL database at ``path`` holding ``count`` rows (cycled), checkpointed, closed."""
    conn = _sqlite_open(path, "NORMAL")
    rows = [it.row() for it in items]
    try:
        for start in range(0, count, 100_000):
            stop = min(count, start + 100_000)
            conn.execute("BEGIN")
            conn.executemany(SQLITE_INSERT, (rows[i % len(rows)] for i in range(start, stop)))
            conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def sqlite_read(path: Path) -> Run:
    """Every row's tags and body, ``SELECT`` in id order through one cursor."""
    conn = _sqlite_open(path, "NORMAL")
    try:
        t0 = time.perf_counter()
        n = 0
        for _tags, body in conn.execute("SELECT tags, body FROM messages ORDER BY id"):
            n += body is not None
        return Run(n, time.perf_counter() - t0)
    finally:
        conn.close()


def sqlite_open(path: Path) -> float:
    """Seconds to connect to a filled database (WAL) and read its largest id."""
    t0 = time.perf_counter()
    conn = _sqlite_open(path, "NORMAL")
    (last,) = conn.execute("SELECT max(id) FROM messages").fetchone()
    seconds = time.perf_counter() - t0
    conn.close()
    if last is None:
        raise RuntimeError(f"{path}: empty database")
    return seconds
