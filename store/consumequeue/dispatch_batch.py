"""Dispatching many records at once: the reput thread's path when a backlog is pending.

:class:`BatchDispatcher` does for a run of records what
:meth:`mqstore.consumequeue.dispatch.Dispatcher.dispatch_one` does for one, with numpy
instead of Python per record:

1. **read** (:meth:`BatchDispatcher.read`, no side effect): the TOTALSIZE chain is
   walked (:func:`mqstore.commitlog.bulk.walk`), the fixed header of every record is
   gathered in one indexing operation, and the records are held to the trusted decode's
   acceptance rule (``mqstore.commitlog.cursor.step``: V1 magic, IPv4 hosts, lengths
   adding up to TOTALSIZE, properties not torn) plus ASCII topic and properties. The
   batch is the run of records before the first one that fails: that record, and everything the
   batch does not cover, goes through the per-record path, which stays the reference.
   Tag codes and index key hashes come from the columnar text helpers
   (:mod:`mqstore.commitlog._bulk_text`, ``string_to_properties``'s rules, the same
   answers as ``property_of``);
2. **apply** (:meth:`BatchDispatcher.apply`): one write of consume-queue units per queue
   (``ConsumeQueueStore.put_units``), the index keys inserted in bulk
   (``IndexService.build_batch``), then the arrivals, in log order.

The bytes written are the per-record path's (``tests/consumequeue/test_dispatch_batch.py``
holds the two to byte-identical ``consumequeue/`` and ``index/`` files). Failure
semantics stay the per-record path's by construction: when :meth:`apply` raises, the
caller dispatches the same records again one by one. Dispatching is idempotent (units
already there and index entries of messages already indexed are skipped, and the index
reserves its space before writing a file's part), so the replay stops at, counts or
defers exactly the record the per-record path would have.
"""

from __future__ import annotations

import errno
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

import numpy as np
from numpy.typing import NDArray

from mqstore.commitlog import _bulk_text as text
from mqstore.commitlog import _layout as L
from mqstore.commitlog import dispatch_rule as rule
from mqstore.commitlog._trusted import _TRUSTED, _TRUSTED_BODY_POS, _TRUSTED_SLOW_FLAGS
from mqstore.commitlog.bulk import PlainRecords, walk
from mqstore.consumequeue.arrival import Arrival, ArrivalListener
from mqstore.message import string_to_properties

if TYPE_CHECKING:
    from mqstore.commitlog.dispatch_rule import DeliverTimes
    from mqstore.consumequeue.filter_bits import FilterBits
    from mqstore.consumequeue.store import ConsumeQueueStore
    from mqstore.index.service import IndexService

I64 = NDArray[np.int64]

MIN_RECORDS: Final = 32
"""Fewer pending records than this are dispatched one by one (a batch's fixed cost,
some hundred microseconds of numpy calls, is then more than the per-record path's)."""
MIN_BYTES: Final = MIN_RECORDS * L.MIN_RECORD_SIZE
"""Fewer pending bytes than this cannot hold :data:`MIN_RECORDS` records."""

NO_SPACE: Final = frozenset((errno.ENOSPC, errno.EDQUOT))
"""errno values that mean "the disk is full" rather than "the disk is broken"."""
_CODES: Final = {"i": ">i4", "q": ">i8", "s": "S"}


def _header_dtype(s: struct.Struct) -> np.dtype[Any]:
    """A numpy record type with the fields of a big-endian ``struct`` format."""
    fields = []
    for i, (count, code) in enumerate(re.findall(r"(\d*)([a-zA-Z])", s.format[1:])):
        kind = _CODES[code]
        fields.append((f"f{i}", kind + count if code == "s" else kind))
    dt = np.dtype(fields)
    assert dt.itemsize == s.size
    return dt


