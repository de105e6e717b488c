"""CommitLog recovery: find where valid data ends and cut the torn tail.

Normal recovery (the ``abort`` file is absent: the last shutdown was clean) scans
from the third-to-last segment, as RocketMQ 4.9/5.0-5.3.1 do: anything older was
flushed long ago. Abnormal recovery (``abort`` present) walks back from the newest
segment to the first whose first message is no newer than the checkpoint's
``min_timestamp`` (data before it was flushed and its consume queues written), and
scans from there, reporting *every* valid record to ``on_record`` so the caller can
re-dispatch.

The scan is a :class:`~mqstore.commitlog.cursor.LogCursor` walk: it checks each record
fully (magic, lengths, body CRC when enabled, and properties not ending in a zero byte:
see :data:`~mqstore.commitlog.cursor.TORN_PROPERTIES`). At the first record that is not
valid, what happens depends on the policy
(:class:`~mqstore.config.RecoveryPolicy`):

* ``TRUNCATE`` (RocketMQ): everything from there on is the torn tail, truncated
  (zeroed to the end of its segment, later segments deleted, synced before anything
  is appended). A range an earlier ``KEEP`` open fenced counts as such a record,
  however old: the scan starts early enough to reach it.
* ``KEEP`` (the default): the scan looks for the next record that checks out (BODYCRC
  included) *and* whose PHYSICALOFFSET field is its own position. If there is one and
  the bytes in between are damage rather than a torn tail (:func:`is_damage`), they
  are fenced off as a :class:`DamagedRange` and the scan goes on from that record;
  otherwise the log is cut there as with ``TRUNCATE``.

Damage versus torn tail: a power loss only loses bytes that no completed sync
covered, and what it leaves instead is what the disk held before, zeros (segments
are created zeroed and every cut is zeroed and synced before the log grows again).
So a bad region is damage when the record after it is older than the checkpoint's
flushed timestamp (it, and so every byte before it, had been synced), or when no
512-byte sector's part inside the region is all zeros (a lost sector's part there
would be: :data:`MIN_LOST_RUN`) and the region does not start with a zero TOTALSIZE
and MAGICCODE (a record never written: a killed process's last copy, whose first
bytes a ``memcpy`` may store last).
Anything else may be a torn tail whose later pages survived, and keeping what follows
it would serve records whose predecessors were lost: the log is cut.

What recovery does not see: after a clean shutdown only the last three segments are
scanned, so damage older than that (a flipped bit in a segment flushed long ago) is
neither found nor fenced at open, and a pull serves the record as it is read, corrupt
body included, unless ``check_crc_on_read`` is set (RocketMQ behaves the same;
``mqstore audit`` reads every segment). A range fenced once stays fenced
(``damage.json``), whichever later open no longer scans it.

Worked example: segments of 8192 bytes holding 47 records of 172 bytes and a blank
at 8084 recover to 8084; the next append writes the blank again and rolls to the
segment at 8192.
"""

from __future__ import annotations

import enum
import logging
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol, cast

from mqstore import _platform
from mqstore.checkpoint import Checkpoint
from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt
from mqstore.commitlog.cursor import (
    CHUNK_RECORDS,
    Blank,
    Damage,
    LogCursor,
    Record,
    Run,
    resync,
)
from mqstore.commitlog.mapped_file import MappedFile
from mqstore.commitlog.recovery_damage import DamagedRange, Quarantine
from mqstore.commitlog.recovery_extents import data_runs
from mqstore.commitlog.segments import Segments
from mqstore.commitlog.walk import FieldDispatch
from mqstore.config import RecoveryPolicy

log = logging.getLogger(__name__)

