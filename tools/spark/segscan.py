"""Checking one byte range of one CommitLog segment: the per-task work of the audit.

The range is read through the cursor (:func:`mqstore.tools.spark.byterange.range_cursor`,
over a buffer: an mmap in a Spark task, bytes in a unit test): the cursor steps from
record to record, resynchronises past damage and says where the log's torn tail is;
this module turns what it yields into rows:

* ``Row.record`` for every record whose fields can be read (a bad body CRC still yields
  the record, flagged ``crc_ok=False``, so queue continuity and ConsumeQueue checks see
  it and report the damage once, as ``bad_crc``: the cursor walks without CRC checks and
  the CRC is checked here);
* ``Row.finding`` for each problem, with the byte position *in the file*;
* one ``Row.range`` summary (records, bytes, first and last store timestamp) so the
  driver can check timestamps across ranges of a file.

Rules, in the spirit of LevelDB's log reader:

* a blank record must fill the rest of its file exactly, followed only by zeros;
* a segment other than the last must end with a blank record (``missing_blank``);
* each of the cursor's :class:`~mqstore.commitlog.cursor.Damage` items is one finding,
  of the codec's kind (``torn_record``: properties ending in a zero byte), saying
  where the walk resumed; zeros followed by data are a ``zeroed_gap``;
* damage after which the cursor finds no valid record before the log's end
  (:attr:`ByteRange.ends_log`) is the ``torn_tail`` (the cursor's rule: truncation,
  reported once, a warning), and zeros from a record boundary to that end are no
  finding at all: the log's data ends there.
"""

from __future__ import annotations

import enum
import mmap
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from mqstore.commitlog import bulk, cursor
from mqstore.commitlog import format as fmt
from mqstore.commitlog.cursor import Blank, BufferSegment, ColumnRun
from mqstore.tools.spark.byterange import ByteRange, range_cursor
from mqstore.tools.spark.headercheck import Edge, StoreTimes, header_findings

if TYPE_CHECKING:
    from numpy.typing import NDArray

Buffer = bytes | mmap.mmap
"""What the scan reads: bytes in tests, a read-only mmap of the whole file in tasks."""

DAY_MS: Final = 86_400_000
_ZERO_PROBE: Final = 1 << 20
_ZEROED: Final = fmt.CorruptKind.ZEROED.value
_TRUSTED_SIZE: Final = frozenset((fmt.CorruptKind.BAD_TEXT.value, "torn_record"))
"""Damage whose TOTALSIZE is the record's: one record, the next one right after it."""
TORN_RECORD: Final = "torn_record"
"""The kind of a record the codec reads but whose properties end in a zero byte
(:data:`mqstore.commitlog.cursor.TORN_PROPERTIES`), with valid records after it."""


class RowType(enum.Enum):
    """What a scan row describes."""

    RECORD = "record"
    FINDING = "finding"
    RANGE = "range"


class Row(NamedTuple):
    """One output row; fields that do not apply to the row type are None."""

    row_type: str
    file: str | None
    offset: int  # records: physical offset; findings, ranges: position in the file
    size: int | None = None
    topic: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    sys_flag: int | None = None
    store_ts: int | None = None
    tags_code: int | None = None
    crc_ok: bool | None = None
    kind: str | None = None
    detail: str | None = None
    first_ts: int | None = None
    last_ts: int | None = None
    # The Spark column is named "count"; nothing calls tuple.count on a Row.
    count: int | None = None  # type: ignore[assignment]
    edges: tuple[Edge, ...] | None = None
    """Range rows: the first and last records' store times (headercheck.StoreTimes.edges)."""


ROW_FIELDS: Final = Row._fields
RECORD_COLUMNS: Final = (
    "offset", "size", "topic", "queue_id", "queue_offset", "sys_flag", "store_ts", "tags_code",
    "crc_ok",
)  # fmt: skip
MAX_PER_KIND: Final = 1000
"""Findings of one kind kept per range; beyond it one finding says how many more."""


