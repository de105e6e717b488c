"""MessageStore: the composition root. It wires components and owns no algorithm.

Lifecycle (RocketMQ ``DefaultMessageStore`` load/recover/start/shutdown):

1. take the ``lock`` file (a second opener gets :class:`StoreLockedError`);
2. ``last_exit_ok`` = the ``abort`` file is absent;
3. load segments, consume queues, checkpoint and index; recover the queues, then the
   CommitLog (abnormal recovery re-dispatches what it scans), cutting the torn tail
   and the units past it; dispatch what the queues lack; the topic-queue table is
   the queues' max offsets (details in ``store.logics``);
4. write ``abort`` (our PID, as 5.x), start flush, dispatch, queue-flush, schedule
   and cleanup services;
5. ``close()``: stop services, flush, drain the dispatcher, flush queues, index and
   checkpoint, delete ``abort`` (only when dispatch completed), release the lock. A
   store poisoned by a failed fsync keeps ``abort`` so the next open re-validates.

The read API (``get_message``, offsets, ``query_by_key``, ...) is in ``store.pull``,
the write API (``put_message``, ``put_messages``) in ``store.put``.

Puts are thread-safe. See ``store.commitlog.flush`` for what PUT_OK promises under
each flush mode.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from store import _platform
from store.checkpoint import Checkpoint
from store.cleanup import CleanupResult, DiskGuard
from store.commitlog import format as fmt
from store.commitlog.commitlog import CommitLog, queue_key
from store.commitlog.flush import AsyncFlusher, GroupCommitter
from store.commitlog.recovery import RecoveryResult, recover, scan_headers
from store.commitlog.segments import Segments
from store.compression import parse_type
from store.config import BrokerRole, FlushDiskType, StoreConfig
from store.consumequeue.get import PullLimits
from store.errors import StoreClosedError, StoreLockedError
from store.ha import service as ha_service
from store.logics import Logics
from store.message import (
    host_bytes,
    new_uniq_key,
)
from store.pull import PullAPI
from store.put import MAX_RECORD_SLACK, PutAPI, PutResult


@dataclass(frozen=True, slots=True)
class CrashImage:
    """What ``abandon()`` leaves: per segment path, (flushed, written) positions."""

    segments: dict[str, tuple[int, int]]
    checkpoint_path: str


class MessageStore(PullAPI, PutAPI):
    """A RocketMQ-layout message store on one directory. Use :meth:`open`."""

    def __init__(self, cfg: StoreConfig) -> None:
        self.cfg = cfg
        self.root = cfg.root
        self._lock_fd = -1
        self._closed = True
        self._refuse_puts = True
        self._host_hex = host_bytes(cfg.store_host).hex().upper()
        self._poison: BaseException | None = None
        self._disk_full: str | None = None
        self.disk_guard = DiskGuard(
            [cfg.commitlog_path, cfg.root], cfg.disk_space_warning_level_ratio, self._on_disk_full
        )
        """RocketMQ's disk-full flag (``store.cleanup``): checked per cleanup round and
        per created segment or index file, never per put."""
        self.ha: ha_service.HAService | None = None  # replication (store.ha.service)
        self._replica_wait: ha_service.ReplicaWait | None = None
        self._state_lock = threading.Lock()
        self.recovery: RecoveryResult | None = None
        self.last_exit_ok = True
        self._compress_type = parse_type(cfg.compress_type)
        self._born_cache: dict[tuple[str, int], bytes] = {}
        self._topic_bytes: dict[str, bytes] = {}
        self._next_uniq = new_uniq_key
        self._max_record = min(
            cfg.max_message_size + MAX_RECORD_SLACK,
            cfg.commitlog_file_size - fmt.END_FILE_MIN_BLANK_LENGTH,
        )
        self._pull_limits = PullLimits.from_config(cfg)
        # Bodies the fast put takes: under the compression threshold and the size limit.
        self._fast_body_limit = min(cfg.compress_msg_body_over, cfg.max_message_size + 1)
        self._fast_puts = True  # False while a replica must ack (SYNC_MASTER): general path

    # ------------------------------------------------------------------ open

    @classmethod
    def open(cls, cfg: StoreConfig) -> MessageStore:
        """Open (creating if needed), recover and start a store.

        Raises:
            StoreLockedError: another process (or open store) holds the directory.
            SegmentLoadError: a segment file has the wrong size or name.
            OSError: the directory is not usable.
        """
        store = cls(cfg)
        store._open()
        return store

    def _open(self) -> None:
        cfg = self.cfg
        self.root.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        try:
            abort = self.root / "abort"
            self.last_exit_ok = not abort.exists()
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
            self.ha = ha_service.start_for(cfg, self.commitlog)
            self._replica_wait = self.ha.replica_wait if self.ha is not None else None
            self._fast_puts = self._replica_wait is None
            self._write_abort(abort)
            self._start_flusher()
            self._closed = False
            self.disk_guard.check()
            self._update_refuse_puts()
            self.logics.start(
                limit=self._dispatch_limit,
                put=lambda m: self.put_message(m).status,
                read=lambda phys, _size: self.look_message_by_offset(phys),
                on_error=self._poison_store,
                master=cfg.broker_role is not BrokerRole.SLAVE,
                disk_guard=self.disk_guard,
                lock_fd=self._lock_fd,
            )
        except BaseException:
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
            raise

    def _dispatch_limit(self) -> int:
        """How far the dispatcher may read: flushed data only under SYNC_FLUSH."""
        sync = self.cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
        return self.segments.flushed_where if sync else self.segments.max_offset

    def clean_expired_files(
        self, *, force: bool = True, immediately: bool = False
    ) -> CleanupResult:
        """One cleanup round now (``store.cleanup``): ``force`` = as at the delete hour;
        ``immediately`` = whatever the files' age.

        Raises:
            OSError: a file could not be deleted.
        """
        if self.logics.cleanup is None:
            raise StoreClosedError(f"store {self.root} is closed")
        return self.logics.cleanup.clean(force=force, immediately=immediately)

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
        self.flusher: GroupCommitter | AsyncFlusher
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

    # ------------------------------------------------------------------ state

    @property
    def disk_full(self) -> str | None:
        """Why puts are refused for lack of disk space (None: they are not).

        Set above ``disk_space_warning_level_ratio`` used; cleared by the next check
        (cleanup round, created file, or :meth:`check_disk`) below it.
        """
        return self._disk_full

    def check_disk(self) -> float:
        """Measure the disk now (as a cleanup round does) and return the used ratio."""
        return self.disk_guard.check()

    @property
    def index_disabled(self) -> str | None:
        """Why the index is not being built (no space for it), or None.

        Consume queues keep being built meanwhile; the index catches up by itself
        once space is available.
        """
        return self.logics.index_disabled

    @property
    def poisoned(self) -> BaseException | None:
        """The flush error that poisoned this store, if any."""
        return self._poison

    @property
    def max_physical_offset(self) -> int:
        """One past the last byte of the CommitLog."""
        return self.commitlog.max_offset

    @property
    def min_physical_offset(self) -> int:
        """First byte of the CommitLog still held."""
        return self.commitlog.min_offset

    @property
    def flushed_physical_offset(self) -> int:
        """CommitLog bytes known durable."""
        return self.segments.flushed_where

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next message to (topic, queue_id) will get."""
        return self.commitlog.topic_queue_table.get(queue_key(topic, queue_id), 0)

    # ------------------------------------------------------------------- reads

    def look_message_by_offset(self, physical_offset: int) -> fmt.MessageRecord | None:
        """The record starting at ``physical_offset``, or None if none valid is there."""
        r = self.commitlog.decode_at(physical_offset, check_crc=True)
        return r.record if isinstance(r, fmt.Record) else None

    def iter_records(self, from_offset: int | None = None) -> list[fmt.MessageRecord]:
        """Every record from ``from_offset`` (default: the start) to the end, in order."""
        offsets: list[int] = []
        start = self.min_physical_offset if from_offset is None else from_offset
        scan_headers(
            self.segments,
            start,
            self.max_physical_offset,
            lambda r, _s: offsets.append(r.physical_offset),
        )
        found = (self.look_message_by_offset(o) for o in offsets)
        return [r for r in found if r is not None]

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

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"MessageStore({str(self.root)!r}, {state})"


__all__ = ["CrashImage", "MessageStore", "PutResult"]
