"""Checking one byte range of one CommitLog segment: the per-task work of the audit.

Pure Python over a buffer (an mmap in a Spark task, bytes in a unit test); every record
is validated by :func:`mqstore.commitlog.format.scan`, so nothing here knows the layout
beyond the named positions that module exports.

A range starts at a record boundary (see :mod:`mqstore.tools.spark.reader`) and yields rows:

* ``Row.record`` for every record whose fields can be read (a bad body CRC still yields
  the record, flagged ``crc_ok=False``, so queue continuity and ConsumeQueue checks see
  it and report the damage once, as ``bad_crc``);
* ``Row.finding`` for each problem, with the byte position *in the file*;
* one ``Row.range`` summary (records, bytes, first and last store timestamp) so the
  driver can check timestamps across ranges of a file.

Rules, in the spirit of LevelDB's log reader:

* a blank record must fill the rest of its file exactly, followed only by zeros;
* a segment other than the last must end with a blank record (``missing_blank``);
* zeros followed by data are a ``zeroed_gap``; after any damage whose length is not
  trustworthy the scan resynchronises at the next position that decodes as a record
  whose PHYSICALOFFSET field equals its own position;
* in the last segment, a record that cannot be decoded and after which nothing valid
  follows, whose written bytes stop before its claimed end, is a ``torn_tail``:
  truncation, reported once, not corruption.
"""

from __future__ import annotations

import enum
import mmap
import os
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from mqstore.commitlog import bulk, cursor
from mqstore.commitlog import format as fmt
from mqstore.commitlog.cursor import BufferSegment
from mqstore.tools.spark.headercheck import Edge, StoreTimes, header_findings

if TYPE_CHECKING:
    from numpy.typing import NDArray

Buffer = bytes | mmap.mmap
"""What the scan reads: bytes in tests, a read-only mmap of the whole file in tasks."""

DAY_MS: Final = 86_400_000
_ZERO_PROBE: Final = 1 << 20
_BAD_CRC: Final = fmt.CorruptKind.BAD_CRC


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


@dataclass(frozen=True, slots=True)
class ByteRange:
    """``[start, end)`` of segment ``name`` (positions in the file) to check in one task."""

    path: str
    name: str
    base_offset: int
    start: int
    end: int
    is_last_file: bool


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


def last_nonzero(buf: Buffer, start: int, end: int, path: str | None = None) -> int:
    """Index of the last non-zero byte in ``buf[start:end]``, or -1 if all zero
    (numpy over the mapping in 1 MiB probes, holes of ``path`` skipped: no copies)."""
    import numpy as np

    u8 = np.frombuffer(buf, np.uint8)
    for lo_span, hi_span in reversed(data_spans(path, start, end)):
        hi = hi_span
        while hi > lo_span:
            lo = max(lo_span, hi - _ZERO_PROBE)
            chunk = u8[lo:hi]
            if chunk.any():
                return lo + int(np.flatnonzero(chunk)[-1])
            hi = lo
    return -1


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


def _is_torn(
    buf: Buffer, pos: int, bad: fmt.Corrupt, file_end: int, path: str | None = None
) -> bool:
    """Written bytes stop inside the record at ``pos`` and nothing follows it."""
    if bad.kind is fmt.CorruptKind.TRUNCATED:
        return True
    last = last_nonzero(buf, pos, file_end, path)
    if last < pos + 8:
        return True
    return bad.size >= fmt.MIN_RECORD_SIZE and last < pos + bad.size - 3


def scan_range(buf: Buffer, rng: ByteRange, now_ms: int, records: RecordColumns) -> Iterator[Row]:
    """Check every record in ``rng``; ``buf`` is the whole file. See the module doc.

    Records are appended to ``records``; findings and the range summary are yielded.
    """
    with memoryview(buf) as view:  # fmt.scan is fastest on a view; find() needs buf
        yield from _scan_range(buf, view, rng, now_ms, records)


