"""Flush services: group commit batching and timeouts, async flush thresholds."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mqstore import FlushDiskType, Message, MessageStore, PutStatus, StoreConfig, faults
from mqstore.commitlog.flush import AsyncFlusher, FlushRequest, GroupCommitter
from mqstore.commitlog.segments import Segments

SIZE = 1 << 20


def sync_cfg(root: Path, **kw: Any) -> StoreConfig:
    return StoreConfig(
        root_dir=root, commitlog_file_size=SIZE, flush_disk_type=FlushDiskType.SYNC_FLUSH, **kw
    )


class StuckDisk:
    """A ``before_fdatasync`` hook that holds every sync (up to 5 s) until ``release`` is
    set; ``stuck`` is set once a sync is held."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.stuck = threading.Event()

    def __call__(self, **_: Any) -> None:
        if not self.release.is_set():
            self.stuck.set()
            self.release.wait(5)


def test_sync_put_ok_means_flushed_past_the_record(tmp_path: Path):
    with MessageStore.open(sync_cfg(tmp_path)) as s:
        r = s.put_message(Message(topic="t", body=b"durable"))
        assert r.status is PutStatus.PUT_OK
        assert s.flushed_physical_offset >= r.physical_offset + r.size


def test_group_commit_covers_many_producers_with_fewer_syncs(tmp_path: Path):
    n_threads, per_thread = 16, 40
    with MessageStore.open(sync_cfg(tmp_path)) as s:
        statuses: list[PutStatus] = []
        lock = threading.Lock()
        start = threading.Barrier(n_threads)

        def produce() -> None:
            start.wait()
            for _ in range(per_thread):
                st = s.put_message(Message(topic="t", body=b"x" * 100)).status
                with lock:
                    statuses.append(st)

        ts = [threading.Thread(target=produce) for _ in range(n_threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        total = n_threads * per_thread
        assert statuses == [PutStatus.PUT_OK] * total
        assert s.flusher.syncs < total


def test_stuck_sync_returns_flush_disk_timeout(tmp_path: Path):
    disk = StuckDisk()

    with MessageStore.open(sync_cfg(tmp_path, sync_flush_timeout_ms=200)) as s:
        with faults.inject("before_fdatasync", disk):
            r = s.put_message(Message(topic="t", body=b"slow disk"))
            disk.release.set()
        assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert r.status.stored
        assert s.look_message_by_offset(r.physical_offset) is not None


def test_wait_false_does_not_wait_for_flush(tmp_path: Path):
    disk = StuckDisk()
    with MessageStore.open(sync_cfg(tmp_path, sync_flush_timeout_ms=200)) as s:
        with faults.inject("before_fdatasync", disk):
            r = s.put_message(Message(topic="t", body=b"fire and forget", wait_store_msg_ok=False))
            disk.release.set()
        assert r.status is PutStatus.PUT_OK


def test_async_put_returns_before_any_flush(tmp_path: Path):
    cfg = StoreConfig(
        root_dir=tmp_path, commitlog_file_size=SIZE, flush_interval_commitlog_ms=60_000
    )
    with MessageStore.open(cfg) as s:
        r = s.put_message(Message(topic="t", body=b"in page cache"))
        assert r.status is PutStatus.PUT_OK
        assert s.flushed_physical_offset == 0


def test_async_flusher_waits_for_least_pages(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    fl = AsyncFlusher(
        segs, interval_ms=500, least_pages=4, thorough_interval_ms=10_000, on_error=lambda e: None
    )
    mf = segs.last_for_write(0)
    mf.append(b"x" * (3 * 4096))
    fl.flush_once()
    assert segs.flushed_where == 0
    mf.append(b"x" * 4096)
    fl.flush_once()
    assert segs.flushed_where == 4 * 4096
    segs.close()


def test_async_thorough_flush_syncs_a_single_byte(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    fl = AsyncFlusher(
        segs, interval_ms=500, least_pages=4, thorough_interval_ms=0, on_error=lambda e: None
    )
    segs.last_for_write(0).append(b"x")
    fl.flush_once()
    assert segs.flushed_where == 1
    segs.close()


def test_close_flushes_everything_in_async_mode(tmp_path: Path):
    cfg = StoreConfig(
        root_dir=tmp_path, commitlog_file_size=SIZE, flush_interval_commitlog_ms=60_000
    )
    s = MessageStore.open(cfg)
    r = s.put_message(Message(topic="t", body=b"x"))
    s.close()
    assert s.flushed_physical_offset == r.physical_offset + r.size


def test_relay_skips_a_producer_that_timed_out_and_wakes_the_next(tmp_path: Path):
    # A timed out while the disk was stuck; B, in the same batch, must still be woken
    # by the relay when the sync completes (not left to time out in turn).
    disk = StuckDisk()

    results: dict[str, PutStatus] = {}
    with MessageStore.open(sync_cfg(tmp_path, sync_flush_timeout_ms=600)) as s:
        with faults.inject("before_fdatasync", disk):

            def put(name: str) -> None:
                results[name] = s.put_message(Message(topic="t", body=name.encode())).status

            z = threading.Thread(target=put, args=("z",))  # its sync gets stuck
            z.start()
            assert disk.stuck.wait(5)
            a = threading.Thread(target=put, args=("a",))
            a.start()
            time.sleep(0.4)
            b = threading.Thread(target=put, args=("b",))
            b.start()
            a.join(5)  # a times out at ~0.6 s, b would at ~1.0 s
            assert results["a"] is PutStatus.FLUSH_DISK_TIMEOUT
            t0 = time.monotonic()
            disk.release.set()
            b.join(5)
            z.join(5)
        assert results["b"] is PutStatus.PUT_OK
        assert time.monotonic() - t0 < 0.3


def test_relay_wakes_every_producer_of_a_large_batch(tmp_path: Path):
    # 64 producers held behind one stuck sync form one batch; all are acked once it
    # completes, each woken by its predecessor.
    disk = StuckDisk()

    n = 64
    with MessageStore.open(sync_cfg(tmp_path, sync_flush_timeout_ms=5000)) as s:
        statuses: list[PutStatus] = []
        lock = threading.Lock()

        def put() -> None:
            st = s.put_message(Message(topic="t", body=b"x")).status
            with lock:
                statuses.append(st)

        with faults.inject("before_fdatasync", disk):
            ts = [threading.Thread(target=put) for _ in range(n)]
            for t in ts:
                t.start()
            time.sleep(0.3)
            syncs = s.flusher.syncs
            disk.release.set()
            for t in ts:
                t.join(10)
        assert statuses == [PutStatus.PUT_OK] * n
        assert s.flusher.syncs - syncs <= 3


def test_a_timed_out_producer_in_the_relay_is_passed_over(tmp_path: Path):
    cfg = sync_cfg(tmp_path)
    segs = Segments(cfg.commitlog_path, SIZE)
    gc = GroupCommitter(segs, timeout_ms=1000, on_error=lambda e: None)
    a, b, c = FlushRequest(1), FlushRequest(2), FlushRequest(3)
    a.successor, b.successor = b, c
    b.gone = True
    gc._wake_next(a)
    assert a.done.acquire(blocking=False)
    gc._wake_next(a.successor)
    assert not b.done.acquire(blocking=False)
    assert c.done.acquire(blocking=False)


def test_relay_passes_over_a_producer_interrupted_by_a_signal(tmp_path: Path):
    # The main thread waits for its group commit and a signal handler raises in it
    # (Ctrl-C does this); the producer behind it in the same batch is still acked as
    # soon as the sync completes.
    disk = StuckDisk()

    class Interrupted(Exception):
        pass

    def raise_interrupted(*_: Any) -> None:
        raise Interrupted

    results: dict[str, PutStatus] = {}
    old = signal.signal(signal.SIGALRM, raise_interrupted)
    try:
        with MessageStore.open(sync_cfg(tmp_path, sync_flush_timeout_ms=3000)) as s:
            with faults.inject("before_fdatasync", disk):

                def put(name: str, delay: float) -> None:
                    time.sleep(delay)
                    results[name] = s.put_message(Message(topic="t", body=name.encode())).status

                z = threading.Thread(target=put, args=("z", 0.0))  # its sync gets stuck
                z.start()
                assert disk.stuck.wait(5)
                b = threading.Thread(target=put, args=("b", 0.1))  # behind main's request
                b.start()
                signal.setitimer(signal.ITIMER_REAL, 0.4)
                with pytest.raises(Interrupted):
                    s.put_message(Message(topic="t", body=b"main"))
                t0 = time.monotonic()
                disk.release.set()
                b.join(5)
                z.join(5)
            assert results["b"] is PutStatus.PUT_OK
            assert time.monotonic() - t0 < 1.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