SECTOR = 512
"""The unit a disk writes atomically: a lost write leaves whole sectors of old bytes."""
_ZERO_SECTOR = bytes(SECTOR)
_ZERO_CHUNK = bytes(1 << 20)
MIN_LOST_RUN = 4
"""A lost sector shows, inside the bad range, as zeros from the range's start or up to
its end, or across the whole sector. Shorter runs than this cannot be told from a
record's own zeros, and cannot hide a loss either: they would be inside a record's
TOTALSIZE, whose high bytes are zero anyway."""
_BLANK_MAGIC = re.compile(rb"\xcb\xd4\x31\x94")
"""MAGICCODE of the blank record that ends a segment."""
_SIZE = struct.Struct(">i")
LOST_LOOKAHEAD = 4096
"""Records read after a damaged range to find each queue's next offset (lost counts)."""

SCAN_RECORDS = CHUNK_RECORDS
"""Records per bulk call of the scan's cursor (:data:`~mqstore.commitlog.cursor.CHUNK_RECORDS`)."""

OnRecord = Callable[[fmt.RecordInfo, int], None]
"""Called with (record info, size) for each valid record scanned (no body copy)."""


class RecoveryMode(enum.Enum):
    """Which recovery ran."""

    NORMAL = "normal"
    """The last shutdown was clean: the scan starts three segments from the end."""
    ABNORMAL = "abnormal"
    """No clean shutdown: the scan starts at the newest segment whose first record is
    valid and not newer than the checkpoint."""
    EMPTY = "empty"
    """No segments: nothing to scan."""
    TRUSTED = "trusted"
    """The last shutdown was clean and its record (``mqstore.commitlog.clean_close``)
    matched the files: nothing was scanned, the log ends where the close left it."""


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """What recovery found and did. ``damaged``: ranges fenced off (``KEEP`` policy)."""

    mode: RecoveryMode
    start_offset: int
    end_offset: int
    truncated_bytes: int
    records: int
    scanned_bytes: int
    searched_bytes: int
    """Bytes searched for a record after bad bytes (the cursor's
    :func:`~mqstore.commitlog.cursor.resync`), besides the scan."""
    stop_reason: str
    seconds: float
    damaged: tuple[DamagedRange, ...] = ()


@dataclass(slots=True)
class SearchCounter:
    """Bytes :func:`~mqstore.commitlog.cursor.resync` searched, summed over the calls
    it is passed to."""

    bytes: int = 0


@dataclass(frozen=True, slots=True)
class KeepRule:
    """What :func:`is_damage` needs: the checkpoint's flushed store timestamp and
    whether the last shutdown was clean (then records stored at that very
    millisecond were flushed too)."""

    flushed_timestamp: int
    clean_shutdown: bool

    def durable(self, store_timestamp: int) -> bool:
        """A record stored at ``store_timestamp`` was synced before the last shutdown."""
        t = self.flushed_timestamp
        return store_timestamp < t or (self.clean_shutdown and store_timestamp == t)


def _first_record_ok(segments: Segments, index: int, checkpoint: Checkpoint) -> bool:
    mf = segments.files[index]
    r = fmt.scan(mf.view, 0, mf.file_size, check_crc=False)
    if not isinstance(r, fmt.RecordInfo):
        return False
    ts = r.store_timestamp
    return ts != 0 and ts <= checkpoint.min_timestamp


def abnormal_start_index(segments: Segments, checkpoint: Checkpoint) -> int:
    """Newest segment whose first record is valid and not newer than the checkpoint."""
    for i in range(len(segments.files) - 1, -1, -1):
        if _first_record_ok(segments, i, checkpoint):
            return i
    return 0


class FieldSink(Protocol):
    """A record callback that also takes a record's dispatch fields (the
    ``Dispatcher``): recovery gives it those, as the reput thread does, instead of
    building a :class:`~mqstore.commitlog.format.RecordInfo` per record."""

    def __call__(self, info: fmt.RecordInfo, size: int = 0, /) -> None: ...

    @property
    def dispatch_one(self) -> FieldDispatch:
        """Takes one record's dispatch fields."""


