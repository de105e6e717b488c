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

The read API (``get_message``, offsets, ``query_by_key``, ...) is in ``store.pull``.

Puts are thread-safe. See ``store.commitlog.flush`` for what PUT_OK promises under
each flush mode.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from store import _platform
from store.checkpoint import Checkpoint
from store.cleanup import CleanupResult
from store.commitlog import format as fmt
from store.commitlog.commitlog import CommitLog, EncodedMessage, RollFailed, V1Record, queue_key
from store.commitlog.flush import AsyncFlusher, GroupCommitter
from store.commitlog.recovery import RecoveryResult, recover, scan_headers
from store.commitlog.segments import Segments
from store.compression import COMPRESSED_FLAG, compress, parse_type
from store.config import BrokerRole, FlushDiskType, StoreConfig
from store.consumequeue.get import PullLimits
from store.errors import IllegalMessageError, StoreClosedError, StoreLockedError
from store.ha import service as ha_service
from store.logics import Logics
from store.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    hashmap_bucket,
    host_bytes,
    java_hashmap_order,
    new_uniq_key,
    properties_to_string,
    standard_properties_string,
    validate_topic,
)
from store.pull import PullAPI
from store.schedule import redirect
from store.status import PutStatus

MAX_RECORD_SLACK = 64 * 1024
_PUT_OK = PutStatus.PUT_OK


class PutResult(NamedTuple):
    """Outcome of one put. ``status.stored`` tells whether the bytes are in the log.

    Immutable; a NamedTuple rather than a frozen dataclass because it is built on
    every put and costs ~0.8 us instead of ~2.9 us (measured on this machine).
    """

    status: PutStatus
    physical_offset: int = -1
    queue_offset: int = -1
    msg_id: str = ""
    size: int = 0
    store_timestamp: int = 0
    uniq_key: str = ""
    error: str | None = None


# tuple.__new__ straight away: skips the generated __new__ (~0.5 us per put).
_tuple_new = tuple.__new__


@dataclass(frozen=True, slots=True)
class CrashImage:
    """What ``abandon()`` leaves: per segment path, (flushed, written) positions."""

    segments: dict[str, tuple[int, int]]
    checkpoint_path: str