def _scan_range(
    buf: Buffer, view: memoryview, rng: ByteRange, now_ms: int, records: RecordColumns
) -> Iterator[Row]:
    name, count = rng.name, 0
    file_end, pos, ts_max = len(buf), rng.start, now_ms + DAY_MS
    prev_ts: int | None = None
    first_ts: int | None = None
    times = StoreTimes()
    capped = _Capped(name)
    while pos < rng.end:
        b = bulk.scan(view, pos, rng.end, file_end, keys=records.keys)
        arr = b.records
        if len(arr):
            yield from capped.all(_record_findings(view, rng, arr, ts_max, prev_ts, times))
            ts = arr.store_timestamp
            first_ts = int(ts[0]) if first_ts is None else first_ts
            prev_ts = int(ts[-1])
            count += len(arr)
            records.add(arr, rng.base_offset)
        pos = b.end
        if b.stop is None:
            continue
        r = fmt.scan(view, pos, file_end)  # with the CRC: a bad one is reported first
        if isinstance(r, fmt.Corrupt) and r.kind is _BAD_CRC:
            yield from capped.all([_finding(name, pos, "bad_crc", r.detail)])
            r = fmt.scan(view, pos, file_end, check_crc=False)
        nxt = yield from _not_a_record(buf, rng, pos, r, file_end)
        if nxt < 0:
            pos = file_end
            break
        pos = nxt
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


def _not_a_record(
    buf: Buffer, rng: ByteRange, pos: int, r: fmt.ScanResult, file_end: int
) -> Generator[Row, None, int]:
    """Findings for a blank or undecodable record at ``pos``; returns the next position
    to scan, or -1 when the range's scan ends (a blank always ends it)."""
    if isinstance(r, fmt.EndOfSegment):
        yield from _check_blank(buf, rng.name, pos, r.size, file_end, rng.path)
        return -1
    assert isinstance(r, fmt.Corrupt)
    return (yield from _damage(buf, rng, pos, r, file_end))


def _check_blank(
    buf: Buffer, name: str, pos: int, size: int, file_end: int, path: str | None = None
) -> Iterator[Row]:
    if pos + size != file_end:
        yield _finding(
            name,
            pos,
            "bad_blank",
            f"end-of-file record says {size} bytes left, the file has {file_end - pos}",
        )
    junk = first_nonzero(buf, pos + fmt.END_FILE_MIN_BLANK_LENGTH, file_end, path)
    if junk >= 0:
        yield _finding(
            name, junk, "bad_blank", f"non-zero byte after the end-of-file record at {pos}"
        )


def _damage(
    buf: Buffer, rng: ByteRange, pos: int, bad: fmt.Corrupt, file_end: int
) -> Generator[Row, None, int]:
    """Findings for undecodable bytes at ``pos``; returns where to continue, or -1."""
    name = rng.name
    if bad.kind is fmt.CorruptKind.ZEROED:
        data = first_nonzero(buf, pos, file_end, rng.path)
        if data < 0:
            if not rng.is_last_file:
                yield _finding(
                    name,
                    pos,
                    "missing_blank",
                    f"data ends at {pos} of {file_end} bytes without an end-of-file record",
                )
            return -1
        nxt = resync(buf, rng.base_offset, pos + 1, file_end, rng.path)
        where = f"resumes at {nxt}" if nxt is not None else "no valid record follows"
        yield _finding(name, pos, "zeroed_gap", f"zero bytes followed by data at {data}; {where}")
        return -1 if nxt is None else nxt
    if bad.kind is fmt.CorruptKind.BAD_TEXT and pos + bad.size <= file_end:
        yield _finding(name, pos, bad.kind.value, bad.detail)
        return pos + bad.size
    nxt = resync(buf, rng.base_offset, pos + 1, file_end, rng.path)
    if nxt is None and rng.is_last_file and _is_torn(buf, pos, bad, file_end, rng.path):
        yield _finding(
            name, pos, "torn_tail", f"incomplete last record ({bad.kind.value}: {bad.detail})"
        )
        return -1
    where = (
        f"skipped {nxt - pos} bytes to the next record"
        if nxt is not None
        else "rest of file unreadable"
    )
    yield _finding(name, pos, bad.kind.value, f"{bad.detail}; {where}")
    return -1 if nxt is None else nxt