class RunSink(Protocol):
    """A record callback that also dispatches a run of records from a segment's bytes,
    as the reput thread reads them (a batch of records at once, not one call each):
    ``dispatch_run(view, start, end)`` is given ``view[start:end]`` of a segment's
    mapping, which holds whole records recovery accepted, in log order, and nothing
    else (no damage, torn record or blank record)."""

    def __call__(self, info: fmt.RecordInfo, size: int = 0, /) -> None: ...

    def dispatch_run(self, view: memoryview, start: int, end: int) -> None: ...


class PlainSink(Protocol):
    """A record callback that also takes the records of a bulk scan as they are
    (:class:`~mqstore.commitlog.bulk.PlainRecords`, the fields and text spans recovery
    already read): ``dispatch_plain(view, records, k)`` is given the first ``k`` of
    them, whole records of ``view`` (a segment's mapping) recovery accepted, in log
    order."""

    def __call__(self, info: fmt.RecordInfo, size: int = 0, /) -> None: ...

    def dispatch_plain(self, view: memoryview, records: bulk.PlainRecords, k: int) -> None: ...


def scan(
    segments: Segments,
    start_index: int,
    *,
    check_crc: bool,
    on_record: OnRecord | None = None,
    keep: KeepRule | None = None,
    damaged: list[DamagedRange] | None = None,
    searched: SearchCounter | None = None,
) -> tuple[int, int, int, str]:
    """Scan from the start of segment ``start_index``; return (end, records, bytes, why).

    ``end`` is the log offset just past the last valid record (or blank-ended segment
    followed by another segment); ``bytes`` counts the bytes walked, less the blank
    tails of segments. With ``keep`` (and a ``damaged`` list to fill), damage followed
    by valid records is fenced off and the scan goes on after it. Segment positions are
    not changed here.

    The walk is the :class:`~mqstore.commitlog.cursor.LogCursor`'s (its bulk backend,
    ``SCAN_RECORDS`` records a call; under ``keep`` a record whose PHYSICALOFFSET is not
    its own position is refused too); its first :class:`Damage` is the stop reason
    unless :func:`_fence` keeps what follows. ``on_record`` gets every valid record in
    log order: a :class:`PlainSink` as the bulk scan's records, a :class:`RunSink` as
    runs of bytes, a :class:`FieldSink` through ``dispatch_one``, any other callback a
    ``RecordInfo`` per record.
    """
    files = segments.files
    start = end = at = files[start_index].file_from_offset
    records = tails = 0
    deliver = _deliverer(on_record)
    while True:
        cursor = LogCursor(files, at, check_crc=check_crc, own_position=keep is not None,
                           chunk=SCAN_RECORDS)  # fmt: skip
        blank: Blank | None = None
        for item in cursor.runs():
            if blank is not None:  # a segment follows the blank: its tail was not walked
                tails += blank.size
                blank = None
            if isinstance(item, Run):
                if deliver is not None:
                    deliver(item.view, item.records, item.count)
                records += item.count
                end = item.end
            elif isinstance(item, Blank):
                blank = item
                end = item.offset + item.size
            else:
                fenced = None
                if keep is not None and damaged is not None:
                    i = (item.offset - files[0].file_from_offset) // segments.file_size
                    pos = item.offset - files[i].file_from_offset
                    fenced = _fence(segments, i, pos, item.why, keep, check_crc, searched)
                if fenced is None or damaged is None:
                    return end, records, item.offset - start - tails, item.why
                ranges, j, next_pos = fenced
                damaged.extend(ranges)
                at = files[j].file_from_offset + next_pos
                break
        else:
            if blank is not None:
                why = "blank record in last segment"
                return blank.offset, records, blank.offset - start - tails, why
            return end, records, end - start - tails, "end of last segment"


Deliver = Callable[[memoryview, bulk.PlainRecords, int], None]
"""Hands the first ``k`` records of a bulk scan to the scan's callback."""


