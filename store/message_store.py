"""MessageStore: the composition root. It wires components and owns no algorithm.

The open and close sequence (RocketMQ ``DefaultMessageStore`` load/recover/start/shutdown)
is narrated once, in docs/store.md §1.8. The store owns its
:class:`~mqstore._lifecycle.StoreLifecycle` (resources, open/close, the open state), a
:class:`~mqstore.put.PutWriter` for puts and a :class:`~mqstore.pull.StoreReader` for
pulls, and delegates its public API to them. Other packages use the store through its
methods only; the component attributes below are for white-box tests and the benchmarks
that time one part (``tests/project/test_layers.py`` pins both).

Puts are thread-safe. See ``mqstore.commitlog.flush`` for what PUT_OK promises under
each flush mode.
"""

from __future__ import annotations

from collections.abc import Container

from mqstore._delegate import Delegate
from mqstore._lifecycle import CrashImage, StoreLifecycle
from mqstore.checkpoint import Checkpoint
from mqstore.cleanup import CleanupResult, DiskGuard
from mqstore.closeable import Closeable
from mqstore.commitlog import format as fmt
from mqstore.commitlog.clean_close import Verification
from mqstore.commitlog.commitlog import CommitLog, queue_key
from mqstore.commitlog.cursor import LogCursor
from mqstore.commitlog.cursor import Record as LogRecord
from mqstore.commitlog.flush import AsyncFlusher, GroupCommitter
from mqstore.commitlog.recovery import RecoveryResult
from mqstore.commitlog.recovery_damage import DamagedRange
from mqstore.commitlog.segments import Segments
from mqstore.config import BrokerRole, StoreConfig
from mqstore.consumequeue.dispatch import (
    Dispatcher,
    DispatchProgress,
    ReputService,
)
from mqstore.consumequeue.store import ConsumeQueueStore
from mqstore.errors import ConfigError, StoreClosedError
from mqstore.ha import service as ha_service
from mqstore.ha.master import HAMaster
from mqstore.index.service import IndexService
from mqstore.logics import Logics
from mqstore.pull import StoreReader
from mqstore.put import PutResult, PutWriter
from mqstore.put_frame import MessageFramer
from mqstore.timer.transform import TimerRules


