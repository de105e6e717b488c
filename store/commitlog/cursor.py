"""The one walk over CommitLog records: :class:`LogCursor`.

A cursor reads the log's bytes ``[start, end)`` across segments and says what each
stretch is, as a tagged union:

* :class:`Record`: a valid record (the codec's checks, BODYCRC when asked, and its
  properties not ending in a zero byte: :data:`TORN_PROPERTIES`);
* :class:`Blank`: the blank record that ends a segment; the walk goes on at the next
  segment's first byte;
* :class:`Damage`: bytes that are not a valid record, with the reason.

Rules (one place for each):

1. **Stepping.** Records are chained by TOTALSIZE. The chain is followed by the bulk
   backend (:func:`mqstore.commitlog.bulk.scan_plain`: numpy over the mapping, up to
   ``chunk`` records a call), whose answers are, by its contract, the exact codec's
   record after record; the exact codec has the last word at the record the backend
   stops at. :meth:`LogCursor.runs` hands out the backend's columns as :class:`Run`
   items (recovery's dispatch reads them as they are); iterating the cursor gives one
   :class:`Record` per record instead.
2. **Resync.** Past damage, the walk goes on at the first later record that is valid
   *and* whose PHYSICALOFFSET field names its own log position (:func:`resync`), in its
   segment or a later one, before ``end``. The resync is lazy: it runs when the item
   after a :class:`Damage` is asked for, so a reader that stops at the first damage
   (recovery under ``TRUNCATE``) searches nothing.
3. **Torn tail.** When no such record follows, the iteration ends after the
   :class:`Damage`: the bad bytes run to the end of the log, a torn tail (truncation,
   as in LevelDB's log reader), never followed by anything. Whether bad bytes that *are*
   followed by a valid record were damage or a torn tail whose later pages survived is
   recovery's judgement (:func:`mqstore.commitlog.recovery.is_damage`): it knows what
   the last shutdown synced.

Two shapes of the one rule: iterating a cursor (or :meth:`LogCursor.runs`) walks a
range once, at numpy speed; :func:`step` is the same judgement at one position, a plain
function for the reput thread, which resumes many times a second at the dispatched offset
and stops at the committed end (``end``, so a tail merely not written yet is never read,
let alone judged torn). Both give a :class:`Blank` and :class:`Damage` from the same
helpers (:func:`refusal`, :func:`resync`) and go on where they say.

Worked example: segments of 8192 bytes, the first holding 47 records of 172 bytes and a
blank at 8084, the second two records of which the first has a flipped body byte.
``LogCursor(segments, 0, 8536, check_crc=True)`` gives 47 ``Record`` items, ``Blank(8084,
108)``, ``Damage(8192, "bad_crc at 8192: ...")`` and a ``Record`` at 8364; with
``check_crc=False`` it gives 49 records and the blank; without the ``end`` it also gives
``Damage(8536, "zeroed at 8536: ...")``, the zeros that end the log.

The cursor holds no lock and copies nothing: items reference the segments' mappings,
valid until a segment is unmapped, and the caller keeps ``[start, end)`` from being
truncated or deleted under it.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import numpy as np

from mqstore.commitlog import _layout as L
from mqstore.commitlog import bulk
from mqstore.commitlog._decode import info_to_record, scan
from mqstore.commitlog._layout import _INT, MAGIC_V1
from mqstore.commitlog._record import MessageRecord
from mqstore.commitlog._results import Corrupt, EndOfSegment, RecordInfo, ScanResult
from mqstore.commitlog._trusted import _TRUSTED, _TRUSTED_BODY_POS, _TRUSTED_SLOW_FLAGS
from mqstore.commitlog.recovery_extents import data_runs
from mqstore.commitlog.walk import DispatchFields

CHUNK_RECORDS: Final = 8192
"""Records per bulk call. A chunk this size (some 10 MB of 1 KiB records) is still in
the CPU cache when its records are handed over, so a reader's reads of their text are
cheap; much larger chunks are not, much smaller ones pay numpy's per-call cost."""
TORN_PROPERTIES: Final = "properties end in a zero byte"
"""Why a record that passes the codec's checks is still not valid.

BODYCRC covers only the body. A power loss that tears a record inside its
properties leaves the never-written sectors as zeros (segments are preallocated),
and such a record decodes with a valid CRC but NULs at the end of its properties.
The store never writes one (properties always hold UNIQ_KEY and end in ``\\x02``)
and a RocketMQ broker's properties end in ``\\x02`` or a value character, so a
non-empty properties string ending in ``\\x00`` is taken as torn.
"""
_RECORD_MAGIC: Final = re.compile(rb"\xda\xa3\x20[\xa7\xab]")
"""MAGICCODE of a V1 or V2 record (the four bytes after TOTALSIZE)."""
_OFFSET: Final = struct.Struct(">q")
assert {L.MAGIC_V1 & 0xFFFFFFFF, L.MAGIC_V2 & 0xFFFFFFFF} == {0xDAA320A7, 0xDAA320AB}


