"""CommitLog recovery: find where valid data ends and cut the torn tail.

Normal recovery (the ``abort`` file is absent: the last shutdown was clean) scans
from the third-to-last segment, as RocketMQ 4.9/5.0-5.3.1 do: anything older was
flushed long ago. Abnormal recovery (``abort`` present) walks back from the newest
segment to the first whose first message is no newer than the checkpoint's
``min_timestamp`` (data before it was flushed and its consume queues written), and
scans from there, reporting *every* valid record to ``on_record`` so the caller can
re-dispatch.

The scan checks each record fully (magic, lengths, body CRC when enabled, and
properties not ending in a zero byte: see :data:`TORN_PROPERTIES`). It stops at the
first record that is not valid: everything from there on is the torn tail,
which is truncated (zeroed and synced before anything is appended), not reported
as corruption. Worked example: segments
of 8192 bytes holding 47 records of 172 bytes and a blank at 8084 recover to 8084;
the next append writes the blank again and rolls to the segment at 8192.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

from mqstore import _platform
from mqstore.checkpoint import Checkpoint
from mqstore.commitlog import format as fmt
from mqstore.commitlog.segments import Segments

TORN_PROPERTIES = "properties end in a zero byte"
"""Why a record that passes the codec's checks still ends recovery.

BODYCRC covers only the body. A power loss that tears a record inside its
properties leaves the never-written sectors as zeros (segments are preallocated),
and such a record decodes with a valid CRC but NULs at the end of its properties.
The store never writes one (properties always hold UNIQ_KEY and end in ``\\x02``)
and a RocketMQ broker's properties end in ``\\x02`` or a value character, so a
non-empty properties string ending in ``\\x00`` is taken as the torn tail.
"""

OnRecord = Callable[[fmt.RecordInfo, int], None]
"""Called with (record info, size) for each valid record scanned (no body copy)."""


class RecoveryMode(enum.Enum):
    """Which recovery ran."""

    NORMAL = "normal"
    ABNORMAL = "abnormal"
    EMPTY = "empty"


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """What recovery found and did."""

    mode: RecoveryMode
    start_offset: int
    end_offset: int
    truncated_bytes: int
    records: int
    scanned_bytes: int
    stop_reason: str
    seconds: float


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


def scan(
    segments: Segments,
    start_index: int,
    *,
    check_crc: bool,
    on_record: OnRecord | None = None,
) -> tuple[int, int, int, str]:
    """Scan from the start of segment ``start_index``; return (end, records, bytes, why).

    ``end`` is the log offset just past the last valid record (or blank-ended segment
    followed by another segment). Segment positions are not changed here.
    """
    files = segments.files
    end = files[start_index].file_from_offset
    records = 0
    scanned = 0
    why = "end of last segment"
    i = start_index
    scan_one = fmt.scan
    info_type = fmt.RecordInfo
    while i < len(files):
        mf = files[i]
        view = mf.view
        size = mf.file_size
        pos = 0
        while True:
            r = scan_one(view, pos, size, check_crc=check_crc)
            if type(r) is info_type:
                if r.properties_string.endswith("\x00"):
                    scanned += pos
                    why = f"torn record at {mf.file_from_offset + pos}: {TORN_PROPERTIES}"
                    return end, records, scanned, why
                if on_record is not None:
                    on_record(r, r.size)
                pos += r.size
                records += 1
                end = mf.file_from_offset + pos
                continue
            if isinstance(r, fmt.EndOfSegment):
                scanned += pos
                if i + 1 < len(files):
                    end = files[i + 1].file_from_offset
                    break
                end = mf.file_from_offset + pos
                return end, records, scanned, "blank record in last segment"
            return end, records, scanned + pos, _corrupt_why(r, mf.file_from_offset + pos)
        i += 1
    return end, records, scanned, why


def _corrupt_why(r: fmt.ScanResult, offset: int) -> str:
    """The stop reason for the invalid record ``r`` at log ``offset`` (a Corrupt)."""
    assert isinstance(r, fmt.Corrupt)
    return f"{r.kind.value} at {offset}: {r.detail}"


def recover(
    segments: Segments,
    checkpoint: Checkpoint,
    *,
    last_exit_ok: bool,
    check_crc: bool,
    on_record: OnRecord | None = None,
) -> RecoveryResult:
    """Recover the log in place: scan, truncate the torn tail, set positions.

    After this, every segment before the last is full and flushed, the last one's
    write and flush positions are at the recovered end, and bytes past the end are
    zero.
    """
    t0 = time.perf_counter()
    if not segments.files:
        return RecoveryResult(RecoveryMode.EMPTY, 0, 0, 0, 0, 0, "no segments", 0.0)
    if last_exit_ok:
        mode = RecoveryMode.NORMAL
        start_index = max(0, len(segments.files) - 3)
    else:
        mode = RecoveryMode.ABNORMAL
        start_index = abnormal_start_index(segments, checkpoint)
    start = segments.files[start_index].file_from_offset
    end, records, scanned, why = scan(
        segments, start_index, check_crc=check_crc, on_record=on_record
    )
    files_before = len(segments.files)
    truncated = segments.truncate_to(end)
    if truncated:
        _make_cut_durable(segments, deleted=len(segments.files) < files_before)
    for mf in segments.files:
        if mf.file_from_offset + mf.file_size <= end:
            mf.set_positions(mf.file_size)
    last = segments.last
    if last is not None and last.file_from_offset <= end:
        last.set_positions(end - last.file_from_offset)
    segments.flushed_where = end
    return RecoveryResult(
        mode, start, end, truncated, records, scanned, why, time.perf_counter() - t0
    )


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
    """Walk records in [start, end) without CRC checks (rebuilding tables); return count."""
    count = 0
    offset = start
    while offset < end:
        mf = segments.find(offset)
        if mf is None:
            break
        pos = offset - mf.file_from_offset
        limit = min(mf.wrote_position, end - mf.file_from_offset)
        r = fmt.scan(mf.view, pos, mf.wrote_position, check_crc=False)
        if isinstance(r, fmt.RecordInfo) and pos + r.size <= limit:
            on_record(r, r.size)
            offset += r.size
            count += 1
        elif isinstance(r, fmt.EndOfSegment):
            offset = segments.roll_next_offset(offset)
        else:
            break
    return count
