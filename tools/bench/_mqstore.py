"""mqstore contenders: puts through the public API, and abnormal recovery.

Stores use RocketMQ's default 1 GiB segments. One untimed warm-up put creates the
first segment (as SQLite's schema is created off the clock; a broker pays the
allocation once per GiB). Every contender checks afterwards that the store holds
exactly the messages it counted (all go to queue 0 of one topic), so a put that
silently did nothing cannot inflate a rate.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from mqstore import FlushDiskType, Message, MessageStore, PutStatus, StoreConfig, affinity
from mqstore.tools.bench._harness import Deadline, Run, Worker, chunked, drive, run_threads
from mqstore.tools.bench._workload import TOPIC, Item, items

_PUT_OK = PutStatus.PUT_OK


def _open(
    root: Path,
    flush: FlushDiskType,
    warm: Item | None = None,
    *,
    dispatch: bool = True,
    dispatch_process: bool = False,
    dispatch_cpus: tuple[int, ...] = (),
) -> MessageStore:
    store = MessageStore.open(
        StoreConfig(
            root_dir=root,
            flush_disk_type=flush,
            dispatch_process=dispatch_process,
            dispatch_cpus=dispatch_cpus,
        )
    )
    if not dispatch:
        # CommitLog only (what issue 2 specified): stop the consume-queue/index
        # dispatcher thread; close() dispatches the backlog, off the clock.
        reput = getattr(store, "reput", None)
        if reput is not None:
            reput.stop()
    if warm is not None:
        store.put_message(warm.message())
    return store


def _check_count(store: MessageStore, expected: int) -> None:
    got = store.next_queue_offset(TOPIC, 0) - 1  # minus the warm-up put
    if got != expected:
        raise RuntimeError(f"store holds {got} messages, the benchmark counted {expected}")


def _behind(store: MessageStore) -> int | None:
    """Bytes the consume-queue dispatcher had not yet caught up with (None: no reput)."""
    return getattr(store, "dispatch_behind_bytes", None)


def _drain(store: MessageStore, run: Run) -> None:
    """After the clock stopped: record how far dispatch lagged and how long it took to
    catch up, and the end-to-end rate (puts + catching up: what can be sustained)."""
    run.extra["dispatch_behind_bytes"] = _behind(store)
    t0 = time.perf_counter()
    if not store.wait_dispatched(600):
        raise RuntimeError("dispatch did not catch up in 600 s")
    drain = time.perf_counter() - t0
    run.extra["drain_seconds"] = drain
    run.extra["end_to_end_per_s"] = run.ops / (run.seconds + drain)


def _contend(
    workdir: Path,
    flush: FlushDiskType,
    pool: Sequence[Item],
    measure: Callable[[MessageStore], Run],
    *,
    dispatch: bool,
    dispatch_process: bool,
    dispatch_cpus: tuple[int, ...] = (),
) -> Run:
    """One put contender: open a store in ``workdir`` (warmed with ``pool[0]``), run
    ``measure`` on it, check that the store holds the ``run.ops`` messages it counted
    and, with ``dispatch``, how dispatch caught up (:func:`_drain`); the store is closed
    after, also when a step fails."""
    store = _open(
        workdir / "store",
        flush,
        pool[0],
        dispatch=dispatch,
        dispatch_process=dispatch_process,
        dispatch_cpus=dispatch_cpus,
    )
    try:
        run = measure(store)
        _check_count(store, run.ops)
        if dispatch:
            _drain(store, run)
    finally:
        store.close()
    return run


def async_single(
    workdir: Path,
    duration: float,
    pool: Sequence[Item],
    dispatch: bool = True,
    dispatch_process: bool = False,
) -> Run:
    """ASYNC_FLUSH, one thread, ``put_message`` per message (``dispatch_process``: the
    dispatcher runs in a child process, ``StoreConfig.dispatch_process``)."""

    def measure(store: MessageStore) -> Run:
        msgs = [it.message() for it in pool]
        put = store.put_message

        def process(chunk: Sequence[Message]) -> None:
            for m in chunk:
                put(m)

        run = drive(duration, msgs, process)
        run.extra["log_bytes"] = store.max_physical_offset
        run.extra["fdatasyncs"] = store.fsync_count
        return run

    return _contend(
        workdir, FlushDiskType.ASYNC_FLUSH, pool, measure,
        dispatch=dispatch, dispatch_process=dispatch_process,
    )  # fmt: skip


def async_batch(
    workdir: Path,
    duration: float,
    pool: Sequence[Item],
    batch: int,
    dispatch: bool = True,
    dispatch_process: bool = False,
) -> Run:
    """ASYNC_FLUSH, one thread, ``put_messages`` of ``batch`` messages."""

    def measure(store: MessageStore) -> Run:
        batches = chunked([it.message() for it in pool], batch)
        put_many = store.put_messages

        def process(chunk: Sequence[list[Message]]) -> None:
            for b in chunk:
                put_many(b)

        return drive(duration, batches, process, per_item=batch)

    return _contend(
        workdir, FlushDiskType.ASYNC_FLUSH, pool, measure,
        dispatch=dispatch, dispatch_process=dispatch_process,
    )  # fmt: skip


def sync_threads(
    workdir: Path,
    duration: float,
    pool: Sequence[Item],
    n_threads: int,
    dispatch: bool = True,
    dispatch_process: bool = False,
    split_cpus: bool = False,
) -> Run:
    """SYNC_FLUSH (group commit), ``n_threads`` producers, each put waits for its flush.

    ``split_cpus``: this process (producers, flusher) on CPU 0 and the dispatcher
    process on the others, as ``mqstore.affinity`` describes; the pin is undone after.
    """
    if not split_cpus:
        return put_threads(
            workdir, duration, pool, n_threads, FlushDiskType.SYNC_FLUSH, dispatch,
            dispatch_process,
        )  # fmt: skip
    rest = tuple(range(1, os.cpu_count() or 1))
    if not rest:
        raise RuntimeError("split_cpus needs at least 2 CPUs")
    with affinity.pinned((0,)):
        return put_threads(
            workdir, duration, pool, n_threads, FlushDiskType.SYNC_FLUSH, dispatch,
            dispatch_process, dispatch_cpus=rest,
        )  # fmt: skip


def put_threads(
    workdir: Path,
    duration: float,
    pool: Sequence[Item],
    n_threads: int,
    flush: FlushDiskType,
    dispatch: bool = True,
    dispatch_process: bool = False,
    dispatch_cpus: tuple[int, ...] = (),
) -> Run:
    """``n_threads`` producers calling ``put_message`` under ``flush``, each put timed.

    ``extra["fdatasyncs"]`` counts the store flusher's syncs during the run (for
    ASYNC_FLUSH, the periodic flusher's).
    """

    def measure(store: MessageStore) -> Run:
        msgs = [it.message() for it in pool]
        put = store.put_message

        def make(i: int, _d: Deadline) -> tuple[Worker, Callable[[], None]]:
            k = [i * 131]

            def op() -> None:
                r = put(msgs[k[0] % len(msgs)])
                k[0] += 1
                if r.status is not _PUT_OK:
                    raise RuntimeError(f"put returned {r.status}: {r.error}")

            return op, lambda: None

        syncs0 = store.fsync_count
        run = run_threads(n_threads, duration, make)
        run.extra["fdatasyncs"] = store.fsync_count - syncs0
        return run

    return _contend(
        workdir, flush, pool, measure,
        dispatch=dispatch, dispatch_process=dispatch_process, dispatch_cpus=dispatch_cpus,
    )  # fmt: skip


# -------------------------------------------------------------------- recovery


def build_recovery_store(root: Path, target_bytes: int, on_progress: Callable[[int], None]) -> int:
    """Fill a store with 1 KiB messages up to ``target_bytes`` of log, then abandon it.

    Returns the log size. Leaves ``abort`` behind, so the next open is abnormal.
    """
    store = _open(root, FlushDiskType.ASYNC_FLUSH)
    batches = chunked([it.message() for it in items(1024, n=1024, seed=7)], 32)
    done = 0
    while store.max_physical_offset < target_bytes:
        for b in batches:
            store.put_messages(b)
        now = store.max_physical_offset
        on_progress(now - done)
        done = now
    store.abandon()
    return done


def drop_page_cache(root: Path) -> None:
    """Write back and evict the store's segment pages (a cold start after reboot)."""
    for name in sorted(os.listdir(root / "commitlog")):
        fd = os.open(root / "commitlog" / name, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def recovery(root: Path, *, cold: bool) -> Run:
    """Open an abandoned store (abnormal recovery, CRC checks on) and abandon it again.

    ``ops`` is the records recovered, ``seconds`` the recovery time RecoveryResult
    reports (the CRC-checked scan, including the re-dispatch of every record to the
    consume queues that the store does from the scan's callback); ``extra`` has the
    bytes scanned, the wall time of the whole ``open`` and ``ready_seconds``: until
    ``wait_dispatched`` returns, i.e. the index, rebuilt after open by the reput
    thread, has caught up too (every key findable again).
    """
    if cold:
        drop_page_cache(root)
    t0 = time.perf_counter()
    store = MessageStore.open(StoreConfig(root_dir=root, check_crc_on_recover=True))
    open_s = time.perf_counter() - t0
    try:
        if not store.wait_dispatched(600):
            raise RuntimeError("the index catch-up did not finish in 600 s")
        ready_s = time.perf_counter() - t0
        rec = store.recovery
        assert rec is not None
        if rec.mode.value != "abnormal":
            raise RuntimeError(f"expected abnormal recovery, got {rec.mode.value}")
        run = Run(rec.records, rec.seconds)
        run.extra.update(
            scanned_bytes=rec.scanned_bytes,
            open_seconds=open_s,
            ready_seconds=ready_s,
            stop_reason=rec.stop_reason,
        )
    finally:
        store.abandon()
    return run


def scan_only(root: Path) -> Run:
    """The CommitLog scan alone: ``recovery.scan`` from the first segment, CRC checked,
    no callback (``open`` also re-dispatches every record to the consume queues and
    the index during the scan). Read-only: positions and files are not changed.
    """
    from mqstore.commitlog.recovery import scan
    from mqstore.commitlog.segments import Segments

    segments = Segments(root / "commitlog", StoreConfig().commitlog_file_size)
    segments.load()
    try:
        t0 = time.perf_counter()
        _end, records, scanned, why = scan(segments, 0, check_crc=True)
        seconds = time.perf_counter() - t0
    finally:
        segments.close()
    run = Run(records, seconds)
    run.extra.update(
        scanned_bytes=scanned, open_seconds=seconds, ready_seconds=seconds, stop_reason=why
    )
    return run


# ------------------------------------------------------- read back, clean open


def fill_store(root: Path, pool: Sequence[Item], count: int) -> None:
    """A store at ``root`` holding ``count`` messages of ``pool`` (cycled) in queue 0 of
    one topic, put in batches of 32, dispatched and closed cleanly."""
    store = _open(root, FlushDiskType.ASYNC_FLUSH)
    try:
        msgs = [it.message() for it in pool]
        batches = chunked(msgs, 32)
        done = 0
        while done < count:
            for whole in batches:
                b = whole[: count - done]
                if not b:
                    break
                store.put_messages(b)
                done += len(b)
        if not store.wait_dispatched(3600):
            raise RuntimeError("dispatch did not catch up in an hour")
    finally:
        store.close()


def _open_verified(root: Path) -> MessageStore:
    """Open a filled store and wait for the background verify a trusted open starts
    (``verify_clean_open``), so that it does not run on a read's clock."""
    store = MessageStore.open(StoreConfig(root_dir=root))
    if store.recovery.mode.value == "trusted":
        deadline = time.monotonic() + 600
        while store.verification is None and time.monotonic() < deadline:
            time.sleep(0.01)
    return store


def read_back(root: Path, batch: int = 32) -> Run:
    """Every message of a filled store's queue, ``get_message`` batches of ``batch``;
    each message's body and tags are read (what a consumer uses)."""
    store = _open_verified(root)
    try:
        get = store.get_message
        t0 = time.perf_counter()
        n = 0
        offset = 0
        while True:
            r = get("bench", TOPIC, 0, offset, batch)
            msgs = r.messages
            if not msgs:
                break
            for m in msgs:
                n += m.body is not None and m.tags is not None
            offset = r.next_begin_offset
        return Run(n, time.perf_counter() - t0)
    finally:
        store.close()


def read_batches(root: Path, tags: bool, batch: int = 1024) -> Run:
    """Every message of a filled store's queue through ``read_batch`` of ``batch``:
    the bodies (and each message's tags with ``tags``), nothing else decoded."""
    store = _open_verified(root)
    try:
        read = store.read_batch
        t0 = time.perf_counter()
        n = 0
        offset = 0
        while True:
            b = read(TOPIC, 0, offset, batch, tags=tags)
            if not b.bodies:
                break
            n += len(b.bodies)
            offset = b.next_begin_offset
        return Run(n, time.perf_counter() - t0)
    finally:
        store.close()


def open_seconds(root: Path) -> float:
    """Seconds ``MessageStore.open`` takes on a cleanly closed store (closed again,
    cleanly, off the clock)."""
    cfg = StoreConfig(root_dir=root)
    t0 = time.perf_counter()
    store = MessageStore.open(cfg)
    seconds = time.perf_counter() - t0
    store.close()
    return seconds