class RecordColumns:
    """The records of a scan as the bulk scanner's column chunks (never one object per
    record): :meth:`column` concatenates a field, ``offset`` is the record's position
    in the log (segment base + position), ``topic`` its name."""

    __slots__ = ("_bases", "_parts", "_topics", "keys")

    def __init__(self, *, keys: bool = False) -> None:
        self.keys = keys
        """Whether the scan also hashes each record's index keys."""
        self._parts: list[bulk.RecordArrays] = []
        self._bases: list[int] = []
        self._topics: dict[str, int] = {}

    def add(self, arrays: bulk.RecordArrays, base_offset: int) -> None:
        """Append a chunk of records read from the segment starting at ``base_offset``."""
        if len(arrays):
            self._parts.append(arrays)
            self._bases.append(base_offset)

    def clear(self) -> None:
        """Drop every record."""
        self._parts.clear()
        self._bases.clear()
        self._topics.clear()

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts)

    @property
    def topics(self) -> list[str]:
        """Topic names by the ids of :meth:`column` ``("topic_id")``."""
        self.column("topic_id")
        return list(self._topics)

    def column(self, name: str) -> NDArray[Any]:
        """One field of every record, in scan order (``offset``: log offset by position;
        ``store_ts``: the store timestamp; ``topic_id``: ids into :attr:`topics`)."""
        import numpy as np

        out = []
        for part, base in zip(self._parts, self._bases, strict=True):
            if name == "offset":
                out.append(part.position + base)
            elif name == "store_ts":
                out.append(part.store_timestamp)
            elif name == "topic_id":
                ids = [self._topics.setdefault(t, len(self._topics)) for t in part.topics]
                out.append(np.asarray(ids, np.int64)[part.topic_id])
            else:
                out.append(getattr(part, name))
        return np.concatenate(out) if out else np.zeros(0, np.int64)

    def parts(self) -> list[tuple[bulk.RecordArrays, int]]:
        """The chunks and their segments' base offsets."""
        return list(zip(self._parts, self._bases, strict=True))

    def rows(self) -> Iterator[Row]:
        """The records as :class:`Row` (tests, small outputs)."""
        names = self.topics
        cols = [self.column(n).tolist() for n in RECORD_COLUMNS if n != "topic"]
        topic = [names[i] for i in self.column("topic_id").tolist()]
        for t, values in zip(topic, zip(*cols, strict=True), strict=True):
            yield Row(RowType.RECORD.value, None, values[0], values[1], t, *values[2:])


def _finding(name: str, pos: int, kind: str, detail: str) -> Row:
    return Row(RowType.FINDING.value, name, pos, kind=kind, detail=detail)