class MessageStore(PullAPI):
    """A RocketMQ-layout message store on one directory. Use :meth:`open`."""

    def __init__(self, cfg: StoreConfig) -> None:
        self.cfg = cfg
        self.root = cfg.root
        self._lock_fd = -1
        self._closed = True
        self._refuse_puts = True
        self._host_hex = host_bytes(cfg.store_host).hex().upper()
        self._poison: BaseException | None = None
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
            self.logics = Logics(cfg, self.segments, self.checkpoint)
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
            self._refuse_puts = cfg.broker_role is BrokerRole.SLAVE
            self.logics.start(
                limit=self._dispatch_limit,
                put=lambda m: self.put_message(m).status,
                read=lambda phys, _size: self.look_message_by_offset(phys),
                on_error=self._poison_store,
                master=cfg.broker_role is not BrokerRole.SLAVE,
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

    # ------------------------------------------------------------------ state

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

    # ------------------------------------------------------------------- puts

    def _unavailable(self) -> PutResult | None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")
        if self._poison is not None:
            return PutResult(
                PutStatus.SERVICE_NOT_AVAILABLE,
                error=f"store poisoned by a failed flush ({self._poison}); reopen it to recover",
            )
        if self.cfg.broker_role is BrokerRole.SLAVE:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, error="a SLAVE store refuses writes")
        return None

    def _properties(self, msg: Message) -> tuple[bytes, str]:
        """Properties bytes in Java HashMap(128) order (as a 5.x broker writes them)."""
        props = msg.properties
        if not props and msg.delay_level <= 0 and msg.wait_store_msg_ok:
            raw_keys = msg.keys
            keys = (
                raw_keys
                if isinstance(raw_keys, str) or raw_keys is None
                else " ".join(k for k in raw_keys if k)
            )
            uniq = self._next_uniq()
            return standard_properties_string(uniq, msg.tags, keys).encode("utf-8"), uniq
        items: dict[str, str] = dict(props) if props else {}
        if props:
            for k, v in props.items():
                if not k or "\x01" in k or "\x02" in k or "\x01" in v or "\x02" in v:
                    raise IllegalMessageError(
                        f"property {k!r}: names/values must be non-empty and free of \\x01/\\x02"
                    )
        if msg.tags:
            items[PROPERTY_TAGS] = msg.tags
        if msg.keys:
            items[PROPERTY_KEYS] = " ".join(msg.key_list())
        if msg.delay_level > 0:
            items[PROPERTY_DELAY_TIME_LEVEL] = str(msg.delay_level)
        if not msg.wait_store_msg_ok:
            items[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        uniq = items.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or ""
        if not uniq:
            uniq = new_uniq_key()
            items[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
        if len(items) <= 96:
            order = sorted(items, key=hashmap_bucket)
            text = "".join([f"{k}\x01{items[k]}\x02" for k in order])
        else:
            text = properties_to_string(java_hashmap_order(items.items()))
        return text.encode("utf-8"), uniq

    def _prepare(self, msg: Message) -> tuple[EncodedMessage, str] | PutResult:
        cfg = self.cfg
        topic = msg.topic
        topic_bytes = self._topic_bytes.get(topic)
        if topic_bytes is None:  # first sight of this topic: validate it once
            validate_topic(topic)
            topic_bytes = self._topic_bytes[topic] = topic.encode("utf-8")
        body = msg.body
        if type(body) is not bytes:
            if not isinstance(body, bytearray | memoryview):
                raise IllegalMessageError(f"body must be bytes, got {type(body).__name__}")
            body = bytes(body)
        n = len(body)
        if n == 0:
            raise IllegalMessageError("body must not be empty")
        if msg.queue_id < 0:
            raise IllegalMessageError(f"queue_id must be >= 0, got {msg.queue_id}")
        if n > cfg.max_message_size:
            return PutResult(
                PutStatus.MESSAGE_ILLEGAL,
                error=f"body of {n} bytes exceeds max_message_size {cfg.max_message_size}",
            )
        sys_flag = msg.sys_flag & ~(fmt.BORNHOST_V6_FLAG | fmt.STOREHOST_V6_FLAG)
        if n >= cfg.compress_msg_body_over and not sys_flag & COMPRESSED_FLAG:
            body = compress(body, self._compress_type, cfg.compress_level)
            sys_flag |= COMPRESSED_FLAG | self._compress_type.flag
        props_bytes, uniq = self._properties(msg)
        if len(props_bytes) > fmt.MAX_PROPERTIES_LENGTH:
            return PutResult(
                PutStatus.PROPERTIES_SIZE_EXCEEDED,
                error=f"properties of {len(props_bytes)} bytes exceed {fmt.MAX_PROPERTIES_LENGTH}",
            )
        born = self._born_cache.get(msg.born_host)
        if born is None:
            born = self._born_cache[msg.born_host] = host_bytes(msg.born_host)
        if len(born) == fmt.IPV6_HOST_LEN:
            sys_flag |= fmt.BORNHOST_V6_FLAG
        tail, version, total = self._frame(sys_flag, len(body), topic_bytes, props_bytes)
        if total > self._max_record:
            return PutResult(
                PutStatus.MESSAGE_ILLEGAL,
                error=f"record of {total} bytes exceeds the limit {self._max_record}",
            )
        born_ts = msg.born_timestamp  # None: the CommitLog stamps the store time
        enc = _tuple_new(
            EncodedMessage,
            (
                f"{topic}-{msg.queue_id}",
                msg.queue_id,
                msg.flag,
                sys_flag,
                born_ts,
                born,
                msg.reconsume_times,
                0,
                body,
                zlib.crc32(body) & 0x7FFFFFFF,
                tail,
                version,
                total,
            ),
        )
        return enc, uniq

    def put_message(self, msg: Message) -> PutResult:
        """Store one message; under SYNC_FLUSH wait for its group commit.

        Returns a status for expected failures (MESSAGE_ILLEGAL,
        PROPERTIES_SIZE_EXCEEDED, CREATE_MAPPED_FILE_FAILED, FLUSH_DISK_TIMEOUT,
        SERVICE_NOT_AVAILABLE when poisoned or a slave).

        Raises:
            IllegalTopicError: the topic name is not allowed.
            IllegalMessageError: empty/non-bytes body, negative queue id, bad property.
            StoreClosedError: after close().
        """
        if not self._refuse_puts and self._fast_puts:
            framed = self._frame_common(msg)
            if framed is not None:
                record, uniq = framed
                at = self.commitlog.append_v1(*record)
                if at is not None:  # else the segment is full: the general path rolls
                    phys, qoff, ts = at
                    total = record[9]
                    status = self.flusher.wait_for(phys + total)
                    return _tuple_new(
                        PutResult,
                        (status, phys, qoff, f"{self._host_hex}{phys:016X}", total, ts, uniq, None),
                    )
        return self._put_general(msg)

    def _frame_common(self, msg: Message) -> tuple[V1Record, str] | None:
        """(record for ``CommitLog.append_v1``, UNIQ_KEY) of a common message, else None.

        The common message (most of them): known topic and IPv4 born host, body bytes
        under the compression threshold, no user properties, no delay, SYSFLAG 0,
        waits for the store. Framed here and packed in place by the CommitLog: the
        same bytes as the general path (``tests/test_put_fast_path.py``).
        """
        topic_bytes = self._topic_bytes.get(msg.topic)
        born = self._born_cache.get(msg.born_host)
        body = msg.body
        n = len(body) if type(body) is bytes else 0
        qid = msg.queue_id
        if (
            topic_bytes is None
            or born is None
            or len(born) != fmt.IPV4_HOST_LEN
            or not 0 < n < self._fast_body_limit
            or qid < 0
            or msg.sys_flag
            or msg.properties
            or msg.delay_level > 0
            or not msg.wait_store_msg_ok
        ):
            return None
        keys = msg.keys
        if keys is not None and type(keys) is not str:
            keys = keys[0] if len(keys) == 1 and keys[0] else " ".join(k for k in keys if k)
        uniq = self._next_uniq()
        props = standard_properties_string(uniq, msg.tags, keys).encode()
        if len(props) > fmt.MAX_PROPERTIES_LENGTH:
            return None
        tail, version, total = self._frame(0, n, topic_bytes, props)
        if version != 1 or total > self._max_record:
            return None
        crc = zlib.crc32(body) & 0x7FFFFFFF
        record = (f"{msg.topic}-{qid}", qid, msg.flag, msg.born_timestamp, born,
                  msg.reconsume_times, body, crc, tail, total)  # fmt: skip
        return record, uniq

    def _put_general(self, msg: Message) -> PutResult:
        """put_message of any message (validation, properties, delay, compression)."""
        if self._refuse_puts:
            bad = self._unavailable()
            if bad is not None:
                return bad
        if msg.delay_level > 0:  # stored in SCHEDULE_TOPIC_XXXX until due (store.schedule)
            msg = redirect(msg, self.logics.delay_levels)
        prepared = self._prepare(msg)
        if type(prepared) is PutResult:
            return prepared
        enc, uniq = prepared  # type: ignore[misc]
        try:
            phys, size, qoff = self.commitlog.append(enc)
        except RollFailed as e:
            return PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, error=str(e))
        status = self.flusher.wait_for(phys + size) if msg.wait_store_msg_ok else _PUT_OK
        if self._replica_wait is not None and status is _PUT_OK and msg.wait_store_msg_ok:
            status = self._replica_wait(phys + size)  # SYNC_MASTER: flush, then a slave
        return _tuple_new(
            PutResult,
            (
                status,
                phys,
                qoff,
                f"{self._host_hex}{phys:016X}",
                size,
                self.commitlog.last_store_timestamp,
                uniq,
                None,
            ),
        )

    def put_messages(self, msgs: Sequence[Message]) -> list[PutResult]:
        """Store a batch contiguously (never split across segments): one lock, one flush wait.

        Every message is validated first; if any is refused, nothing is stored and
        every result carries that status.

        Raises:
            IllegalTopicError, IllegalMessageError, StoreClosedError: as put_message.
        """
        if not msgs:
            return []
        if not self._refuse_puts and self._fast_puts:
            done = self._put_common_batch(msgs)
            if done is not None:
                return done
        return self._put_general_batch(msgs)

    def _put_common_batch(self, msgs: Sequence[Message]) -> list[PutResult] | None:
        """put_messages of common messages (see :meth:`_put_common`) framed in one pass
        and packed in place under one lock (~half the cost per message); None: take
        the general path (any other message in the batch, or a roll is due)."""
        records: list[V1Record] = []
        uniqs: list[str] = []
        for m in msgs:
            r = self._frame_common(m)
            if r is None:
                return None
            records.append(r[0])
            uniqs.append(r[1])
        at = self.commitlog.append_v1_batch(records)
        if at is None:
            return None
        physs, qoffs, ts = at
        status = self.flusher.wait_for(physs[-1] + records[-1][9])
        host = self._host_hex
        return [
            _tuple_new(PutResult, (status, p, q, f"{host}{p:016X}", r[9], ts, u, None))
            for p, q, u, r in zip(physs, qoffs, uniqs, records, strict=True)
        ]

    def _put_general_batch(self, msgs: Sequence[Message]) -> list[PutResult]:
        """put_messages of any batch (validation, properties, delay, compression)."""
        bad = self._unavailable()
        if bad is not None:
            return [bad] * len(msgs)
        encs: list[EncodedMessage] = []
        uniqs: list[str] = []
        levels = self.logics.delay_levels
        for m in msgs:
            prepared = self._prepare(redirect(m, levels) if m.delay_level > 0 else m)
            if isinstance(prepared, PutResult):
                return [prepared] * len(msgs)
            encs.append(prepared[0])
            uniqs.append(prepared[1])
        total = sum(e.total for e in encs)
        if total + fmt.END_FILE_MIN_BLANK_LENGTH > self.cfg.commitlog_file_size:
            return [
                PutResult(
                    PutStatus.MESSAGE_ILLEGAL,
                    error=f"batch of {total} bytes cannot fit one segment",
                )
            ] * len(msgs)
        try:
            ar = self.commitlog.append_batch(encs)
        except RollFailed as e:
            return [PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, error=str(e))] * len(msgs)
        wait = any(m.wait_store_msg_ok for m in msgs)
        status = self.flusher.wait_for(ar.next_offset) if wait else PutStatus.PUT_OK
        if self._replica_wait is not None and status is PutStatus.PUT_OK and wait:
            status = self._replica_wait(ar.next_offset)
        host = self.commitlog.store_host_hex
        ts = ar.store_timestamp
        return [
            _tuple_new(PutResult, (status, p, q, f"{host}{p:016X}", e.total, ts, u, None))
            for p, q, u, e in zip(ar.physical_offsets, ar.queue_offsets, uniqs, encs, strict=True)
        ]

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
