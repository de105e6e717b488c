"""MessageStore: the composition root. It wires components and owns no algorithm.

Lifecycle (RocketMQ ``DefaultMessageStore`` load/recover/start/shutdown):

1. take the ``lock`` file (a second opener gets :class:`StoreLockedError`);
2. ``last_exit_ok`` = the ``abort`` file is absent;
3. load segments, consume queues, checkpoint and index; recover the queues, then the
   CommitLog (abnormal recovery re-dispatches what it scans), cutting the torn tail
   and the units past it; dispatch what the queues lack; the topic-queue table is
   the queues' max offsets (details in ``mqstore.logics``);
4. write ``abort`` (our PID, as 5.x), start flush, dispatch, queue-flush, schedule
   and cleanup services;
5. ``close()``: stop services, flush, drain the dispatcher, flush queues, index and
   checkpoint, delete ``abort`` (only when dispatch completed), release the lock. A
   store poisoned by a failed fsync keeps ``abort`` so the next open re-validates.

The read API (``get_message``, offsets, ``query_by_key``, ...) is in ``mqstore.pull``,
the write API (``put_message``, ``put_messages``) in ``mqstore.put``, the steps of the
lifecycle (lock, load and recover, flusher, ``flush``/``close``/``abandon``) in
``mqstore._lifecycle``.

Puts are thread-safe. See ``mqstore.commitlog.flush`` for what PUT_OK promises under
each flush mode.
"""

from __future__ import annotations

import threading
from types import TracebackType

from mqstore._lifecycle import CrashImage, StoreLifecycle
from mqstore.cleanup import CleanupResult, DiskGuard
from mqstore.commitlog import format as fmt
from mqstore.commitlog.commitlog import queue_key
from mqstore.commitlog.recovery import RecoveryResult, scan_headers
from mqstore.compression import parse_type
from mqstore.config import BrokerRole, StoreConfig
from mqstore.consumequeue.get import PullLimits
from mqstore.errors import StoreClosedError
from mqstore.ha import service as ha_service
from mqstore.message import (
    host_bytes,
    new_uniq_key,
)
from mqstore.pull import PullAPI
from mqstore.put import MAX_RECORD_SLACK, PutAPI, PutResult


class MessageStore(PullAPI, PutAPI, StoreLifecycle):
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
        """RocketMQ's disk-full flag (``mqstore.cleanup``): checked per cleanup round and
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
            GeometryError: a size ``cfg`` leaves unset cannot be told from the files.
        """
        from mqstore import geometry  # the sizes cfg leaves unset: the store's own files'

        store = cls(geometry.for_open(cfg)[0])
        store._open()
        return store

    def _open(self) -> None:
        """Steps 1-4 of the lifecycle above; a failure undoes them (``_undo_open``)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        try:
            abort = self.root / "abort"
            self.last_exit_ok = not abort.exists()
            self._load_and_recover()
            self.ha = ha_service.start_for(self.cfg, self.commitlog)
            self._replica_wait = self.ha.replica_wait if self.ha is not None else None
            self._fast_puts = self._replica_wait is None
            self._write_abort(abort)
            self._start_flusher()
            self._closed = False
            self.disk_guard.check()
            self._update_refuse_puts()
            self._start_logics()
        except BaseException:
            self._undo_open()
            raise

    def _start_logics(self) -> None:
        """Open step 4's services around the queues: reput, queue flush, schedule, cleanup."""
        self.logics.start(
            limit=self._dispatch_limit,
            put=lambda m: self.put_message(m).status,
            read=lambda phys, _size: self.look_message_by_offset(phys),
            on_error=self._poison_store,
            master=self.cfg.broker_role is not BrokerRole.SLAVE,
            disk_guard=self.disk_guard,
            lock_fd=self._lock_fd,
        )

    def clean_expired_files(
        self, *, force: bool = True, immediately: bool = False
    ) -> CleanupResult:
        """One cleanup round now (``mqstore.cleanup``): ``force`` = as at the delete hour;
        ``immediately`` = whatever the files' age.

        Raises:
            OSError: a file could not be deleted.
        """
        if self.logics.cleanup is None:
            raise StoreClosedError(f"store {self.root} is closed")
        return self.logics.cleanup.clean(force=force, immediately=immediately)

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
