"""The CommitLog: appends encoded records to the segments under one put lock.

Responsibilities: assign queue offsets (per ``topic-queueId``), stamp the store
time and physical offset, roll segments with RocketMQ's 8-byte blank record, and
read records back. It does not flush (``flush.py``), recover (``recovery.py``) or
know about consume queues: a narrow component the store composes.

Invariants:

* Records are contiguous; a record or a batch never crosses a segment. When
  ``len + 8 > bytes left``, an 8-byte blank ``[left][BLANK magic]`` is written and
  the whole record/batch goes to the next segment (an exact fit is allowed).
* Queue offsets of a topic-queue increase by one per NOT/COMMIT record; PREPARED and
  ROLLBACK records store queue offset 0 and do not consume an offset.
* Only the holder of ``put_lock`` writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Final, NamedTuple

from mqstore.commitlog import format as fmt
from mqstore.commitlog.mapped_file import MappedFile
from mqstore.commitlog.segments import Segments
from mqstore.status import AppendStatus

_TX_MASK = fmt.TRANSACTION_MASK
_TX_PREPARED = fmt.TRANSACTION_PREPARED_TYPE
_TX_ROLLBACK = fmt.TRANSACTION_ROLLBACK_TYPE
_NO_QUEUE_OFFSET = frozenset((_TX_PREPARED, _TX_ROLLBACK))
_MIN_BLANK = fmt.END_FILE_MIN_BLANK_LENGTH


class EncodedMessage(NamedTuple):
    """A message with everything but its log position encoded (built outside the lock).

    ``tail`` is the topic and properties with their length fields
    (:meth:`RecordEncoder.tail`); ``total`` the whole record size.
    """

    queue_key: str
    queue_id: int
    flag: int
    sys_flag: int
    born_timestamp: int | None
    born_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    crc: int
    tail: bytes
    version: int
    total: int


V1Record = tuple[str, int, int, "int | None", bytes, int, bytes, int, bytes, int]
"""The record :meth:`CommitLog.append_v1` takes, as one tuple (queue key, queue id,
flag, born timestamp or None, IPv4 born host, reconsume times, body, BODYCRC, tail,
TOTALSIZE): a batch's records for :meth:`CommitLog.append_v1_batch`. A plain tuple,
built once per put: its fields are read by the names below, never by number."""
V1_KEY: Final = 0
"""Index of a :data:`V1Record`'s queue key."""
V1_TOTAL: Final = 9
"""Index of a :data:`V1Record`'s TOTALSIZE."""
_V1_KEY = itemgetter(V1_KEY)
_V1_TOTAL = itemgetter(V1_TOTAL)


def queue_key(topic: str, queue_id: int) -> str:
    """The topic-queue table key, as RocketMQ builds it (``topic-queueId``)."""
    return f"{topic}-{queue_id}"


class AppendResult(NamedTuple):
    """Where a record (or the first record of a batch) landed.

    A NamedTuple rather than a frozen dataclass: it is built once per put and a
    frozen dataclass costs several times as much to construct.
    """

    status: AppendStatus
    physical_offset: int = 0
    size: int = 0
    queue_offset: int = 0
    store_timestamp: int = 0
    msg_count: int = 0
    queue_offsets: tuple[int, ...] = ()
    physical_offsets: tuple[int, ...] = ()

    @property
    def next_offset(self) -> int:
        """Log offset just past what was written: what a sync flush must reach."""
        return self.physical_offset + self.size


class _Listed(NamedTuple):
    """A batch's queue offsets when its records go to several queues (the reservation
    step's answer): one per record, and each queue's next offset after the batch."""

    offsets: list[int]
    after: dict[str, int]


class RollFailed(Exception):
    """A new segment could not be created (disk full, permissions)."""


_time_ns = time.time_ns


def _now_ms() -> int:
    return _time_ns() // 1_000_000


_WALL_CLOCK: Final = _now_ms
"""The default clock, which :meth:`CommitLog._claim` reads inline (no frame per put)."""