def _deliverer(on_record: OnRecord | None) -> Deliver | None:
    """How the valid records of a bulk scan reach ``on_record``: a :class:`PlainSink`
    gets them as they are; a :class:`RunSink` the bytes they occupy; a
    :class:`FieldSink` each record's dispatch fields (topic and properties decoded from
    their spans); any other callback the codec's ``RecordInfo`` of each record."""
    if on_record is None:
        return None
    dispatch_plain = getattr(on_record, "dispatch_plain", None)
    if dispatch_plain is not None:
        return cast(Deliver, dispatch_plain)
    dispatch_run = getattr(on_record, "dispatch_run", None)
    if dispatch_run is not None:
        return partial(_deliver_run, dispatch_run)
    dispatch_one = getattr(on_record, "dispatch_one", None)
    if dispatch_one is None:
        return partial(_deliver_infos, on_record)
    return partial(_deliver_fields, dispatch_one)


def _deliver_run(
    dispatch_run: Callable[[memoryview, int, int], None],
    view: memoryview,
    recs: bulk.PlainRecords,
    k: int,
) -> None:
    dispatch_run(view, int(recs.position[0]), int(recs.position[k - 1] + recs.size[k - 1]))


def _deliver_fields(
    dispatch_one: FieldDispatch,
    view: memoryview,
    recs: bulk.PlainRecords,
    k: int,
) -> None:
    topics: dict[bytes, str] = {}
    columns = (
        recs.topic_pos, recs.topic_len, recs.queue_id, recs.queue_offset,
        recs.physical_offset, recs.size, recs.sys_flag, recs.store_timestamp,
        recs.props_pos, recs.props_len,
    )  # fmt: skip
    for t_pos, t_len, qid, qoff, phys, size, sys_flag, ts, p_pos, p_len in zip(
        *(c[:k].tolist() for c in columns), strict=True
    ):
        raw = view[t_pos : t_pos + t_len].tobytes()
        topic = topics.get(raw)
        if topic is None:
            topic = topics[raw] = str(raw, "utf-8")
        props = str(view[p_pos : p_pos + p_len], "utf-8")
        dispatch_one(topic, qid, qoff, phys, size, sys_flag, ts, props)


def _deliver_infos(on_record: OnRecord, view: memoryview, recs: bulk.PlainRecords, k: int) -> None:
    scan_one, limit = fmt.scan, len(view)
    for at in recs.position[:k].tolist():
        r = scan_one(view, at, limit, check_crc=False)
        assert isinstance(r, fmt.RecordInfo)
        on_record(r, r.size)


def _fence(
    segments: Segments,
    i: int,
    pos: int,
    why: str,
    keep: KeepRule,
    check_crc: bool,
    searched: SearchCounter | None = None,
) -> tuple[list[DamagedRange], int, int] | None:
    """The damaged ranges from ``pos`` of segment ``i`` on and where the scan goes on
    (segment index, position); None when the log must end there. A segment's blank
    record after the damage ends a range (the bytes from it on are not data): then the
    damage left in later segments, if any, is a second range."""
    found = resync(segments.files, i, pos + 1, check_crc=check_crc)
    if searched is not None:
        searched.bytes += found.searched
    if found.at is None:
        return None
    j, next_pos, record = found.at
    files = segments.files
    start = files[i].file_from_offset + pos
    end = files[j].file_from_offset + next_pos
    spans = [(start, end)]
    if j > i:
        blank = _blank_after(files[i].view, pos + 1, files[i].file_size)
        if blank is not None:
            spans = [(start, files[i].file_from_offset + blank)]
            if (j, next_pos) != (i + 1, 0):
                spans.append((files[i + 1].file_from_offset, end))
    if not all(is_damage(segments, a, b, record.store_timestamp, keep) for a, b in spans):
        return None
    lost = messages_lost(segments, i, pos, j, next_pos)
    ranges = [DamagedRange(a, b, why, 0) for a, b in spans[:-1]]
    ranges.append(DamagedRange(*spans[-1], why, lost))
    return ranges, j, next_pos