class MessageStore(Closeable):
    """A RocketMQ-layout message store on one directory. Use :meth:`open`; ``with``
    closes it."""

    _reader: StoreReader

    def __init__(self, cfg: StoreConfig) -> None:
        self.cfg = cfg
        self.root = cfg.root
        self._life = StoreLifecycle(cfg)

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

    def _take_components(self) -> None:
        """Hold the components the lifecycle built (see the attributes below)."""
        life = self._life
        self.segments, self.commitlog = life.segments, life.commitlog
        self.checkpoint, self.logics, self.flusher = life.checkpoint, life.logics, life.flusher
        self.disk_guard, self.last_exit_ok = life.disk_guard, life.last_exit_ok
        assert life.recovery is not None  # load_and_recover() ran
        self.recovery = life.recovery
        logics = life.logics
        self.queues, self.index = logics.queues, logics.index
        self.reput, self.dispatcher = logics.reput, logics.dispatcher

    def _open(self) -> None:
        """Steps 2-7 of docs/store.md §1.8; a failure undoes them."""
        life = self._life
        life.take_lock()
        try:
            life.load_and_recover()
            life.start_replication()
            life.start_flusher()
            self._take_components()
            commitlog = life.commitlog
            self.writer = PutWriter(
                MessageFramer(self.cfg, commitlog.store_host, life.logics.delay_levels),
                commitlog,
                life.flusher,
                life.state,
                replica_wait=life.replica_wait,
                timer=TimerRules(
                    self.cfg.timer_precision_ms,
                    self.cfg.timer_max_delay_sec,
                    self.cfg.timer_wheel_enable,
                ),
            )
            # The hottest calls bound once, not looked up through the delegates below
            # at every put.
            self.put_message = self.writer.put_message
            self.put_messages = self.writer.put_messages
            self._reader = StoreReader(self.cfg, life.segments, life.logics, life.state)
            life.start_services(
                put=lambda m: self.writer.put_message(m).status,
                read=lambda phys, _size: self.look_message_by_offset(phys),
            )
            life.start_verify()
        except BaseException:
            life.undo_open()
            raise

    # --------------------------------------------------------------- components
    # Set by open() and fixed for the store's life (the lifecycle builds them once).

    writer: PutWriter
    """What puts go through (its ``framer`` frames the records)."""
    segments: Segments
    """The CommitLog's segment files."""
    commitlog: CommitLog
    """The CommitLog."""
    checkpoint: Checkpoint
    """The ``checkpoint`` file."""
    logics: Logics
    """Consume queues, index and the services around them."""
    flusher: GroupCommitter | AsyncFlusher
    """The CommitLog flusher of the configured flush mode."""
    disk_guard: DiskGuard
    """RocketMQ's disk-full flag (``mqstore.cleanup``): checked per cleanup round and per
    created segment or index file, never per put."""
    recovery: RecoveryResult
    """What the open's CommitLog recovery found."""
    last_exit_ok: bool
    """Whether the previous process closed the store (no ``abort`` file at open)."""
    queues: ConsumeQueueStore
    """All consume queues."""
    index: IndexService | None
    """The index service (None with ``message_index_enable=False``)."""
    reput: ReputService
    """The dispatcher thread (idle when ``dispatch_process`` is on)."""
    dispatcher: Dispatcher
    """Builds queue units and index entries per record."""

    @property
    def ha(self) -> ha_service.HAService | None:
        """Replication (``mqstore.ha.service``), None when the role needs none."""
        return self._life.ha

    def serve_replicas(self) -> HAMaster:
        """Make this open master store serve slaves (an ASYNC_MASTER asks for it
        explicitly; a SYNC_MASTER's master runs from ``open``).

        Returns the running master; the store stops it on ``close()``/``abandon()``.

        Raises:
            ConfigError: the store is a SLAVE.
            OSError: the HA port could not be bound.
        """
        if self.cfg.broker_role is BrokerRole.SLAVE:
            raise ConfigError("a SLAVE store does not serve replicas")
        return self._life.serve_replicas()

    @property
    def damage(self) -> tuple[DamagedRange, ...]:
        """CommitLog ranges recovery fenced off as damaged (``recovery_policy`` KEEP),
        this open's and earlier ones' (kept in ``damage.json``, see
        ``mqstore.commitlog.recovery_damage``) while their bytes are still held: no
        record in them is served, by queue offset or by key; the valid records after
        them are."""
        low = self.segments.min_offset
        return tuple(r for r in self._life.quarantine.ranges if r.end > low)

    @property
    def verification(self) -> Verification | None:
        """What the background check after a trusted open (``verify_clean_open``) found;
        None before it finished, or when the open scanned (``recovery.mode`` is not
        ``TRUSTED``)."""
        return self._life.verification

    def verify(self, *, whole: bool = False) -> Verification:
        """Check every record written so far in the last 3 CommitLog segments (all of
        them with ``whole``): structure, BODYCRC and PHYSICALOFFSET, read-only, while the
        store serves. Damage found is logged and poisons the store (puts refused,
        ``abort`` kept), so the next open recovers as after a crash. What an open after
        a clean close no longer scans (see ``mqstore.commitlog.clean_close``).

        Raises:
            StoreClosedError: the store is closed.
        """
        if self._life.state.closed:
            raise StoreClosedError("the store is closed")
        return self._life.verify(whole=whole)

    @property
    def dispatch_progress(self) -> DispatchProgress:
        """Whatever dispatches: the reput thread or the dispatcher process."""
        return self._life.logics.progress

    # ------------------------------------------------------------------ state

    @property
    def disk_full(self) -> str | None:
        """Why puts are refused for lack of disk space (None: they are not).

        Set above ``disk_space_warning_level_ratio`` used; cleared by the next check
        (cleanup round, created file, or :meth:`check_disk`) below it.
        """
        return self._life.state.disk_full

    def check_disk(self) -> float:
        """Measure the disk now (as a cleanup round does) and return the used ratio."""
        return self._life.disk_guard.check()

    @property
    def index_disabled(self) -> str | None:
        """Why the index is not being built (no space for it), or None.

        Consume queues keep being built meanwhile; the index catches up by itself
        once space is available.
        """
        return self._life.logics.index_disabled

    @property
    def poisoned(self) -> BaseException | None:
        """The flush error that poisoned this store, if any."""
        return self._life.state.poison

    @property
    def max_physical_offset(self) -> int:
        """One past the last byte of the CommitLog."""
        return self._life.commitlog.max_offset

    @property
    def min_physical_offset(self) -> int:
        """First byte of the CommitLog still held."""
        return self._life.commitlog.min_offset

    @property
    def flushed_physical_offset(self) -> int:
        """CommitLog bytes known durable."""
        return self._life.segments.flushed_where

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next message to (topic, queue_id) will get."""
        return self._life.commitlog.next_queue_offset(queue_key(topic, queue_id))

    # ------------------------------------------------------------------- puts

    # The writer's methods (``mqstore.put``), documented there.
    put_message = Delegate("writer", PutWriter.put_message)
    put_messages = Delegate("writer", PutWriter.put_messages)

    # ------------------------------------------------------------------- pulls

    # Pulls, offsets, time and key lookups are the reader's methods (``mqstore.pull``),
    # documented there: get_message, get_message_raw and query_by_key raise
    # StoreClosedError on a closed store.
    get_message = Delegate("_reader", StoreReader.get_message)
    get_message_raw = Delegate("_reader", StoreReader.get_message_raw)
    read_batch = Delegate("_reader", StoreReader.read_batch)
    consume_queue = Delegate("_reader", StoreReader.consume_queue)
    max_offset_in_queue = Delegate("_reader", StoreReader.max_offset_in_queue)
    min_offset_in_queue = Delegate("_reader", StoreReader.min_offset_in_queue)
    offset_by_time = Delegate("_reader", StoreReader.offset_by_time)
    message_store_timestamp = Delegate("_reader", StoreReader.message_store_timestamp)
    earliest_message_time = Delegate("_reader", StoreReader.earliest_message_time)
    stored_message_at = Delegate("_reader", StoreReader.stored_message_at)
    query_by_key = Delegate("_reader", StoreReader.query_by_key)

    # ---------------------------------------------------------------- dispatch

    add_arrival_listener = Delegate("_reader", StoreReader.add_arrival_listener)
    remove_arrival_listener = Delegate("_reader", StoreReader.remove_arrival_listener)
    wait_dispatched = Delegate("_reader", StoreReader.wait_dispatched)
    register_sql_filter = Delegate("_reader", StoreReader.register_sql_filter)

    @property
    def dispatch_behind_bytes(self) -> int:
        """CommitLog bytes not yet in the consume queues and index."""
        return self._reader.dispatch_behind_bytes

    # ------------------------------------------------------------ topology

    def queue_ids(self, topic: str) -> list[int]:
        """The ids of ``topic``'s consume queues that exist, ascending (reads no file)."""
        return self._life.logics.queues.queue_ids(topic)

    def queue_keys(self) -> list[tuple[str, int]]:
        """(topic, queue id) of every consume queue that exists (reads no file)."""
        return self._life.logics.queues.queue_keys()

    def drop_topic(self, topic: str) -> int:
        """Delete ``topic``'s consume queues (its CommitLog records expire as usual);
        returns how many were deleted."""
        return self._life.logics.queues.drop_topic(topic)

    def drop_expired_queues(self, keep: Container[str] = ()) -> int:
        """Delete every consume queue whose messages are all gone from the CommitLog, but
        the queues of ``keep`` topics and empty ones; returns how many went (RocketMQ
        ``cleanExpiredConsumerQueue``; none while following a dispatch child)."""
        return self._life.logics.queues.drop_expired_queues(self.min_physical_offset, keep)

    @property
    def follows_dispatch_child(self) -> bool:
        """Whether the consume queues are written by a dispatcher process and only
        followed here (``dispatch_process``): then they cannot be dropped from here."""
        return self._life.logics.queues.following

    @property
    def fsync_count(self) -> int:
        """How many ``fdatasync`` calls the CommitLog flusher has made since open."""
        return self._life.flusher.syncs

    # ------------------------------------------------------------ log records

    record_bytes = Delegate("commitlog", CommitLog.read)

    def look_message_by_offset(self, physical_offset: int) -> fmt.MessageRecord | None:
        """The record starting at ``physical_offset``, or None if none valid is there."""
        r = self._life.commitlog.decode_at(physical_offset, check_crc=True)
        return r.record if isinstance(r, fmt.Record) else None

    def iter_records(self, from_offset: int | None = None) -> list[fmt.MessageRecord]:
        """Every valid record from ``from_offset`` (default: the start) to the end, in
        order, each read once; damage (a bad CRC included) is skipped up to the next
        record, as the cursor resyncs (:mod:`mqstore.commitlog.cursor`)."""
        start = self.min_physical_offset if from_offset is None else from_offset
        walk = LogCursor(self._life.segments.files, start, self.max_physical_offset, check_crc=True)
        return [item.message() for item in walk if isinstance(item, LogRecord)]

    # ------------------------------------------------------------ maintenance

    def clean_expired_files(
        self, *, force: bool = True, immediately: bool = False
    ) -> CleanupResult:
        """One cleanup round now (``mqstore.cleanup``): ``force`` = as at the delete hour;
        ``immediately`` = whatever the files' age.

        Raises:
            OSError: a file could not be deleted.
        """
        cleanup = self._life.logics.cleanup
        if cleanup is None:
            raise StoreClosedError(f"store {self.root} is closed")
        return cleanup.clean(force=force, immediately=immediately)

    def flush(self) -> None:
        """Flush everything written so far and the checkpoint (a manual durability point).

        Raises:
            OSError: the sync failed (the store is then poisoned).
        """
        self._life.flush()

    def close(self) -> None:
        """Stop services, flush, persist the checkpoint, remove ``abort``, unlock."""
        self._life.close()

    def abandon(self) -> CrashImage:
        """Stop as if the process died: no flush, ``abort`` left behind, lock released.

        For fault-injection tests and the flush lab: the returned image says which
        bytes of each segment were durable (flushed) when the "crash" happened.
        """
        return self._life.abandon()

    @property
    def closed(self) -> bool:
        """Whether the store is closed (before open, after close or abandon)."""
        return self._life.state.closed

    def __repr__(self) -> str:
        state = "closed" if self._life.state.closed else "open"
        return f"MessageStore({str(self.root)!r}, {state})"


__all__ = ["CrashImage", "MessageStore", "PutResult"]
