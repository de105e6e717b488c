"""Flush services survive an unexpected exception (issue 17): counted, logged once, go on.

A failed ``fdatasync`` (OSError) still poisons the store; that is pinned in test_flush.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from mqstore import FlushDiskType, Message, MessageStore, PutStatus, StoreConfig, faults
from mqstore.commitlog.flush import AsyncFlusher

SIZE = 1 << 20


def _once(exc: BaseException) -> Any:
    """Raise ``exc`` from the first sync of a CommitLog segment (not of a consume queue,
    the checkpoint or a config file, whose flushers also pass this point)."""
    fired = threading.Event()

    def hook(what: str = "", **_: Any) -> None:
        if "commitlog" in what and not fired.is_set():
            fired.set()
            raise exc

    return hook


def _sync_flush(root: Path) -> StoreConfig:
    """A SYNC_FLUSH store whose puts wait up to 2 s for their group commit."""
    return StoreConfig(
        root_dir=root, commitlog_file_size=SIZE, flush_disk_type=FlushDiskType.SYNC_FLUSH,
        sync_flush_timeout_ms=2000,
    )  # fmt: skip


def test_group_commit_goes_on_after_a_non_oserror_in_a_sync(tmp_path: Path):
    with MessageStore.open(_sync_flush(tmp_path)) as s:
        with faults.inject("before_fdatasync", _once(RuntimeError("bug in a sync"))):
            first = s.put_message(Message(topic="t", body=b"one"))
            second = s.put_message(Message(topic="t", body=b"two"))
        assert first.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert second.status is PutStatus.PUT_OK
        assert s.flushed_physical_offset >= second.physical_offset + second.size
        assert s.flusher.failures.counts() == {"flush": 1}


def test_group_commit_goes_on_when_its_after_flush_callback_raises(tmp_path: Path):
    with MessageStore.open(_sync_flush(tmp_path)) as s:
        calls = 0

        def bad_callback() -> None:
            nonlocal calls
            calls += 1
            raise KeyError("callback bug")

        s.flusher._on_flushed = bad_callback  # type: ignore[union-attr]
        statuses = [s.put_message(Message(topic="t", body=b"x")).status for _ in range(3)]
        assert statuses == [PutStatus.PUT_OK] * 3
        assert calls >= 3
        assert s.flusher.failures.counts()["on_flushed"] == calls


def test_async_flusher_goes_on_after_a_non_oserror_in_a_round(tmp_path: Path):
    cfg = StoreConfig(root_dir=tmp_path, commitlog_file_size=SIZE)
    with MessageStore.open(cfg) as s:
        flusher = s.flusher
        assert isinstance(flusher, AsyncFlusher)
        flusher._least_pages = 0  # every round flushes whatever is there
        with faults.inject("before_fdatasync", _once(RuntimeError("bug in a sync"))):
            r = s.put_message(Message(topic="t", body=b"later durable"))
            deadline = time.monotonic() + 30
            while s.flushed_physical_offset < r.physical_offset + r.size:
                assert time.monotonic() < deadline, "the flusher stopped"
                time.sleep(0.02)
        assert flusher.failures.counts() == {"flush": 1}
        assert s.put_message(Message(topic="t", body=b"still accepted")).status is PutStatus.PUT_OK