def _blank_after(view: memoryview, pos: int, size: int) -> int | None:
    """Where a blank record that claims exactly the rest of the segment starts, at or
    after ``pos``; None if there is none."""
    for m in _BLANK_MAGIC.finditer(view, pos + fmt.MAGIC_POS):
        c = m.start() - fmt.MAGIC_POS
        if _SIZE.unpack_from(view, c)[0] == size - c:
            return c
    return None


def is_damage(
    segments: Segments, start: int, end: int, next_timestamp: int, keep: KeepRule
) -> bool:
    """Whether the bad bytes ``[start, end)`` are damage (fence them, keep what follows)
    rather than a torn tail (cut): see the module docstring."""
    if keep.durable(next_timestamp):
        return True
    if _unwritten_head(segments, start):
        return False
    sector = start - start % SECTOR
    while sector < end:
        a, b = max(sector, start), min(sector + SECTOR, end)
        mf = segments.find(a)
        if mf is None:
            return False  # a segment is missing in between: nothing says it was synced
        rel = a - mf.file_from_offset
        if b - a >= MIN_LOST_RUN and mf.view[rel : rel + b - a] == _ZERO_SECTOR[: b - a]:
            return False
        sector += SECTOR
    return True


def _unwritten_head(segments: Segments, start: int) -> bool:
    """Whether the bad record at ``start`` has zero TOTALSIZE and MAGICCODE: a record
    whose write stopped before its first bytes landed, a torn tail however complete
    the bytes after it are. A process killed in the middle of one copy of several
    records leaves exactly that: the copy routine may store its first bytes last
    (glibc's ``memcpy`` writes the head vector after its loop), so the later records
    are whole while the first starts with zeros shorter than a sector."""
    mf = segments.find(start)
    if mf is None:
        return False
    rel = start - mf.file_from_offset
    return mf.file_size - rel >= 8 and mf.view[rel : rel + 8] == _ZERO_SECTOR[:8]


def messages_lost(segments: Segments, i: int, pos: int, j: int, next_pos: int) -> int:
    """Queue offsets missing between the bad record at (``i``, ``pos``) and the
    record at (``j``, ``next_pos``): per queue seen on both sides, the first offset
    after minus the one that should have followed the last before. The records before
    are read from the start of segment ``i`` (and of the segment before it when the
    damage starts segment ``i``: a missing segment, filled with zeros, has no record
    before its damage), those after up to :data:`LOST_LOOKAHEAD` records."""
    files = segments.files
    before: dict[tuple[str, int], int] = {}
    if pos == 0 and i > 0:
        _last_offsets(files[i - 1], before)
    base = files[i].file_from_offset
    past_damage = False
    for item in LogCursor(files, base, base + pos):
        if isinstance(item, Damage):  # an earlier damaged range: the cursor goes past it
            past_damage = True
        elif isinstance(item, Record):
            if past_damage:  # a gap left by that earlier range is its own loss, not this one's
                before.clear()
                past_damage = False
            before[(item.info.topic, item.info.queue_id)] = item.info.queue_offset + 1
    lost = 0
    seen: set[tuple[str, int]] = set()
    at = files[j].file_from_offset
    walk = LogCursor(files, at + next_pos, at + files[j].file_size)
    for n, item in enumerate(walk):
        if n >= LOST_LOOKAHEAD or not isinstance(item, Record):
            break
        key = (item.info.topic, item.info.queue_id)
        if key not in seen:
            seen.add(key)
            if key in before:
                lost += max(0, item.info.queue_offset - before[key])
            if len(seen) >= len(before) and before.keys() <= seen:
                break
    return lost


def _last_offsets(segment: MappedFile, out: dict[tuple[str, int], int]) -> None:
    """The queue offset after the last record of each queue in one segment's valid
    records from its start (stops at the first bytes that are not one)."""
    base = segment.file_from_offset
    for item in LogCursor([segment], base, base + segment.file_size):
        if not isinstance(item, Record):
            return
        out[(item.info.topic, item.info.queue_id)] = item.info.queue_offset + 1