class _Scanned(Protocol):
    """A bulk scan's answer, as :meth:`LogCursor._walk` reads it (:class:`bulk.PlainScan`,
    :class:`bulk.BulkScan`)."""

    @property
    def records(self) -> Any: ...
    @property
    def end(self) -> int: ...
    @property
    def stop(self) -> EndOfSegment | Corrupt | None: ...


class Segment(Protocol):
    """What the cursor reads of one segment (a ``MappedFile``, or
    :class:`BufferSegment`)."""

    @property
    def file_from_offset(self) -> int:
        """The log offset of the segment's first byte."""

    @property
    def file_size(self) -> int:
        """The segment's length in bytes."""

    @property
    def view(self) -> memoryview:
        """The segment's bytes, ``file_size`` of them."""

    @property
    def path(self) -> os.PathLike[str] | str | None:
        """The file (to skip its holes when resyncing), or None."""


@dataclass(frozen=True, slots=True)
class BufferSegment:
    """A segment given as a buffer: an mmap of one file in a Spark task, bytes in a
    test. ``path`` (optional) lets the resync skip the file's holes."""

    view: memoryview
    file_from_offset: int
    file_size: int
    path: os.PathLike[str] | str | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """A valid record at log ``offset``. ``info``'s positions are in ``view``, the
    segment's bytes (valid until the segment is unmapped)."""

    offset: int
    info: RecordInfo
    view: memoryview

    def message(self) -> MessageRecord:
        """The whole record, body copied out of the segment."""
        return info_to_record(self.info, self.view)


@dataclass(frozen=True, slots=True)
class Blank:
    """The blank record at log ``offset``; ``size`` bytes to its segment's end."""

    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class Damage:
    """Bytes at log ``offset`` that are not a valid record; ``why`` says what is wrong
    there (the codec's verdict, a bad CRC, :data:`TORN_PROPERTIES`, a PHYSICALOFFSET
    that is not the record's position). The damage runs to the next item's offset, or,
    when the iteration ends after it, to the end of the log (a torn tail).

    ``record``: what the bytes decode as when the codec accepts them and the cursor
    does not (torn properties, a PHYSICALOFFSET not its own), for a checker that reports
    such records (``mqstore.tools.logcheck``); None when the codec refused them. Its
    positions are in the segment's bytes; equality ignores it."""

    offset: int
    why: str
    record: RecordInfo | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Run:
    """The first ``count`` records of ``records`` (a bulk scan of ``view``, the segment
    at log offset ``base``): consecutive valid records, in log order."""

    view: memoryview
    base: int
    records: bulk.PlainRecords
    count: int

    @property
    def offset(self) -> int:
        """The log offset of the run's first record."""
        return self.base + int(self.records.position[0])

    @property
    def end(self) -> int:
        """The log offset just past the run's last record."""
        k = self.count - 1
        return self.base + int(self.records.position[k] + self.records.size[k])


@dataclass(frozen=True, slots=True)
class ColumnRun:
    """A :class:`Run` whose records carry every column :func:`bulk.scan` gives (topic
    ids, TAGS codes, index keys as asked, each record's BODYCRC verdict): ``records``
    holds exactly the run's records (:meth:`LogCursor.column_runs`)."""

    view: memoryview
    base: int
    records: bulk.RecordArrays

    @property
    def offset(self) -> int:
        """The log offset of the run's first record."""
        return self.base + int(self.records.position[0])

    @property
    def end(self) -> int:
        """The log offset just past the run's last record."""
        return self.base + int(self.records.position[-1] + self.records.size[-1])


Item = Record | Blank | Damage
"""What iterating a :class:`LogCursor` gives."""
RunItem = Run | Blank | Damage
"""What :meth:`LogCursor.runs` gives."""
ColumnRunItem = ColumnRun | Blank | Damage
"""What :meth:`LogCursor.column_runs` gives."""


