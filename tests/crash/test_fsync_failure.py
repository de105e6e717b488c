"""A failed fsync poisons the store (LevelDB's background error, Kafka's offline log dir).

After ``fdatasync`` fails nobody knows which unflushed bytes reached the disk, and on
Linux a retried fsync can succeed without writing them ("fsyncgate"). So the put
that waited gets FLUSH_DISK_TIMEOUT, every later put SERVICE_NOT_AVAILABLE with the
reason, close() keeps ``abort`` so the next open re-validates the tail, and a reopen
recovers and takes writes again. Faults come from the ``before_fdatasync`` /
``before_write_checkpoint`` fault points.
"""

from __future__ import annotations

import errno
import random
import threading
import time
from pathlib import Path

import pytest

from mqstore import FlushDiskType, Message, MessageStore, PutStatus, faults
from mqstore.commitlog.recovery import RecoveryMode
from tests.helpers import check_consistency, make_store, reopen
from tests.powerloss import DiskModel, power_loss

pytestmark = pytest.mark.crash

SYNC = FlushDiskType.SYNC_FLUSH
ASYNC = FlushDiskType.ASYNC_FLUSH


def _store(tmp_path: Path, mode: FlushDiskType = SYNC, **cfg) -> MessageStore:
    return make_store(tmp_path, flush_disk_type=mode, message_index_enable=False, **cfg)


def _msg(i: int) -> Message:
    return Message(topic="orders", body=f"message {i}".encode(), keys=[f"k{i}"])


def _put_under_eio(store: MessageStore, msg: Message):
    with faults.inject("before_fdatasync", faults.raise_oserror(errno.EIO)):
        return store.put_message(msg)


def test_failed_fsync_returns_flush_disk_timeout(tmp_path: Path):
    store = _store(tmp_path)
    r = _put_under_eio(store, _msg(0))
    store.abandon()
    assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
    assert r.status.stored and r.physical_offset == 0


def test_failed_fsync_poisons_the_store_with_the_os_error(tmp_path: Path):
    store = _store(tmp_path)
    _put_under_eio(store, _msg(0))
    poison = store.poisoned
    store.abandon()
    assert isinstance(poison, OSError)
    assert poison.errno == errno.EIO


def test_poisoned_store_refuses_the_next_put_with_the_reason(tmp_path: Path):
    store = _store(tmp_path)
    _put_under_eio(store, _msg(0))
    end = store.max_physical_offset
    r = store.put_message(_msg(1))
    assert store.max_physical_offset == end  # nothing appended after the failure
    store.abandon()
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert not r.status.stored
    assert "poisoned" in (r.error or "")
    assert "Input/output error" in (r.error or "")
    assert "reopen" in (r.error or "")


def test_poisoned_store_refuses_batches(tmp_path: Path):
    store = _store(tmp_path)
    _put_under_eio(store, _msg(0))
    rs = store.put_messages([_msg(1), _msg(2)])
    store.abandon()
    assert [r.status for r in rs] == [PutStatus.SERVICE_NOT_AVAILABLE] * 2


def test_store_stays_poisoned_after_the_disk_works_again(tmp_path: Path):
    store = _store(tmp_path)
    _put_under_eio(store, _msg(0))
    r = store.put_message(_msg(1))  # no fault injected any more
    store.abandon()
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE


def test_failed_fsync_of_a_batch_times_out_every_message(tmp_path: Path):
    store = _store(tmp_path)
    with faults.inject("before_fdatasync", faults.raise_oserror(errno.EIO)):
        rs = store.put_messages([_msg(0), _msg(1), _msg(2)])
    store.abandon()
    assert [r.status for r in rs] == [PutStatus.FLUSH_DISK_TIMEOUT] * 3


def test_close_after_failed_fsync_keeps_abort(tmp_path: Path):
    store = _store(tmp_path)
    _put_under_eio(store, _msg(0))
    store.close()
    assert (store.root / "abort").exists()


def test_reopen_after_failed_fsync_recovers_abnormally_and_accepts_writes(tmp_path: Path):
    store = _store(tmp_path)
    ok = store.put_message(_msg(0))
    failed = _put_under_eio(store, _msg(1))
    store.close()
    store = reopen(store)
    try:
        assert store.recovery is not None
        assert store.recovery.mode is RecoveryMode.ABNORMAL
        assert store.poisoned is None
        first = store.look_message_by_offset(ok.physical_offset)
        assert first is not None and first.body == b"message 0"
        # No power was lost: the page cache still held the unsynced record.
        second = store.look_message_by_offset(failed.physical_offset)
        assert second is not None and second.body == b"message 1"
        r = store.put_message(_msg(2))
        assert r.status is PutStatus.PUT_OK
        assert r.queue_offset == 2
    finally:
        store.close()
    assert check_consistency(store.root, store.cfg.commitlog_file_size) == []
    assert not (store.root / "abort").exists()


def test_failed_fsync_in_async_mode_poisons_the_store(tmp_path: Path):
    store = _store(tmp_path, ASYNC, flush_interval_commitlog_ms=1, flush_commitlog_least_pages=0)
    failed = threading.Event()

    def eio(**_: object) -> None:
        failed.set()
        raise OSError(errno.EIO, "Input/output error")

    with faults.inject("before_fdatasync", eio):
        assert store.put_message(_msg(0)).status is PutStatus.PUT_OK  # async: not waited
        assert failed.wait(5), "the async flusher never tried to sync"
        deadline = time.monotonic() + 30
        while store.poisoned is None and time.monotonic() < deadline:
            failed.wait(0.001)  # the flusher poisons right after the hook raises
    r = store.put_message(_msg(1))
    store.close()
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert (store.root / "abort").exists()


def test_failed_checkpoint_sync_at_close_keeps_abort(tmp_path: Path):
    store = _store(tmp_path)
    assert store.put_message(_msg(0)).status is PutStatus.PUT_OK
    with faults.inject("before_write_checkpoint", faults.raise_oserror(errno.EIO)):
        store.close()
    assert (store.root / "abort").exists()
    store = reopen(store)
    try:
        assert store.recovery is not None
        assert store.recovery.mode is RecoveryMode.ABNORMAL
        assert [r.body for r in store.iter_records()] == [b"message 0"]
    finally:
        store.close()


@pytest.mark.parametrize("seed", range(6))
def test_failed_fsync_then_power_loss_keeps_every_acked_message(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    root = tmp_path / "store"
    model = DiskModel(root)
    with model.installed():
        store = _store(tmp_path, commitlog_file_size=8192)
        acked = [store.put_message(_msg(i)) for i in range(rng.randrange(1, 60))]
        model.fail_syncs(errno.EIO)
        failed = store.put_message(_msg(999))
        image = store.abandon()
    report = power_loss(image, rng, model)
    assert report.violations == []
    store = reopen(store)
    try:
        assert failed.status is PutStatus.FLUSH_DISK_TIMEOUT
        for i, r in enumerate(acked):
            assert r.status is PutStatus.PUT_OK
            rec = store.look_message_by_offset(r.physical_offset)
            assert rec is not None and rec.body == f"message {i}".encode()
        assert check_consistency(root, 8192, end=store.max_physical_offset) == []
        assert store.put_message(_msg(1000)).status is PutStatus.PUT_OK
    finally:
        store.close()