def recover(
    segments: Segments,
    checkpoint: Checkpoint,
    *,
    last_exit_ok: bool,
    check_crc: bool,
    on_record: OnRecord | None = None,
    policy: RecoveryPolicy = RecoveryPolicy.TRUNCATE,
    quarantine: Quarantine | None = None,
    trusted_end: int | None = None,
) -> RecoveryResult:
    """Recover the log in place: scan, fence damage (``KEEP``), truncate the torn tail,
    set positions, and bring ``quarantine`` (the store's damage list) up to date.

    ``trusted_end`` (a clean close's record that matched the files, ``last_exit_ok``):
    no scan, the positions are set for a log ending there (mode ``TRUSTED``), unless
    ``TRUNCATE`` must cut the log at a range an earlier ``KEEP`` open fenced.

    After this, every segment before the last is full and flushed, the last one's
    write and flush positions are at the recovered end, and bytes past the end are
    zero. Each damaged range fenced, and a cut that drops data, is logged as one
    WARNING line.

    Raises:
        OSError: the cut or the damage list could not be made durable.
    """
    t0 = time.perf_counter()
    if not segments.files:
        if quarantine is not None and quarantine.update((), min_offset=0, end=0):
            quarantine.save()
        return RecoveryResult(RecoveryMode.EMPTY, 0, 0, 0, 0, 0, 0, "no segments", 0.0)
    must_cut = policy is RecoveryPolicy.TRUNCATE and quarantine is not None and quarantine.ranges
    if trusted_end is not None and last_exit_ok and not must_cut:
        _set_positions(segments, trusted_end)
        return RecoveryResult(
            RecoveryMode.TRUSTED, trusted_end, trusted_end, 0, 0, 0, 0,
            "clean close record matched", time.perf_counter() - t0,
        )  # fmt: skip
    if last_exit_ok:
        mode = RecoveryMode.NORMAL
        start_index = max(0, len(segments.files) - 3)
    else:
        mode = RecoveryMode.ABNORMAL
        start_index = abnormal_start_index(segments, checkpoint)
    if segments.patched:  # files load() had to patch: scan them, whatever the mode
        start_index = min(start_index, _index_of(segments, min(segments.patched)))
    if policy is RecoveryPolicy.TRUNCATE and quarantine is not None and quarantine.ranges:
        # A range an earlier KEEP open fenced is bad bytes like any other: TRUNCATE ends
        # the log at the first one (a slave's master re-sends from there).
        first = quarantine.ranges[0].start
        held = [i for i, mf in enumerate(segments.files) if mf.file_from_offset <= first]
        start_index = min(start_index, held[-1] if held else 0)
    start = segments.files[start_index].file_from_offset
    keep = None
    damaged: list[DamagedRange] = []
    searched = SearchCounter()
    if policy is RecoveryPolicy.KEEP:
        keep = KeepRule(checkpoint.physic_msg_timestamp, last_exit_ok)
    end, records, scanned, why = scan(
        segments, start_index, check_crc=check_crc, on_record=on_record,
        keep=keep, damaged=damaged, searched=searched,
    )  # fmt: skip
    if keep is not None:
        tail = _damaged_tail(segments, end, why)
        if tail is not None:
            damaged.append(tail)
            end = tail.end
    for d in damaged:
        log.warning("CommitLog damage fenced off, valid records after it kept: %s", d)
    files_before = len(segments.files)
    truncated = 0 if _only_zeros_after(segments, end) else segments.truncate_to(end)
    if truncated:
        _make_cut_durable(segments, deleted=len(segments.files) < files_before)
        log.warning("CommitLog cut at %d: %d bytes after it dropped (%s)", end, truncated, why)
    _set_positions(segments, end)
    if quarantine is not None and quarantine.update(
        tuple(damaged), min_offset=segments.min_offset, end=end
    ):
        quarantine.save()
    return RecoveryResult(
        mode, start, end, truncated, records, scanned, searched.bytes, why,
        time.perf_counter() - t0, tuple(damaged),
    )  # fmt: skip


