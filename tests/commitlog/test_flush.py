"""Flush services: group commit batching and timeouts, async flush thresholds."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from store import FlushDiskType, Message, MessageStore, PutStatus, StoreConfig, faults
from store.commitlog.flush import AsyncFlusher
from store.commitlog.segments import Segments

SIZE = 1 << 20


def sync_cfg(root: Path, **kw: Any) -> StoreConfig:
    return StoreConfig(
        root_dir=root, commitlog_file_size=SIZE, flush_disk_type=FlushDiskType.SYNC_FLUSH, **kw
    )


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
    release = threading.Event()

    def block(**_: Any) -> None:
        release.wait(5)

    with MessageStore.open(sync_cfg(tmp_path, sync_flush_timeout_ms=200)) as s:
        with faults.inject("before_fdatasync", block):
            r = s.put_message(Message(topic="t", body=b"slow disk"))
            release.set()
        assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert r.status.stored
        assert s.look_message_by_offset(r.physical_offset) is not None


def test_wait_false_does_not_wait_for_flush(tmp_path: Path):
    release = threading.Event()
    with MessageStore.open(sync_cfg(tmp_path, sync_flush_timeout_ms=200)) as s:
        with faults.inject("before_fdatasync", lambda **_: release.wait(5)):
            r = s.put_message(Message(topic="t", body=b"fire and forget", wait_store_msg_ok=False))
            release.set()
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