_HEADER: Final = _header_dtype(_TRUSTED)
_F = _HEADER.names or ()
"""Field names in ``_TRUSTED``'s order (as ``cursor.step`` unpacks them)."""
_SIZE, _MAGIC, _QID, _QOFF, _PHYS, _SYSFLAG, _STORE_TS, _BODY_LEN = (
    _F[0], _F[1], _F[3], _F[5], _F[6], _F[7], _F[10], _F[14],
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Spans:
    """Gathered text: ``flat`` holds the spans back to back, span ``i`` at
    ``flat[offs[i] : offs[i] + lens[i]]``."""

    flat: NDArray[np.uint8]
    offs: I64
    lens: I64


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """The dispatch fields of a run of records, one element per record, in log order."""

    length: int
    """The bytes the run covers from where it was read."""
    position: I64
    """Each record's position in the segment."""
    topic_id: I64
    """Each record's topic, as an index into :attr:`topics`."""
    topics: tuple[str, ...]
    queue_id: I64
    queue_offset: I64
    physical_offset: I64
    size: I64
    sys_flag: I64
    store_timestamp: I64
    tags_code: I64
    """The consume-queue unit's tag code: the TAGS hash, or a delayed record's deliver time."""
    in_queue: NDArray[np.bool_]
    """Whether the record gets a consume-queue unit (not a PREPARED or ROLLBACK transaction)."""
    key_record: I64
    """Index keys: ``key_hash[i]`` belongs to record ``key_record[i]`` (UNIQ_KEY, then each
    KEYS token, as ``Dispatcher.index_fields`` builds them), ROLLBACK records left out."""
    key_hash: NDArray[np.int32]

    @property
    def count(self) -> int:
        """Records in the batch."""
        return int(self.size.size)


class DispatchTarget(Protocol):
    """What a batch is applied to: the dispatcher's queues, index, delay levels and
    arrival announcements (``mqstore.consumequeue.dispatch.Dispatcher``), and the
    state of its indexing (deferred to a catch-up; out of space)."""

    @property
    def defer_index(self) -> bool: ...

    @property
    def listeners(self) -> Sequence[ArrivalListener]: ...

    def index_out_of_space(self, phys: int, e: OSError) -> None: ...

    @property
    def queues(self) -> ConsumeQueueStore: ...

    @property
    def index(self) -> IndexService | None: ...

    @property
    def delay_levels(self) -> DeliverTimes: ...

    @property
    def filter_bits(self) -> FilterBits | None: ...

    def notify(self, arrival: Arrival) -> None: ...


class BatchDispatcher:
    """Reads runs of records into :class:`RecordBatch` values and applies them through
    a :class:`DispatchTarget`'s queues, index and listeners."""

    def __init__(self, dispatcher: DispatchTarget, min_records: int = MIN_RECORDS) -> None:
        self._d = dispatcher
        self.min_records = min_records
        self.min_bytes = min_records * L.MIN_RECORD_SIZE
        self.stopped_by: OSError | None = None
        """The error that stopped the last :meth:`index` that stopped."""

    # ------------------------------------------------------------------- read

    def read(
        self, view: memoryview, pos: int, end: int, max_records: int, *, keys: bool | None = None
    ) -> RecordBatch | int:
        """The batch of plain records starting at ``view[pos]`` (before ``end``), or,
        when fewer than ``min_records`` of them start there, the position up to which
        the caller should dispatch record by record instead (past the first record the
        batch could not take, or ``end``). Reads only. ``keys``: hash the index keys
        (None: if the dispatcher indexes now, i.e. it has an index and does not defer).
        """
        positions = walk(view, pos, end, end, max_records)
        if len(positions) < self.min_records:
            return self._per_record_until(view, positions, pos, end)
        d = self._d
        if keys is None:
            keys = not d.defer_index
        u8 = np.frombuffer(view, np.uint8)
        try:
            return self._read(u8, view, positions, pos, end, keys and d.index is not None)
        finally:
            del u8

    def _per_record_until(self, view: memoryview, positions: list[int], pos: int, end: int) -> int:
        if not positions:
            return min(end, pos + 1)
        last = positions[-1]
        return min(end, last + int.from_bytes(view[last : last + 4], "big", signed=True))

    def _read(
        self,
        u8: NDArray[np.uint8],
        view: memoryview,
        positions: list[int],
        pos: int,
        end: int,
        keys: bool,
    ) -> RecordBatch | int:
        p = np.array(positions, np.int64)
        top = u8.size - 1
        # Each header in one copy: items of the header's width over every byte offset.
        width = _HEADER.itemsize
        items = np.ndarray((u8.size - width + 1,), _HEADER, buffer=u8, strides=(1,))
        hdr = items[np.minimum(p, u8.size - width)]
        del items
        size = hdr[_SIZE].astype(np.int64)
        sys_flag = hdr[_SYSFLAG].astype(np.int64)
        body_len = hdr[_BODY_LEN].astype(np.int64)
        rec_end = p + size
        # The trusted decode's rule: the topic's length byte, then a two-byte
        # properties length (top bit clear) whose properties end the record.
        tl_pos = p + _TRUSTED_BODY_POS + body_len
        t_len = u8[np.clip(tl_pos, 0, top)].astype(np.int64)
        t_end = tl_pos + 1 + t_len
        p_hi = u8[np.clip(t_end, 0, top)].astype(np.int64)
        p_lo = u8[np.clip(t_end + 1, 0, top)].astype(np.int64)
        ok = (hdr[_MAGIC] == L.MAGIC_V1) & (sys_flag & _TRUSTED_SLOW_FLAGS == 0)
        ok &= (body_len >= 0) & (tl_pos < rec_end) & (t_len <= 127) & (p_hi <= 127)
        ok &= t_end + 2 + (p_hi << 8 | p_lo) == rec_end
        ok &= (u8[np.clip(rec_end - 1, 0, top)] != 0) | (p_hi == 0) & (p_lo == 0)  # not torn
        n = int(np.argmin(ok)) if not ok.all() else p.size
        t_pos, props_pos = tl_pos + 1, t_end + 2
        props_len = rec_end - props_pos
        t_flat, t_offs = text.gather(view, t_pos[:n], t_len[:n])
        p_flat, p_offs = text.gather(view, props_pos[:n], props_len[:n])
        n = _ascii_count(t_flat, t_offs, t_len[:n], p_flat, p_offs, props_len[:n])
        if n < self.min_records:
            return min(end, int(rec_end[n]) if n < p.size else int(rec_end[-1]))
        if n < p.size:
            t_flat, t_offs, p_flat, p_offs = _cut(
                t_flat, t_offs, t_len, p_flat, p_offs, props_len, n
            )
        length = int(rec_end[n - 1]) - pos
        return self._batch(
            view, length, p[:n], Spans(t_flat, t_offs, t_len[:n]),
            Spans(p_flat, p_offs, props_len[:n]), props_pos[:n],
            hdr[_QID][:n].astype(np.int64), hdr[_QOFF][:n].astype(np.int64),
            hdr[_PHYS][:n].astype(np.int64), size[:n], sys_flag[:n],
            hdr[_STORE_TS][:n].astype(np.int64), keys,
        )  # fmt: skip

    def read_plain(
        self, view: memoryview, recs: PlainRecords, lo: int, hi: int, *, keys: bool | None = None
    ) -> RecordBatch | int:
        """The batch of records ``lo`` to ``hi`` (excluded) of a bulk scan of ``view``
        (:func:`mqstore.commitlog.bulk.scan_plain`), or, when fewer than ``min_records``
        of them lead with ASCII text, how many records from ``lo`` the caller should
        dispatch one by one instead (through the first one the batch cannot take).
        Reads only; ``keys`` as :meth:`read`.

        The records must be whole records the scan accepted (recovery's, in log order):
        their header fields and text spans are taken as they are, not walked or checked
        again. Only the text is looked at: a record whose topic or properties hold a
        byte >= 0x80 ends the batch (the text helpers take ASCII only).
        """
        d = self._d
        if keys is None:
            keys = not d.defer_index
        sl = slice(lo, hi)
        t_len, props_pos, props_len = recs.topic_len[sl], recs.props_pos[sl], recs.props_len[sl]
        t_flat, t_offs = text.gather(view, recs.topic_pos[sl], t_len)
        p_flat, p_offs = text.gather(view, props_pos, props_len)
        n = _ascii_count(t_flat, t_offs, t_len, p_flat, p_offs, props_len)
        if n < self.min_records:
            return min(n + 1, hi - lo)
        if n < hi - lo:
            t_flat, t_offs, p_flat, p_offs = _cut(
                t_flat, t_offs, t_len, p_flat, p_offs, props_len, n
            )
        sl = slice(lo, lo + n)
        p, size = recs.position[sl], recs.size[sl]
        length = int(p[-1] + size[-1] - p[0])
        return self._batch(
            view, length, p, Spans(t_flat, t_offs, t_len[:n]), Spans(p_flat, p_offs, props_len[:n]),
            props_pos[:n], recs.queue_id[sl], recs.queue_offset[sl], recs.physical_offset[sl],
            size, recs.sys_flag[sl], recs.store_timestamp[sl], keys,
        )  # fmt: skip

    def _batch(
        self,
        view: memoryview,
        length: int,
        p: I64,
        topic: Spans,
        props_text: Spans,
        props_pos: I64,
        queue_id: I64,
        queue_offset: I64,
        physical_offset: I64,
        size: I64,
        sys_flag: I64,
        store_ts: I64,
        keys: bool,
    ) -> RecordBatch:
        """The batch of records whose fields and gathered ASCII text are given: topic
        ids, tag codes (delayed records' deliver times), index key hashes if ``keys``."""
        topic_id, topics = _topic_ids(topic.flat, topic.offs, topic.lens)
        props = text.Properties(props_text.flat, props_text.offs, props_text.lens)
        tags = text.tags_codes(props_text.flat, props)
        in_queue = rule.units_mask(sys_flag)
        delayed = rule.needs_delayed_code(topic_id, topics) & in_queue
        if delayed.any():
            self._delayed_codes(view, delayed, props_pos, props_text.lens, store_ts, tags)
        key_rec, key_hash = _no_keys()
        if keys and self._d.index is not None:
            want = rule.keys_mask(sys_flag)
            key_rec, key_hash = text.index_keys(
                props_text.flat, props, topic_id, list(topics), want
            )
        return RecordBatch(
            length, p, topic_id, topics, queue_id, queue_offset, physical_offset, size,
            sys_flag, store_ts, tags, in_queue, key_rec, key_hash,
        )  # fmt: skip

    def _delayed_codes(
        self,
        view: memoryview,
        delayed: NDArray[np.bool_],
        props_pos: I64,
        props_len: I64,
        store_ts: I64,
        tags: I64,
    ) -> None:
        """The ``delayed`` records' codes (:func:`.dispatch_rule.delayed_tags_code`)."""
        levels = self._d.delay_levels
        for i in np.flatnonzero(delayed).tolist():
            a, b = int(props_pos[i]), int(props_pos[i] + props_len[i])
            props = string_to_properties(bytes(view[a:b]).decode())
            tags[i] = rule.delayed_tags_code(props, int(store_ts[i]), levels)

    # ------------------------------------------------------------------ apply

    def apply(self, b: RecordBatch) -> None:
        """Write the batch's units and index entries, then announce its arrivals.

        Raises:
            Exception: whatever a queue or the index raised; the caller dispatches the
                batch's records again one by one (module doc).
        """
        d = self._d
        rows = np.flatnonzero(b.in_queue)
        bits = d.filter_bits
        if rows.size and bits is not None and bits.topics:  # before the units: filter_bits
            bits.record_rows(b.topics, b.topic_id, b.queue_id, b.queue_offset,
                             b.physical_offset, b.size, rows)  # fmt: skip
        if rows.size:
            self._put_units(b, rows)
        if d.index is not None and not d.defer_index and b.key_hash.size:
            stop = d.index.build_batch(
                b.physical_offset, b.store_timestamp, b.key_record, b.key_hash
            )
            if stop is not None:
                if stop.error.errno not in NO_SPACE:
                    raise stop.error
                # As the per-record path: units keep flowing, indexing resumes there.
                d.index_out_of_space(int(b.physical_offset[stop.message]), stop.error)
        if rows.size and d.listeners:
            self._notify(b, rows)

    def index(self, b: RecordBatch) -> int | None:
        """Index the batch only (its units are there): the index catch-up's step.

        Returns None, or, when the index stopped (``IndexService.build_batch``), the
        position of the first record not wholly indexed, the error set aside in
        :attr:`stopped_by` (the per-record path would raise it there).
        """
        index = self._d.index
        if index is not None and b.key_hash.size:
            stop = index.build_batch(b.physical_offset, b.store_timestamp, b.key_record, b.key_hash)
            if stop is not None:
                self.stopped_by = stop.error
                return int(b.position[stop.message])
        return None

    def _put_units(self, b: RecordBatch, rows: I64) -> None:
        queues = self._d.queues
        key = (b.topic_id[rows] << 32) | (b.queue_id[rows] & 0xFFFFFFFF)
        if key.size == 1 or (key == key[0]).all():
            groups = [rows] if rows.size > 1 else []
            singles = rows if rows.size == 1 else rows[:0]
        else:
            order = np.argsort(key, kind="stable")
            sk = key[order]
            starts = np.flatnonzero(np.concatenate(([True], sk[1:] != sk[:-1])))
            sizes = np.diff(np.append(starts, sk.size))
            ordered = rows[order]
            # A queue's only unit in the batch (puts spread over many queues): written
            # one by one from plain lists, without the arrays of a run.
            singles = ordered[starts[sizes == 1]]
            runs = sizes > 1
            spans = zip(starts[runs].tolist(), sizes[runs].tolist(), strict=True)
            groups = [ordered[s : s + n] for s, n in spans]
        last = self._put_singles(b, singles) if singles.size else -1
        for g in groups:
            i = int(g[0])
            units = np.empty(g.size, rule.UNIT_DTYPE)
            units["p"] = b.physical_offset[g]
            units["s"] = b.size[g]
            units["t"] = b.tags_code[g]
            written = queues.put_units(
                b.topics[int(b.topic_id[i])], int(b.queue_id[i]), units,
                b.queue_offset[g],
            )  # fmt: skip
            if written.any():
                last = max(last, int(g[np.flatnonzero(written)[-1]]))
        if last >= 0:
            queues.logics_msg_timestamp = int(b.store_timestamp[last])

    def _put_singles(self, b: RecordBatch, rows: I64) -> int:
        """Write the unit of each of ``rows`` (each the only one of its queue in the
        batch) through ``ConsumeQueueStore.put``; the last row written (-1: none)."""
        put, topics = self._d.queues.put, b.topics
        last = -1
        for i, tid, qid, phys, size, code, qoff, ts in zip(
            rows.tolist(), b.topic_id[rows].tolist(), b.queue_id[rows].tolist(),
            b.physical_offset[rows].tolist(), b.size[rows].tolist(), b.tags_code[rows].tolist(),
            b.queue_offset[rows].tolist(), b.store_timestamp[rows].tolist(), strict=True,
        ):  # fmt: skip
            if put(topics[tid], qid, phys, size, code, qoff, ts) and i > last:
                last = i
        return last

    def _notify(self, b: RecordBatch, rows: I64) -> None:
        notify, topics = self._d.notify, b.topics
        for tid, qid, qoff, code, ts in zip(
            b.topic_id[rows].tolist(), b.queue_id[rows].tolist(), b.queue_offset[rows].tolist(),
            b.tags_code[rows].tolist(), b.store_timestamp[rows].tolist(), strict=True,
        ):  # fmt: skip
            notify(Arrival(topics[tid], qid, qoff, code, ts))


def _no_keys() -> tuple[I64, NDArray[np.int32]]:
    return np.zeros(0, np.int64), np.zeros(0, np.int32)


def _ascii_count(
    t_flat: NDArray[np.uint8], t_offs: I64, t_len: I64,
    p_flat: NDArray[np.uint8], p_offs: I64, p_len: I64,
) -> int:  # fmt: skip
    """How many records lead whose topic and properties are ASCII (the text helpers'
    domain, where UTF-8 and UTF-16 agree)."""
    if not ((t_flat.size and t_flat.max() >= 0x80) or (p_flat.size and p_flat.max() >= 0x80)):
        return int(t_len.size)
    wide = np.zeros(t_len.size, np.bool_)
    if t_flat.size:
        wide |= text.span_count(t_flat >= 0x80, t_offs, t_len) > 0
    if p_flat.size:
        wide |= text.span_count(p_flat >= 0x80, p_offs, p_len) > 0
    return int(np.argmax(wide))


def _cut(
    t_flat: NDArray[np.uint8], t_offs: I64, t_len: I64,
    p_flat: NDArray[np.uint8], p_offs: I64, p_len: I64, n: int,
) -> tuple[NDArray[np.uint8], I64, NDArray[np.uint8], I64]:  # fmt: skip
    """The gathered text of the first ``n`` records only."""
    t_end = int(t_offs[n - 1] + t_len[n - 1])
    p_end = int(p_offs[n - 1] + p_len[n - 1])
    return t_flat[:t_end], t_offs[:n], p_flat[:p_end], p_offs[:n]


def _topic_ids(flat: NDArray[np.uint8], offs: I64, lens: I64) -> tuple[I64, tuple[str, ...]]:
    """Small integer ids of the (ASCII) topics and the id -> name table."""
    n = lens.size
    first = flat[: int(lens[0])].tobytes()
    width = int(lens.max())
    if width == lens[0] and (lens == width).all():
        grid = flat[: n * width].reshape(n, width) if width else np.zeros((n, 0), np.uint8)
        if width == 0 or (grid == grid[0]).all():
            return np.zeros(n, np.int64), (first.decode("ascii"),)
    # Several topics: rows of a zero-padded matrix, with the length in front.
    idx = offs[:, None] + np.arange(width)
    grid = (
        flat[np.minimum(idx, max(flat.size - 1, 0))]
        if flat.size
        else np.zeros((n, width), np.uint8)
    )
    grid[np.arange(width) >= lens[:, None]] = 0
    rows = np.concatenate([lens.astype(">u2").view(np.uint8).reshape(n, 2), grid], axis=1)
    keys = np.ascontiguousarray(rows).view(f"V{width + 2}").ravel()
    _, at, inv = np.unique(keys, return_index=True, return_inverse=True)
    data = flat.tobytes()
    names = tuple(data[int(offs[i]) : int(offs[i] + lens[i])].decode("ascii") for i in at.tolist())
    return inv.ravel().astype(np.int64), names