def _set_positions(segments: Segments, end: int) -> None:
    """Every segment before ``end`` full and flushed, the last one written and flushed
    up to ``end``."""
    for mf in segments.files:
        if mf.file_from_offset + mf.file_size <= end:
            mf.set_positions(mf.file_size)
    last = segments.last
    if last is not None and last.file_from_offset <= end:
        last.set_positions(end - last.file_from_offset)
    segments.flushed_where = end


def _damaged_tail(segments: Segments, end: int, why: str) -> DamagedRange | None:
    """The rest of the segment from ``end`` as a damaged range, when the scan stopped
    there at bytes that are damage, not a torn tail (no part of a sector reads as
    zeros, see :func:`is_damage`), though nothing valid follows: kept on disk for an
    operator, and the log goes on in the next segment. None otherwise."""
    if why in ("blank record in last segment", "end of last segment"):
        return None
    size = segments.file_size
    seg_end = end - end % size + size
    if seg_end - end < SECTOR or segments.find(end) is None:
        return None
    if not is_damage(segments, end, seg_end, 0, KeepRule(0, clean_shutdown=False)):
        return None
    return DamagedRange(end, seg_end, f"{why}; no valid record after it in its segment", 0)


def _only_zeros_after(segments: Segments, end: int) -> bool:
    """Whether nothing but zeros follows ``end`` (no later segment, and the runs that
    may hold data in the rest of its segment read as zeros): then there is nothing to
    cut, and the reserved space past the log (unwritten extents, holes) is not read."""
    last = segments.last
    if last is None or last.file_from_offset > end or end > last.file_from_offset + last.file_size:
        return False
    view = last.view
    for a, b in data_runs(last.path, end - last.file_from_offset, last.file_size):
        for c in range(a, b, len(_ZERO_CHUNK)):
            n = min(b - c, len(_ZERO_CHUNK))
            if view[c : c + n] != _ZERO_CHUNK[:n]:
                return False
    return True


def _index_of(segments: Segments, start: int) -> int:
    for i, mf in enumerate(segments.files):
        if mf.file_from_offset >= start:
            return i
    return len(segments.files) - 1


def _make_cut_durable(segments: Segments, *, deleted: bool) -> None:
    """Sync the zeroed tail (and the directory, if segments were deleted).

    Until the zeros are on disk, the torn bytes after the cut are too, and new
    records are about to be appended at the cut. Were the power to fail before the
    next sync, a page of new records could be lost while the old bytes after it
    survive: records from before the cut, whose queue offsets were handed out again,
    would line up after the new ones and be recovered as valid (found by
    tests/crash/test_power_loss.py with fixed-size records).

    Raises:
        OSError: the sync failed; the store must not open.
    """
    last = segments.last
    if last is not None:
        last.sync()
    if deleted:
        _platform.fsync_dir(segments.directory)


def scan_headers(segments: Segments, start: int, end: int, on_record: OnRecord) -> int:
    """Walk the records in [start, end) without CRC checks (rebuilding tables), up to
    the first bytes that are not a valid record; return the count."""
    count = 0
    for item in LogCursor(segments.files, start, end):
        if not isinstance(item, Record):
            if isinstance(item, Damage):
                break
            continue
        on_record(item.info, item.info.size)
        count += 1
    return count


def dispatch_kept(
    segments: Segments, start: int, result: RecoveryResult, on_record: OnRecord
) -> int:
    """Walk the records in [``start``, ``result.end_offset``) jumping over
    ``result.damaged``, calling ``on_record`` for each (rebuilding the queues around
    fenced damage); return the count."""
    count = 0
    offset = start
    for d in (*result.damaged, None):
        stop = result.end_offset if d is None else d.start
        if stop > offset:
            count += scan_headers(segments, offset, stop, on_record)
        if d is not None:
            offset = max(offset, d.end)
    return count