class LogCursor:
    """The records of the log's ``[start, end)`` (see the module doc for the rules).

    ``segments``: the log's segments in order, contiguous (``Segments.files``).
    ``start`` must be a record boundary (or a segment's start); ``end`` defaults to
    the end of the last segment. ``check_crc`` checks each body's BODYCRC; with
    ``own_position`` a record whose PHYSICALOFFSET field is not its own position is
    damage too. ``searched`` counts the bytes the resyncs searched.
    Not thread-safe; a cursor walks once.
    """

    def __init__(
        self,
        segments: Sequence[Segment],
        start: int,
        end: int | None = None,
        *,
        check_crc: bool = False,
        own_position: bool = False,
        chunk: int = CHUNK_RECORDS,
    ) -> None:
        self.segments = segments
        self.start = start
        last = segments[-1] if segments else None
        self.end = (
            (last.file_from_offset + last.file_size if last is not None else 0)
            if (end is None)
            else end
        )
        self.check_crc = check_crc
        self.own_position = own_position
        self.chunk = chunk
        self.searched = 0

    def __iter__(self) -> Iterator[Item]:
        """One :class:`Record` per valid record, :class:`Blank` and :class:`Damage`."""
        for item in self.runs():
            if not isinstance(item, Run):
                yield item
                continue
            view, base, limit = item.view, item.base, len(item.view)
            for at in item.records.position[: item.count].tolist():
                r = scan(view, at, limit, check_crc=False)
                assert type(r) is RecordInfo  # the backend's contract
                yield Record(base + at, r, view)

    def runs(self) -> Iterator[RunItem]:
        """The bulk backend: valid records as :class:`Run` items (a segment's records
        from one bulk call, up to the first that is not valid), blanks and damage."""
        check_crc = self.check_crc

        def plain(view: memoryview, pos: int, limit: int) -> bulk.PlainScan:
            return bulk.scan_plain(view, pos, limit, limit, check_crc=check_crc,
                                   max_records=self.chunk)  # fmt: skip

        for item in self._walk(plain):
            if isinstance(item, tuple):
                view, base, recs, k = item
                yield Run(view, base, recs, k)
            else:
                yield item

    def column_runs(
        self, *, keys: bool = False, tags: bool = True, crc_verdicts: bool = False
    ) -> Iterator[ColumnRunItem]:
        """:meth:`runs` for a reader that needs the text columns too (the Spark jobs):
        the same items by the same rules, each run's records with every column of
        :func:`bulk.scan` (``keys``, ``tags`` as there), found in one pass instead of
        validated twice. ``crc_verdicts`` fills ``crc_ok`` without making a bad CRC
        damage (a cursor without ``check_crc``: the audit reports such records itself).
        """
        check = self.check_crc or crc_verdicts

        def full(view: memoryview, pos: int, limit: int) -> bulk.BulkScan:
            return bulk.scan(view, pos, limit, limit, check_crc=check, keys=keys, tags=tags,
                             max_records=self.chunk)  # fmt: skip

        for item in self._walk(full):
            if isinstance(item, tuple):
                view, base, recs, k = item
                yield ColumnRun(view, base, recs if k == len(recs) else recs.head(k))
            else:
                yield item

    def _walk(
        self, scan_at: Callable[[memoryview, int, int], _Scanned]
    ) -> Iterator[tuple[memoryview, int, Any, int] | Blank | Damage]:
        """The walk both backends share: (view, base, records, count) for a run of
        valid records, blanks and damage, in log order."""
        files, end, own = self.segments, self.end, self.own_position
        i = _segment_index(files, self.start)
        if i is None:
            return
        pos = max(0, self.start - files[i].file_from_offset)
        while i < len(files):
            mf = files[i]
            view, size, base = mf.view, mf.file_size, mf.file_from_offset
            limit = min(size, end - base)
            if limit <= pos:
                return
            found = scan_at(view, pos, limit)
            recs = found.records
            n = len(recs)
            unfit = recs.torn | ~recs.crc_ok if self.check_crc else recs.torn.copy()
            if own:
                unfit |= recs.physical_offset != base + recs.position
            k = int(np.argmax(unfit)) if n and unfit.any() else n
            if k:
                yield view, base, recs, k
                pos = int(recs.position[k - 1] + recs.size[k - 1])
            if k == n:
                pos = found.end
                if found.stop is None:
                    if pos < limit:
                        continue  # the record limit of one call: go on
                    if base + limit >= end:
                        return
                    i, pos = i + 1, 0  # a segment full to its last byte: no blank fits
                    continue
                elif isinstance(found.stop, EndOfSegment):
                    yield Blank(base + pos, size - pos)
                    i, pos = i + 1, 0
                    if base + size >= end:
                        return
                    continue
            yield damage_at(mf, pos, limit, check_crc=self.check_crc, own_position=own)
            after = self._resync(i, pos + 1)
            if after is None:
                return
            i, pos = after

    def _resync(self, i: int, pos: int) -> tuple[int, int] | None:
        found = resync(self.segments, i, pos, end=self.end, check_crc=self.check_crc)
        self.searched += found.searched
        return None if found.at is None else found.at[:2]


