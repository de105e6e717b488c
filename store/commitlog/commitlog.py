"""The CommitLog: appends framed records to the segments under one put lock.

Two verbs for writing: :meth:`CommitLog.append` of :data:`Frame` s (a single put is
a batch of one), and :meth:`CommitLog.append_raw_at` of bytes already laid out (an HA
slave copying its master). Responsibilities: assign queue offsets (per
``topic-queueId``), stamp the store time and physical offset, pack the records'
headers, roll segments with RocketMQ's 8-byte blank record, and read records back.
It does not flush (``flush.py``), recover (``recovery.py``) or know about consume
queues: a narrow component the store composes.

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
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Final

from mqstore.commitlog import format as fmt
from mqstore.commitlog.mapped_file import MappedFile
from mqstore.commitlog.segments import Segments

if TYPE_CHECKING:
    import mmap

_BORN_V6 = fmt.BORNHOST_V6_FLAG
_MIN_BLANK = fmt.END_FILE_MIN_BLANK_LENGTH


Frame = tuple[
    str | None, int, int, int, int | None, bytes, int, int, bytes, int, bytes, int, int, str
]
"""A message framed for the log: every field of its record but the three the put lock
assigns (QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP), as one plain tuple, in order:

==  ===========================  =====================================================
0   key                          topic-queue key whose offset the record takes; None:
                                 it takes none (PREPARED, ROLLBACK: queue offset 0)
1   queue_id                     QUEUEID
2   flag                         FLAG
3   sys_flag                     SYSFLAG with the born-host bit (the log adds the
                                 store-host bit)
4   born_timestamp               BORNTIMESTAMP; None: the store timestamp
5   born_host                    BORNHOST bytes
6   reconsume_times              RECONSUMETIMES
7   prepared_transaction_offset  PREPARED TX OFFSET
8   body                         the stored body
9   crc                          BODYCRC
10  tail                         topic and properties with their length fields
11  magic                        the version's MAGICCODE
12  total                        TOTALSIZE
13  uniq                         the message's UNIQ_KEY (the put's result; the log does
                                 not read it, it is inside the properties)
==  ===========================  =====================================================

The one record type :meth:`CommitLog.append` takes, built outside the lock by the
framer (``mqstore.put_frame``; :func:`make_frame` names the fields). A plain tuple,
built and unpacked once per put: the cheapest shape CPython has (a NamedTuple costs
several times as much to build and to unpack); read its fields by the names below."""
FRAME_KEY: Final = 0
FRAME_TOTAL: Final = 12
FRAME_UNIQ: Final = 13


def make_frame(
    *,
    key: str | None,
    queue_id: int,
    flag: int,
    sys_flag: int,
    born_timestamp: int | None,
    born_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    crc: int,
    tail: bytes,
    magic: int,
    total: int,
    uniq: str,
) -> Frame:
    """A :data:`Frame` from its named fields."""
    return (key, queue_id, flag, sys_flag, born_timestamp, born_host, reconsume_times,
            prepared_transaction_offset, body, crc, tail, magic, total, uniq)  # fmt: skip


Appended = tuple[list[int], list[int], int]
"""What :meth:`CommitLog.append` returns: the records' physical offsets, their queue
offsets (0 for a record without a key) and the store timestamp they carry."""

_KEY = itemgetter(FRAME_KEY)
_TOTAL = itemgetter(FRAME_TOTAL)


def queue_key(topic: str, queue_id: int) -> str:
    """The topic-queue table key, as RocketMQ builds it (``topic-queueId``)."""
    return f"{topic}-{queue_id}"


def _listed(table: dict[str, int], keys: list[str | None]) -> tuple[list[int], dict[str, int]]:
    """The queue offsets of a batch whose records go to several queues: one per
    record (0 for a key of None), and each queue's next offset after the batch."""
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
    return qoffs, after


class RollFailed(Exception):
    """A new segment could not be created (disk full, permissions)."""


_time_ns = time.time_ns


def _now_ms() -> int:
    return _time_ns() // 1_000_000