def data_spans(path: str | None, start: int, end: int) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` of the file that may hold data: the file system's
    holes (``SEEK_DATA``/``SEEK_HOLE``: never written, or preallocated and unwritten)
    read as zeros and are skipped, so the zero tail of a preallocated 1 GiB segment is
    not read byte by byte. The whole range when unknown (no path, no support)."""
    if path is None or not hasattr(os, "SEEK_DATA"):
        return [(start, end)]
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return [(start, end)]
    spans: list[tuple[int, int]] = []
    try:
        pos = start
        while pos < end:
            try:
                lo = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole follows
                break
            if lo >= end:
                break
            hi = min(os.lseek(fd, lo, os.SEEK_HOLE), end)
            spans.append((lo, hi))
            pos = hi
    except OSError:
        return [(start, end)]
    finally:
        os.close(fd)
    return spans


def first_nonzero(buf: Buffer, start: int, end: int, path: str | None = None) -> int:
    """Index of the first non-zero byte in ``buf[start:end]``, or -1 if all zero
    (numpy over the mapping in 1 MiB probes, holes of ``path`` skipped: no copies)."""
    import numpy as np

    u8 = np.frombuffer(buf, np.uint8)
    for lo_span, hi_span in data_spans(path, start, end):
        lo = lo_span
        while lo < hi_span:
            hi = min(hi_span, lo + _ZERO_PROBE)
            chunk = u8[lo:hi]
            if chunk.any():
                return lo + int(np.argmax(chunk != 0))
            lo = hi
    return -1


def resync(
    buf: Buffer, base_offset: int, start: int, end: int, path: str | None = None
) -> int | None:
    """First position >= ``start`` (before ``end``) of the file in ``buf`` holding a
    valid record that names its own position in PHYSICALOFFSET, or None: the cursor's
    resync (:func:`mqstore.commitlog.cursor.resync`, CRC not checked) over one file
    whose first byte is log offset ``base_offset``; the holes of ``path`` are skipped."""
    with memoryview(buf) as view:
        segment = BufferSegment(view, base_offset, len(view), path)
        found = cursor.resync([segment], 0, start, end=base_offset + end, check_crc=False).at
    return None if found is None else found[1]


def scan_range(buf: Buffer, rng: ByteRange, now_ms: int, records: RecordColumns) -> Iterator[Row]:
    """Check every record in ``rng``; ``buf`` is the whole file. See the module doc.

    Records are appended to ``records``; findings and the range summary are yielded.
    """
    with memoryview(buf) as view:
        yield from _scan_range(buf, view, rng, now_ms, records)


def _scan_range(
    buf: Buffer, view: memoryview, rng: ByteRange, now_ms: int, records: RecordColumns
) -> Iterator[Row]:
    name, count, base = rng.name, 0, rng.base_offset
    file_end, pos, ts_max = len(buf), rng.start, now_ms + DAY_MS
    prev_ts: int | None = None
    first_ts: int | None = None
    times = StoreTimes()
    capped = _Capped(name)
    damage: int | None = None  # a Damage's position, until the item after it is known
    cursor = range_cursor(view, rng, check_crc=False)
    for item in cursor.column_runs(keys=records.keys, crc_verdicts=True):
        if damage is not None:  # the cursor resumed past it, at this item
            yield from capped.all(_damage(buf, view, rng, damage, item.offset - base))
            damage = None
        if isinstance(item, ColumnRun):
            arr = item.records
            yield from capped.all(_record_findings(view, rng, arr, ts_max, prev_ts, times))
            ts = arr.store_timestamp
            first_ts = int(ts[0]) if first_ts is None else first_ts
            prev_ts = int(ts[-1])
            count += len(arr)
            records.add(arr, base)
            pos = item.end - base
        elif isinstance(item, Blank):
            yield from _check_blank(buf, view, name, item.offset - base, rng.path)
            pos = file_end
        else:
            damage = pos = item.offset - base
            if _zeros_to_end(buf, view, rng, pos):
                yield from capped.all(_data_end(rng, pos, file_end))
                damage, pos = None, file_end
                break  # nothing to resync to: the search would read zeros
    if damage is not None:
        yield from capped.all(_damage(buf, view, rng, damage, None))
        pos = file_end
    yield from capped.summary()
    yield _range_row(rng, pos, first_ts, prev_ts, count, times.edges())


class _Capped:
    """Passes at most MAX_PER_KIND findings of each kind, then counts."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: dict[str, int] = {}

    def all(self, rows: Iterable[Row]) -> Iterator[Row]:
        for row in rows:
            kind = row.kind or ""
            n = self.counts[kind] = self.counts.get(kind, 0) + 1
            if n <= MAX_PER_KIND:
                yield row

    def summary(self) -> Iterator[Row]:
        for kind, n in sorted(self.counts.items()):
            if n > MAX_PER_KIND:
                more = n - MAX_PER_KIND
                yield _finding(self.name, 0, kind, f"{more} more {kind} findings not listed")


def _record_findings(
    view: memoryview,
    rng: ByteRange,
    arr: bulk.RecordArrays,
    ts_max: int,
    prev_ts: int | None,
    times: StoreTimes,
) -> list[Row]:
    """The findings of valid records (bad CRC, PHYSICALOFFSET, store timestamps, the
    header fields of :mod:`mqstore.tools.spark.headercheck`), with numpy: only the
    records that have one are visited."""
    import numpy as np

    name, base = rng.name, rng.base_offset
    pos, ts = arr.position, arr.store_timestamp
    out: list[Row] = []
    for p in pos[~arr.crc_ok].tolist():
        r = fmt.scan(view, p, len(view))
        out.append(_finding(name, p, "bad_crc", r.detail if isinstance(r, fmt.Corrupt) else ""))
    phys = pos + base
    for i in np.flatnonzero(arr.physical_offset != phys).tolist():
        out.append(
            _bad_physical_offset(name, int(pos[i]), int(arr.physical_offset[i]), int(phys[i]))
        )
    bad = (ts <= 0) | (ts > ts_max)
    prev = np.r_[ts[:1] if prev_ts is None else prev_ts, ts[:-1]]
    for i in np.flatnonzero(bad).tolist():
        out.append(_finding(name, int(pos[i]), "bad_timestamp", f"store timestamp {ts[i]}"))
    for i in np.flatnonzero(~bad & (ts < prev)).tolist():
        out.append(_timestamp_regression(name, int(pos[i]), int(ts[i]), int(prev[i])))
    for at, kind, detail in header_findings(view, arr, base, times):
        out.append(_finding(name, at, kind, detail))
    return out


def _bad_physical_offset(name: str, pos: int, field: int, phys: int) -> Row:
    """The finding for a record whose PHYSICALOFFSET ``field`` is not its position."""
    return _finding(
        name,
        pos,
        "bad_physical_offset",
        f"PHYSICALOFFSET field {field} != position {phys}",
    )


def _timestamp_regression(name: str, pos: int, ts: int, prev_ts: int) -> Row:
    """The finding for a store timestamp older than the previous record's."""
    return _finding(
        name,
        pos,
        "timestamp_regression",
        f"store timestamp {ts} < previous record's {prev_ts}",
    )


def _range_row(
    rng: ByteRange,
    pos: int,
    first_ts: int | None,
    last_ts: int | None,
    count: int,
    edges: tuple[Edge, ...] = (),
) -> Row:
    """The RANGE summary row of a range scanned from ``rng.start`` to ``pos``."""
    return Row(
        RowType.RANGE.value,
        rng.name,
        rng.start,
        pos - rng.start,
        first_ts=first_ts,
        last_ts=last_ts,
        count=count,
        edges=edges,
    )


def _check_blank(
    buf: Buffer, view: memoryview, name: str, pos: int, path: str | None
) -> Iterator[Row]:
    """Findings for the blank record at ``pos``: it must fill the rest of its file
    exactly, followed only by zeros."""
    file_end = len(view)
    r = fmt.scan(view, pos, file_end)
    assert isinstance(r, fmt.EndOfSegment)  # the cursor's Blank
    if r.size != file_end - pos:
        yield _finding(
            name,
            pos,
            "bad_blank",
            f"end-of-file record says {r.size} bytes left, the file has {file_end - pos}",
        )
    junk = first_nonzero(buf, pos + fmt.END_FILE_MIN_BLANK_LENGTH, file_end, path)
    if junk >= 0:
        yield _finding(
            name, junk, "bad_blank", f"non-zero byte after the end-of-file record at {pos}"
        )


def _zeros_to_end(buf: Buffer, view: memoryview, rng: ByteRange, pos: int) -> bool:
    """Whether the range's data ends at ``pos``: zeros from there to its end."""
    r = fmt.scan(view, pos, len(view))
    zeroed = isinstance(r, fmt.Corrupt) and r.kind is fmt.CorruptKind.ZEROED
    return zeroed and first_nonzero(buf, pos, rng.end, rng.path) < 0


def _data_end(rng: ByteRange, pos: int, file_end: int) -> Iterator[Row]:
    """Findings for data that ends at ``pos`` without a blank record: fine in the log's
    last data file (the rest is preallocated), ``missing_blank`` in any other."""
    if not rng.is_last_file:
        yield _finding(
            rng.name,
            pos,
            "missing_blank",
            f"data ends at {pos} of {file_end} bytes without an end-of-file record",
        )


def _damage(
    buf: Buffer, view: memoryview, rng: ByteRange, pos: int, nxt: int | None
) -> Iterator[Row]:
    """Findings for the bytes at ``pos`` the cursor found damaged; ``nxt``: where it
    resumed (the next valid record), None when no valid record follows in the range.

    Whether it is damage or the torn tail is the cursor's rule: nothing valid follows
    it before the log's end (:attr:`ByteRange.ends_log`)."""
    name = rng.name
    r = fmt.scan(view, pos, len(view), check_crc=False)
    if isinstance(r, fmt.Corrupt):
        kind, detail, size = r.kind.value, r.detail, r.size
    else:  # the codec's checks pass; the cursor refused its properties
        kind, detail, size = TORN_RECORD, cursor.TORN_PROPERTIES, r.size
    if nxt is None and rng.ends_log:
        yield _finding(name, pos, "torn_tail", f"incomplete last record ({kind}: {detail})")
        return
    if kind == _ZEROED:
        data = first_nonzero(buf, pos, rng.end, rng.path)
        where = f"resumes at {nxt}" if nxt is not None else "no valid record follows"
        yield _finding(name, pos, "zeroed_gap", f"zero bytes followed by data at {data}; {where}")
        return
    if nxt is not None and nxt == pos + size and kind in _TRUSTED_SIZE:
        yield _finding(name, pos, kind, detail)  # one record, skipped by its own size
        return
    where = (
        f"skipped {nxt - pos} bytes to the next record"
        if nxt is not None
        else "rest of file unreadable"
    )
    yield _finding(name, pos, kind, f"{detail}; {where}")