@dataclass(frozen=True, slots=True)
class Resync:
    """Where :func:`resync` found a record: ``at`` = (segment index, position in it, the
    record), None when none follows; ``searched``: bytes searched."""

    at: tuple[int, int, RecordInfo] | None
    searched: int


def resync(
    segments: Sequence[Segment],
    i: int,
    pos: int,
    *,
    end: int | None = None,
    check_crc: bool = True,
) -> Resync:
    """The first record at or after ``pos`` of segment ``i`` (then in later segments,
    before log offset ``end``) that is valid (the codec's checks, BODYCRC when
    ``check_crc``, properties not torn) and whose PHYSICALOFFSET names its own position.

    Candidates are found by their MAGICCODE (a regex over the mapping), run by run of
    bytes that may hold data (:func:`~mqstore.commitlog.recovery_extents.data_runs`):
    holes and unwritten extents (the reservation past the last record) read as zeros
    and are never searched, so past the end of the log nothing is read.
    """
    magic_at, phys_at = L.MAGIC_POS, L.PHYSICAL_OFFSET_POS
    searched = 0
    while i < len(segments):
        mf = segments[i]
        view, size, base = mf.view, mf.file_size, mf.file_from_offset
        limit = size if end is None else min(size, end - base)
        if limit <= 0:
            break
        runs = [(max(pos, 0), limit)] if mf.path is None else data_runs(mf.path, max(pos, 0), limit)
        for a, b in runs:
            at = max(a, pos + magic_at)
            while at < b:
                m = _RECORD_MAGIC.search(view, at, b)
                if m is None:
                    searched += b - at
                    break
                searched += m.start() + 1 - at
                c = m.start() - magic_at
                at = m.start() + 1
                if c + phys_at + 8 > limit or _own_position(view, c) != base + c:
                    continue
                r = scan(view, c, limit, check_crc=check_crc)
                if isinstance(r, RecordInfo) and not r.properties_string.endswith("\x00"):
                    return Resync((i, c, r), searched)
        i += 1
        pos = 0
    return Resync(None, searched)