class CommitLog:
    """Appends and reads records over a :class:`Segments`.

    Readers do not take the put lock: they see bytes up to a segment's wrote position.
    """

    def __init__(
        self,
        segments: Segments,
        store_host: bytes,
        *,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.segments = segments
        self.store_host = store_host
        self.store_host_hex = store_host.hex().upper()
        self.put_lock = threading.Lock()
        self.topic_queue_table: dict[str, int] = {}
        self._clock = clock or _now_ms
        self.encoder = fmt.RecordEncoder(store_host)
        self.last_store_timestamp = 0

    # ------------------------------------------------------------------ offsets

    @property
    def max_offset(self) -> int:
        """One past the last written byte of the log."""
        return self.segments.max_offset

    @property
    def min_offset(self) -> int:
        """First byte still held (start of the oldest segment)."""
        return self.segments.min_offset

    @property
    def file_size(self) -> int:
        """Segment size in bytes."""
        return self.segments.file_size

    # ------------------------------------------------------------------- reads

    def read(self, offset: int, size: int) -> bytes | None:
        """Copy ``size`` bytes at ``offset``; None if not (or no longer) held.

        The copy makes the result safe after the segment is deleted.
        """
        mf = self.segments.find(offset)
        if mf is None:
            return None
        rel = offset - mf.file_from_offset
        if rel + size > mf.wrote_position:
            return None
        return bytes(mf.view[rel : rel + size])

    def decode_at(self, offset: int, *, check_crc: bool = False) -> fmt.DecodeResult | None:
        """Decode the record starting at ``offset``; None if the offset is not held."""
        mf = self.segments.find(offset)
        if mf is None:
            return None
        rel = offset - mf.file_from_offset
        return fmt.decode(mf.view, rel, mf.wrote_position, check_crc=check_crc)

    # ------------------------------------------------------------------ append

    def _encode(self, m: EncodedMessage, queue_offset: int, physical_offset: int, ts: int) -> bytes:
        """The record bytes of ``m`` at its place in the log (the general path)."""
        return self.encoder.encode(
            m.total,
            m.version,
            m.crc,
            m.queue_id,
            m.flag,
            queue_offset,
            physical_offset,
            m.sys_flag,
            ts if m.born_timestamp is None else m.born_timestamp,
            m.born_host,
            ts,
            m.reconsume_times,
            m.prepared_transaction_offset,
            m.body,
            m.tail,
        )

    def _writable(self) -> MappedFile:
        try:
            return self.segments.last_for_write(self.segments.max_offset)
        except OSError as e:
            raise RollFailed(f"cannot create segment in {self.segments.directory}: {e}") from e

    def _reserve(self, mf: MappedFile, end: int) -> None:
        """Reserve disk up to ``end`` of a sparse segment (and a chunk beyond), so a
        full disk refuses the write instead of faulting in the mapping."""
        try:
            mf.reserve(end)
        except OSError as e:
            raise RollFailed(f"cannot reserve space in {mf.path}: {e}") from e
        if self.segments.on_create is not None:
            self.segments.on_create()  # the disk check, once per reserved chunk

    def _roll(self, mf: MappedFile) -> MappedFile:
        """Write the blank record that ends ``mf`` and create the next segment."""
        left = mf.free
        if mf.wrote_position + min(8, left) > mf.reserved:
            self._reserve(mf, mf.wrote_position + min(8, left))
        mf.append(fmt.encode_blank(left)[: min(8, left)])
        mf.mark_full()
        return self._writable()

    # The write pipeline: every append takes its place in the log by :meth:`_claim`,
    # writes its bytes there and ends with :meth:`_commit`, all under the put lock.

    def _claim(
        self, need: int, keys: str | Sequence[str | None], roll: bool
    ) -> tuple[MappedFile, int, int, _Listed | None] | None:
        """The reservation step: ``need`` bytes at the end of the log for records of
        the queues ``keys`` (one key a record, in order; a single record's key may be
        given as the string itself).

        The caller holds :attr:`put_lock`. Rolls to a new segment when the records do
        not fit the current one (``roll``), or returns None with nothing changed (no
        ``roll``: the fast path, which also declines when disk is not yet reserved
        that far). Returns (segment, store timestamp, first queue offset, listed
        queue offsets): the records go at ``segment.wrote_position``. When every key
        is the same queue (a single put, a broker's batch) the listed offsets are None
        and the records take ``first, first + 1, ...``; otherwise they are listed
        (:class:`_Listed`), a key of None (PREPARED, ROLLBACK: no queue offset)
        getting 0. The topic-queue
        table is advanced by :meth:`_commit`, after the write, so a write that fails
        leaves it as it was.

        Raises:
            RollFailed: with ``roll``, a segment could not be created or disk reserved.
        """
        files = self.segments.files
        mf = files[-1] if files else None
        if roll:
            if mf is None or need + _MIN_BLANK > mf.file_size - mf.wrote_position:
                mf = self._writable() if mf is None or mf.is_full else self._roll(mf)
            if mf.wrote_position + need > mf.reserved:
                self._reserve(mf, mf.wrote_position + need)
        elif mf is None or need + _MIN_BLANK > mf.reserved - mf.wrote_position:
            return None
        clock = self._clock
        ts = _time_ns() // 1_000_000 if clock is _WALL_CLOCK else clock()
        if keys.__class__ is str:  # one record of a queue: a single put
            return mf, ts, self.topic_queue_table.get(keys, 0), None
        first = keys[0]
        n = len(keys)
        if first is not None and (n == 1 or keys.count(first) == n):  # one queue: the usual
            return mf, ts, self.topic_queue_table.get(first, 0), None
        table = self.topic_queue_table
        qoffs: list[int] = []
        after: dict[str, int] = {}
        for key in keys:
            if key is None:
                qoffs.append(0)
                continue
            q = after.get(key)
            if q is None:
                q = table.get(key, 0)
            after[key] = q + 1
            qoffs.append(q)
        return mf, ts, qoffs[0], _Listed(qoffs, after)

    def _commit(
        self,
        mf: MappedFile,
        ts: int,
        keys: Sequence[str | None],
        first: int,
        listed: _Listed | None,
    ) -> None:
        """After the write of what :meth:`_claim` reserved: stamp the segment and
        advance the topic-queue table past the records (their queue's next offsets)."""
        mf.last_store_timestamp = ts
        if listed is None:
            self.topic_queue_table[keys[0]] = first + len(keys)  # type: ignore[index]
        else:
            self.topic_queue_table.update(listed.after)

    def append(self, m: EncodedMessage) -> tuple[int, int, int]:
        """Append one record; return (physical offset, size, queue offset).

        The caller has validated sizes (``m.total + 8 <= file_size``). Returns a bare
        tuple: this is the hottest call of the store, and a bare tuple is the cheapest result.

        Raises:
            RollFailed: a needed segment could not be created; nothing was written
                beyond a blank record (which readers skip), so the log stays valid.
        """
        total = m.total
        keys = (m.queue_key if m.sys_flag & _TX_MASK not in _NO_QUEUE_OFFSET else None,)
        with self.put_lock:
            claimed = self._claim(total, keys, True)
            assert claimed is not None  # a rolling claim returns or raises
            mf, ts, qoff, listed = claimed
            phys = mf.file_from_offset + mf.wrote_position
            mf.append(self._encode(m, qoff, phys, ts))
            self._commit(mf, ts, keys, qoff, listed)
        self.last_store_timestamp = ts
        return phys, total, qoff

    def append_v1(self, record: V1Record) -> tuple[int, int, int] | None:
        """:meth:`append` of the common record, packed in place; None when it needs a roll
        (or disk reserved past ``mf.reserved``: :meth:`append` reserves).

        The common record (one :data:`V1Record`, taken whole: spreading its ten
        fields over parameters costs a slower call): V1 magic, SYSFLAG 0 (no
        compression, NOT transaction type), IPv4 born host, ``tail`` from
        :meth:`RecordEncoder.frame`. Its header is packed straight into the mapping
        and body and tail copied after it: no intermediate record bytes, no
        ``EncodedMessage``. None leaves everything untouched; the caller then uses
        :meth:`append`, which rolls. Returns (physical offset, queue offset, store
        timestamp).
        """
        (key, queue_id, flag, born_timestamp, born_host, reconsume_times, body, crc, tail,
         total) = record  # fmt: skip
        with self.put_lock:
            claimed = self._claim(total, key, False)
            if claimed is None:
                return None
            mf, ts, qoff, _ = claimed
            pos = mf.wrote_position
            phys = mf.file_from_offset + pos
            self.encoder.encode_v1_into(
                mf.mapping, pos, total, crc, queue_id, flag, qoff, phys,
                ts if born_timestamp is None else born_timestamp, born_host, ts,
                reconsume_times, body, tail,
            )  # fmt: skip
            mf.wrote_position = pos + total
            mf.last_store_timestamp = ts  # _commit of one record, inline: the hottest path
            self.topic_queue_table[key] = qoff + 1
        self.last_store_timestamp = ts
        return phys, qoff, ts

    def append_v1_batch(
        self, records: Sequence[V1Record]
    ) -> tuple[list[int], list[int], int] | None:
        """:meth:`append_batch` of common records (as :meth:`append_v1`), packed in place.

        One lock acquisition, every header packed straight into the mapping. None
        when the batch does not fit the current segment (nothing is written; the
        caller uses :meth:`append_batch`, which rolls). Returns (physical offsets,
        queue offsets, store timestamp).
        """
        need = sum(map(_V1_TOTAL, records))
        keys = list(map(_V1_KEY, records))
        with self.put_lock:
            claimed = self._claim(need, keys, False)
            if claimed is None:
                return None
            mf, ts, q0, listed = claimed
            qoffs = list(range(q0, q0 + len(keys))) if listed is None else listed.offsets
            pos = mf.wrote_position
            physs = self.encoder.encode_v1_many_into(
                mf.mapping, pos, mf.file_from_offset, ts, records, qoffs
            )
            mf.wrote_position = pos + need
            self._commit(mf, ts, keys, q0, listed)
        self.last_store_timestamp = ts
        return physs, qoffs, ts

    def append_batch(self, msgs: Sequence[EncodedMessage]) -> AppendResult:
        """Append records contiguously in one segment, under one lock acquisition.

        Raises:
            RollFailed: as :meth:`append`.
        """
        total = sum(m.total for m in msgs)
        keys = [
            m.queue_key if m.sys_flag & _TX_MASK not in _NO_QUEUE_OFFSET else None for m in msgs
        ]
        with self.put_lock:
            claimed = self._claim(total, keys, True)
            assert claimed is not None  # a rolling claim returns or raises
            mf, ts, q0, listed = claimed
            qoffs = list(range(q0, q0 + len(keys))) if listed is None else listed.offsets
            phys = mf.file_from_offset + mf.wrote_position
            datas: list[bytes] = []
            physs: list[int] = []
            for m, q in zip(msgs, qoffs, strict=True):
                d = self._encode(m, q, phys, ts)
                datas.append(d)
                physs.append(phys)
                phys += len(d)
            mf.append(b"".join(datas))
            self._commit(mf, ts, keys, q0, listed)
        self.last_store_timestamp = ts
        return AppendResult(
            AppendStatus.PUT_OK,
            physs[0],
            total,
            qoffs[0],
            ts,
            len(msgs),
            tuple(qoffs),
            tuple(physs),
        )

    def append_raw_at(self, offset: int, data: bytes | memoryview) -> None:
        """Append raw log bytes at exactly ``offset`` (HA slave, reput tests).

        ``offset`` must be the current end of the log (or, when the log is empty, a
        segment boundary: the master starts a new slave at the start of its last
        segment); ``data`` must not cross a segment boundary.

        Raises:
            ValueError: offset mismatch or a boundary crossing.
            RollFailed: segment creation failed.
        """
        with self.put_lock:
            size = self.segments.file_size
            if self.segments.files and offset != self.max_offset:
                raise ValueError(f"append at {offset} but the log ends at {self.max_offset}")
            if not self.segments.files and offset % size:
                raise ValueError(f"an empty log starts at a segment boundary, not at {offset}")
            if offset // size != (offset + len(data) - 1) // size and data:
                raise ValueError(f"{len(data)} bytes at {offset} cross a segment boundary")
            try:
                mf = self.segments.last_for_write(offset)
            except OSError as e:
                raise RollFailed(str(e)) from e
            if mf.file_from_offset + mf.wrote_position != offset:
                raise ValueError(
                    f"append at {offset} but the segment writes at "
                    f"{mf.file_from_offset + mf.wrote_position}"
                )
            mf.append(data)
