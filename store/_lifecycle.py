"""The lifecycle half of :class:`~mqstore.message_store.MessageStore`: what an open store holds.

A mixin: :class:`StoreLifecycle` takes and gives back the store's resources, the
``lock`` file, the ``abort`` marker, the loaded and recovered segments, checkpoint and
logic files, and the flusher. It owns the poisoned / disk-full / refuse-puts state
and the three ways out: :meth:`~StoreLifecycle.flush`, :meth:`~StoreLifecycle.close`
and :meth:`~StoreLifecycle.abandon`. ``MessageStore._open`` is the open sequence
(its steps are listed in ``mqstore.message_store``), made of the steps here; the
algorithms stay in the components (``mqstore.commitlog.recovery``, ``mqstore.logics``,
``mqstore.commitlog.flush``).

Contract: ``MessageStore.__init__`` sets the state attributes declared below (lock
fd, flags, ``disk_guard``, ``ha``, ``_state_lock``); ``_load_and_recover`` and
``_start_flusher`` set the components. ``_poison_store`` and ``_on_disk_full`` may be
called from any thread (flusher, cleanup, dispatcher); ``close`` and ``abandon`` are
called by the owner, after the last put it waits for.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mqstore import _platform
from mqstore.checkpoint import Checkpoint
from mqstore.cleanup import DiskGuard
from mqstore.commitlog.commitlog import CommitLog
from mqstore.commitlog.flush import AsyncFlusher, GroupCommitter
from mqstore.commitlog.recovery import RecoveryResult, recover
from mqstore.commitlog.segments import Segments
from mqstore.config import BrokerRole, FlushDiskType, StoreConfig
from mqstore.errors import StoreClosedError, StoreLockedError
from mqstore.ha import service as ha_service
from mqstore.logics import Logics
from mqstore.message import host_bytes


@dataclass(frozen=True, slots=True)
class CrashImage:
    """What ``abandon()`` leaves: per segment path, (flushed, written) positions."""

    segments: dict[str, tuple[int, int]]
    checkpoint_path: str


class StoreLifecycle:
    """Lock, load and recover, flusher, poisoning, flush/close/abandon (mixed into
    MessageStore)."""

    cfg: StoreConfig
    root: Path
    segments: Segments
    checkpoint: Checkpoint
    logics: Logics
    commitlog: CommitLog
    flusher: GroupCommitter | AsyncFlusher
    disk_guard: DiskGuard
    ha: ha_service.HAService | None
    recovery: RecoveryResult | None
    last_exit_ok: bool
    _lock_fd: int
    _closed: bool
    _refuse_puts: bool
    _poison: BaseException | None
    _disk_full: str | None
    _state_lock: threading.Lock
    _frame: Callable[[int, int, bytes, bytes], tuple[bytes, int, int]]

    # ------------------------------------------------------------------ open

    def _load_and_recover(self) -> None:
        """Open step 3: load segments, queues, checkpoint and index, recover them."""
        cfg = self.cfg
        self.segments = Segments(cfg.commitlog_path, cfg.commitlog_file_size)
        self.segments.load()
        self.checkpoint = Checkpoint(self.root / "checkpoint")
        self.segments.on_create = self.disk_guard.check
        self.logics = Logics(cfg, self.segments, self.checkpoint)
        if self.logics.index is not None:
            self.logics.index.on_new_file = self.disk_guard.check
        self.logics.dispatcher.on_no_space = self.disk_guard.check
        self.logics.load(last_exit_ok=self.last_exit_ok)
        self.commitlog = CommitLog(self.segments, host_bytes(cfg.store_host))
        self._frame = self.commitlog.encoder.frame
        self.recovery = recover(
            self.segments,
            self.checkpoint,
            last_exit_ok=self.last_exit_ok,
            check_crc=cfg.check_crc_on_recover,
            on_record=self.logics.recover(last_exit_ok=self.last_exit_ok),
        )
        self.commitlog.topic_queue_table.update(
            self.logics.after_log_recovery(
                end=self.recovery.end_offset, last_exit_ok=self.last_exit_ok
            )
        )

    def _undo_open(self) -> None:
        """A failed open: stop and close whatever it started, release the lock."""
        if self.ha is not None:
            self.ha.stop()
            self.ha = None
        if hasattr(self, "logics"):
            self.logics.abandon()
        # Unmap what was loaded before the failure (a bad segment file, ENOSPC on
        # the checkpoint): each failed open used to leak its file descriptors.
        if hasattr(self, "segments"):
            self.segments.close()
        if hasattr(self, "checkpoint"):
            self.checkpoint.close()
        self._release_lock()

    def _dispatch_limit(self) -> int:
        """How far the dispatcher may read: flushed data only under SYNC_FLUSH."""
        sync = self.cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
        return self.segments.flushed_where if sync else self.segments.max_offset

    @staticmethod
    def _write_abort(abort: Path) -> None:
        """Create ``abort`` durably: were it lost in a power failure, the next open
        would run normal recovery, which trusts all but the last three segments."""
        fd = os.open(abort, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, str(os.getpid()).encode())
            _platform.fdatasync(fd, what=str(abort))
        finally:
            os.close(fd)
        _platform.fsync_dir(abort.parent)

    def _take_lock(self) -> None:
        path = self.root / "lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _platform.try_lock(fd):
            os.close(fd)
            raise StoreLockedError(
                f"{self.root} is in use by another process or open store (lock file {path})"
            )
        os.ftruncate(fd, 0)
        os.write(fd, b"lock")
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd >= 0:
            _platform.unlock(self._lock_fd)
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _start_flusher(self) -> None:
        cfg = self.cfg
        if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self.flusher = GroupCommitter(
                self.segments,
                timeout_ms=cfg.sync_flush_timeout_ms,
                on_error=self._poison_store,
                on_flushed=self._note_flushed,
            )
        else:
            self.flusher = AsyncFlusher(
                self.segments,
                interval_ms=cfg.flush_interval_commitlog_ms,
                least_pages=cfg.flush_commitlog_least_pages,
                thorough_interval_ms=cfg.flush_commitlog_thorough_interval_ms,
                on_error=self._poison_store,
                on_flushed=self._note_flushed,
            )
        self.flusher.start()

    def _note_flushed(self) -> None:
        ts = self.segments.flushed_store_timestamp
        if ts:
            self.checkpoint.physic_msg_timestamp = ts

    def _poison_store(self, err: BaseException) -> None:
        with self._state_lock:
            if self._poison is None:
                self._poison = err
            self._refuse_puts = True

    def _on_disk_full(self, reason: str | None) -> None:
        with self._state_lock:
            self._disk_full = reason
            self._update_refuse_puts()

    def _update_refuse_puts(self) -> None:
        """Puts take the checked path while anything refuses them (the fast path reads
        only this flag: no per-put cost for the reasons behind it)."""
        self._refuse_puts = (
            self._closed
            or self._poison is not None
            or self._disk_full is not None
            or self.cfg.broker_role is BrokerRole.SLAVE
        )

    # --------------------------------------------------------------- shutdown

    def flush(self) -> None:
        """Flush everything written so far and the checkpoint (a manual durability point).

        Raises:
            OSError: the sync failed (the store is then poisoned).
        """
        try:
            self.segments.flush_all()
            self._note_flushed()
            self.checkpoint.flush()
        except OSError as e:
            self._poison_store(e)
            raise

    def close(self) -> None:
        """Stop services, flush, persist the checkpoint, remove ``abort``, unlock."""
        if self._closed:
            return
        self.logics.stop_schedule()  # it puts: stop it while puts are still accepted
        self._closed = True
        self._refuse_puts = True
        if self.ha is not None:
            self.ha.stop()
        self.flusher.stop()
        clean = self._poison is None
        if clean:
            try:
                self.flush()
            except OSError:
                clean = False
        dispatched = self.logics.stop()  # drains the dispatcher, flushes queues + index
        self.segments.close()
        self.checkpoint.close()
        if clean and dispatched and self._poison is None:
            (self.root / "abort").unlink(missing_ok=True)
        self._release_lock()

    def abandon(self) -> CrashImage:
        """Stop as if the process died: no flush, ``abort`` left behind, lock released.

        For fault-injection tests and the flush lab: the returned image says which
        bytes of each segment were durable (flushed) when the "crash" happened.
        """
        if self._closed:
            raise StoreClosedError("store already closed")
        self._closed = True
        self._refuse_puts = True
        if self.ha is not None:
            self.ha.stop()
        self.flusher._stopped.set()
        self.flusher._wake.set()
        with self.commitlog.put_lock:
            image = CrashImage(
                {
                    str(mf.path): (mf.flushed_position, mf.wrote_position)
                    for mf in self.segments.files
                },
                str(self.checkpoint.path),
            )
        self.flusher.stop()
        self.logics.abandon()
        self.segments.close()
        self.checkpoint.close()
        self._release_lock()
        return image


__all__ = ["CrashImage", "StoreLifecycle"]