def step(
    view: memoryview, pos: int, end: int, segment: Segment
) -> tuple[DispatchFields | Blank | Damage, int]:
    """The cursor's judgement of what starts at ``view[pos]``, and where the walk goes
    on: :class:`LogCursor`'s rules with ``check_crc`` and ``own_position`` off (the
    writer computed the CRC and the position), as one call per record.

    ``view`` is ``segment.view``, ``pos < end <= segment.file_size``; nothing at or past
    ``end`` is read. A valid record gives its :data:`~mqstore.commitlog.walk.DispatchFields`
    and its end; the blank record a :class:`Blank` and ``file_size`` (the segment is
    done); damage a :class:`Damage` and the position of the first later record the
    resync finds before ``end``, else ``end``: what follows the damage up to the
    committed end is part of it, and whatever is written after ``end`` later is read
    from there. Never raises for bad bytes; ValueError only for a released view.

    The common record (V1 magic, IPv4 hosts) is read by one header unpack that re-checks
    only what is free (lengths adding up to TOTALSIZE inside ``end``, properties not
    ending in a zero byte) and declines everything else to the exact codec, which has
    the final word: this is the reput thread's per-record cost, so it is a plain
    function, not a generator resumed per record.
    """
    total = _INT.unpack_from(view, pos)[0] if pos + 4 <= end else 0
    if 0 < total <= end - pos:
        rec = bytes(view[pos : pos + total])  # one copy: indexing bytes beats a view
        try:
            (_total, magic, _crc, qid, _flag, qoff, phys, sys_flag, _born_ts, _born, store_ts,
             _store, _reconsume, _prepared, body_len) = _TRUSTED.unpack_from(rec)  # fmt: skip
            if magic == MAGIC_V1 and not sys_flag & _TRUSTED_SLOW_FLAGS and body_len >= 0:
                p = _TRUSTED_BODY_POS + body_len  # the topic's length byte
                t_len = rec[p]
                t_end = p + 1 + t_len
                p_hi = rec[t_end]  # signed lengths: a set top bit is negative, i.e. corrupt
                p_len = p_hi << 8 | rec[t_end + 1]
                if (
                    t_len <= 127 >= p_hi
                    and t_end + 2 + p_len == total
                    and (
                        rec[-1] or not p_len  # not torn: TORN_PROPERTIES
                    )
                ):
                    topic = rec[p + 1 : t_end].decode()
                    props = rec[t_end + 2 :].decode()
                    return (topic, qid, qoff, phys, total, sys_flag, store_ts, props), pos + total
        except (struct.error, IndexError, UnicodeDecodeError):
            pass  # not vouched for: the codec judges
    r = scan(view, pos, end, check_crc=False)
    if type(r) is RecordInfo and not r.properties_string.endswith("\x00"):
        fields = (r.topic, r.queue_id, r.queue_offset, r.physical_offset, r.size, r.sys_flag,
                  r.store_timestamp, r.properties_string)  # fmt: skip
        return fields, pos + r.size
    base, size = segment.file_from_offset, segment.file_size
    if isinstance(r, EndOfSegment):
        return Blank(base + pos, size - pos), size
    found = resync((segment,), 0, pos + 1, end=base + end, check_crc=False)
    damage = Damage(base + pos, refusal(r, base + pos), r if type(r) is RecordInfo else None)
    return damage, end if found.at is None else found.at[1]


def damage_at(
    segment: Segment, pos: int, limit: int, *, check_crc: bool, own_position: bool
) -> Damage:
    """The :class:`Damage` at ``pos`` of ``segment`` (bytes up to ``limit`` read), where
    the bulk backend stopped at something that is neither a valid record nor a blank."""
    base = segment.file_from_offset
    r = scan(segment.view, pos, limit, check_crc=check_crc)
    why = refusal(r, base + pos, own_position)
    return Damage(base + pos, why, r if type(r) is RecordInfo else None)


def _own_position(view: memoryview, c: int) -> int:
    """The PHYSICALOFFSET field of a record at ``c`` (no slice: nothing is exported
    from ``view``, which its owner may release)."""
    return int(_OFFSET.unpack_from(view, c + L.PHYSICAL_OFFSET_POS)[0])


def refusal(r: ScanResult, offset: int, own_position: bool = False) -> str:
    """Why the bytes at log ``offset`` are not a valid record (``r``: the exact codec's
    result there): the codec's verdict, else :data:`TORN_PROPERTIES`, else (with
    ``own_position``) a PHYSICALOFFSET that is not the record's position.

    Raises:
        AssertionError: ``r`` is a valid record or a blank (a caller's bug).
    """
    if isinstance(r, Corrupt):
        return f"{r.kind.value} at {offset}: {r.detail}"
    if not isinstance(r, RecordInfo):
        raise AssertionError(f"a blank record at {offset} is not damage")
    if r.properties_string.endswith("\x00"):
        return f"torn record at {offset}: {TORN_PROPERTIES}"
    if own_position and r.physical_offset != offset:
        return f"record at {offset} says PHYSICALOFFSET {r.physical_offset}"
    raise AssertionError(f"a valid record at {offset} is not damage")


def _segment_index(segments: Sequence[Segment], offset: int) -> int | None:
    """The index of the segment holding log ``offset`` (or the first one after it)."""
    for i, mf in enumerate(segments):
        if offset < mf.file_from_offset + mf.file_size:
            return i
    return None


__all__ = [
    "CHUNK_RECORDS", "TORN_PROPERTIES", "Blank", "BufferSegment", "ColumnRun", "ColumnRunItem",
    "Damage", "Item", "LogCursor", "Record", "Resync", "Run", "RunItem", "Segment", "damage_at",
    "refusal", "resync", "step",
]  # fmt: skip