_WALL_CLOCK: Final = _now_ms
"""The default clock, which :meth:`CommitLog.append` reads inline (no frame per put)."""


class RecordPacker:
    """Writes :data:`Frame` s as records into a buffer: the one place a record's
    header is packed (the layout's structs, ``mqstore.commitlog.format``), for one
    store host. Pure: no I/O, no lock (:meth:`CommitLog.append` holds it)."""

    __slots__ = ("_packs", "_store_flag", "_store_host", "_structs")

    # One record (a single put) is packed by :meth:`pack_one`, a batch by :meth:`pack`.

    def __init__(self, store_host: bytes) -> None:
        store_len = len(store_host)
        self._store_host = store_host
        # The header structs by the born host's width (SYSFLAG's born-host bit), and
        # the store-host bit every record carries.
        self._structs = {
            0: fmt.header_struct(fmt.IPV4_HOST_LEN, store_len),
            _BORN_V6: fmt.header_struct(fmt.IPV6_HOST_LEN, store_len),
        }
        self._packs = {bit: header.pack for bit, header in self._structs.items()}
        self._store_flag = fmt.STOREHOST_V6_FLAG if store_len == fmt.IPV6_HOST_LEN else 0

    def pack_one(
        self, buf: mmap.mmap | bytearray, pos: int, phys: int, ts: int, frame: Frame, qoff: int
    ) -> None:
        """:meth:`pack` of one record (a single put), in place: its header packed
        straight into ``buf`` and its body and tail copied after it, no record bytes
        built."""
        (_k, qid, flag, sys_flag, born_ts, born, reconsume, prepared, body, crc, tail,
         magic, total, _u) = frame  # fmt: skip
        header = self._structs[sys_flag & _BORN_V6]
        header.pack_into(
            buf, pos, total, magic, crc, qid, flag, qoff, phys, sys_flag | self._store_flag,
            ts if born_ts is None else born_ts, born, ts, self._store_host, reconsume,
            prepared, len(body),
        )  # fmt: skip
        b = pos + header.size
        e = b + len(body)
        buf[b:e] = body
        buf[e : pos + total] = tail

    def pack(
        self,
        buf: mmap.mmap | bytearray,
        pos: int,
        phys: int,
        ts: int,
        frames: Sequence[Frame],
        qoffs: Sequence[int],
    ) -> list[int]:
        """Write ``frames`` as records at ``buf[pos:]``, the first at log offset
        ``phys``, with their queue offsets and store timestamp ``ts``; return their
        physical offsets.

        One record (a single put) is packed in place, its body and tail copied after
        its header. A batch's records are joined and copied at once (one copy
        instead of three writes per record), so a field that does not pack raises
        before any byte is written (the framer checked the numbers: this is the
        backstop; a single record's pack fails before its body is copied, and past
        the write position).
        """
        if len(frames) == 1:
            self.pack_one(buf, pos, phys, ts, frames[0], qoffs[0])
            return [phys]
        packs = self._packs
        store_flag = self._store_flag
        host = self._store_host
        parts: list[bytes] = []
        add = parts.append
        physs: list[int] = []
        start = phys
        for (_k, qid, flag, sys_flag, born_ts, born, reconsume, prepared, body, crc, tail,
             magic, total, _u), q in zip(frames, qoffs, strict=True):  # fmt: skip
            add(packs[sys_flag & _BORN_V6](
                total, magic, crc, qid, flag, q, phys, sys_flag | store_flag,
                ts if born_ts is None else born_ts, born, ts, host, reconsume, prepared,
                len(body),
            ))  # fmt: skip
            add(body)
            add(tail)
            physs.append(phys)
            phys += total
        buf[pos : pos + phys - start] = b"".join(parts)
        return physs


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
        packer = RecordPacker(store_host)
        self._pack = packer.pack
        self._pack_one = packer.pack_one

    # ------------------------------------------------------------------ offsets

    def restore_queue_offsets(self, table: Mapping[str, int]) -> None:
        """Take recovery's topic-queue table (``topic-queueId`` -> the offset the
        queue's next message gets) before the first append; later appends advance it."""
        with self.put_lock:
            self.topic_queue_table.update(table)

    def next_queue_offset(self, key: str) -> int:
        """The queue offset the next message to queue ``key`` (``topic-queueId``) gets."""
        return self.topic_queue_table.get(key, 0)

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

    def _writable(self) -> MappedFile:
        try:
            mf = self.segments.last_for_write(self.segments.max_offset)
            mf.map()  # records are packed straight into its mapping
        except OSError as e:
            raise RollFailed(f"cannot create segment in {self.segments.directory}: {e}") from e
        return mf

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

    def _room(self, mf: MappedFile | None, need: int) -> MappedFile:
        """The segment that takes ``need`` more bytes, disk reserved for them: ``mf``
        (the last segment, None when there is none), or the next one after a roll.
        The caller holds :attr:`put_lock`.

        Raises:
            RollFailed: a segment could not be created or disk reserved.
        """
        if mf is None or need + _MIN_BLANK > mf.file_size - mf.wrote_position:
            mf = self._writable() if mf is None or mf.is_full else self._roll(mf)
        if mf.wrote_position + need > mf.reserved:
            self._reserve(mf, mf.wrote_position + need)
        return mf

    def append(self, frames: Sequence[Frame]) -> Appended:
        """Append records contiguously in one segment, under one lock acquisition: the
        one way records of messages enter the log (a single put is a batch of one).

        Assigns each record its queue offset (the next of its queue; a record
        without a key gets 0 and takes none), its physical offset and the store
        timestamp, packs the records into the mapping, and advances the topic-queue
        table. Rolls to a new segment first when the records do not fit the current
        one. The caller has checked the sizes (``sum(total) + 8 <= file_size``).

        Raises:
            RollFailed: a needed segment could not be created or disk reserved;
                nothing was written beyond a blank record (which readers skip), so
                the log and the topic-queue table stay valid.
        """
        table = self.topic_queue_table
        if len(frames) == 1:  # one record: a single put, packed by its own short path
            frame = frames[0]
            need = frame[12]  # FRAME_TOTAL (a literal: no global lookup per put)
            key = frame[0]  # FRAME_KEY
            with self.put_lock:
                files = self.segments.files
                mf = files[-1] if files else None
                if mf is None or need + _MIN_BLANK > mf.reserved - mf.wrote_position:
                    mf = self._room(mf, need)
                clock = self._clock
                ts = _time_ns() // 1_000_000 if clock is _WALL_CLOCK else clock()
                q = 0 if key is None else table.get(key, 0)
                pos = mf.wrote_position
                phys = mf.file_from_offset + pos
                self._pack_one(mf.mapping, pos, phys, ts, frame, q)
                mf.wrote_position = pos + need
                mf.last_store_timestamp = ts
                if key is not None:  # after the write: a write that raised leaves it
                    table[key] = q + 1
            return [phys], [q], ts
        need = sum(map(_TOTAL, frames))
        listed: list[str | None] = list(map(_KEY, frames))
        key = listed[0]  # every record of one queue (the usual): its offsets run on
        keys = None if key is not None and listed.count(key) == len(listed) else listed
        with self.put_lock:
            files = self.segments.files
            mf = self._room(files[-1] if files else None, need)
            ts = self._clock()
            if key is None or keys is not None:
                qoffs, after = _listed(table, listed)
            else:
                q0 = table.get(key, 0)
                qoffs = list(range(q0, q0 + len(frames)))
            pos = mf.wrote_position
            physs = self._pack(mf.mapping, pos, mf.file_from_offset + pos, ts, frames, qoffs)
            mf.wrote_position = pos + need
            mf.last_store_timestamp = ts
            # the table moves after the write: a write that raised leaves it as it was
            if key is None or keys is not None:
                table.update(after)
            else:
                table[key] = qoffs[-1] + 1
        return physs, qoffs, ts

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
