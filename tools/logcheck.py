"""Consistency checker for a CommitLog directory, read straight from the files.

Moved from ``tests/helpers.py`` (which re-exports it) so product code such as the flush
lab can use it. :func:`scan_log` walks a CommitLog directory (never through the store
under test) and :func:`check_consistency` turns what it saw into a list of problems:
an empty list means the log is one the store could have written.

The checks, each a plain function over a :class:`LogScan` so more can be added
(consume queues, index files) by appending to :data:`CHECKS`:

1. segment files are named by 20-digit start offsets, all ``file_size`` bytes,
   contiguous;
2. from the start of the log every record decodes valid, BODYCRC included, up to
   the end of the data, its PHYSICALOFFSET field equals its position, and its
   properties do not end in zeros (a record torn where BODYCRC does not reach);
3. blank (end-of-segment) records appear only as the last thing in a segment and
   claim exactly the bytes left; every segment but the last ends with one;
4. after the end of the data, the last segment holds nothing but zeros;
5. per topic-queue, queue offsets are contiguous without duplicates (``0..n-1``
   when the log starts at offset 0); PREPARED and ROLLBACK transaction records
   carry queue offset 0 and take no offset (RocketMQ semantics).

``damaged`` ranges (what a store's recovery fenced off, ``MessageStore.damage``) are
jumped over: the scan goes on at each range's end, and a queue's offsets may jump
across one (the messages lost in it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mqstore.commitlog import dispatch_rule as rule
from mqstore.commitlog import format as fmt
from mqstore.commitlog.cursor import Blank, BufferSegment, Damage, LogCursor, Record

MAX_PROBLEMS_PER_CHECK = 20


# ------------------------------------------------------------------ log scan


@dataclass
class LogScan:
    """What :func:`scan_log` found in a CommitLog directory.

    ``records`` holds (physical offset, record info) in log order; a record's body
    is ``bodies[physical offset]``. ``end`` is one past the last valid byte (the
    start of the first zero byte in the last segment, as recovery would put it).
    """

    directory: Path
    file_size: int
    start: int = 0
    end: int = 0
    records: list[tuple[int, fmt.RecordInfo]] = field(default_factory=list)
    bodies: dict[int, bytes] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    damaged: list[tuple[int, int]] = field(default_factory=list)

    def by_offset(self) -> dict[int, fmt.RecordInfo]:
        """Records keyed by physical offset."""
        return dict(self.records)


def _segment_files(directory: Path, file_size: int, problems: list[str]) -> list[Path]:
    if not directory.is_dir():
        return []
    files: list[Path] = []
    for name in sorted(os.listdir(directory)):
        path = directory / name
        if not (len(name) == 20 and name.isdigit()):
            problems.append(f"{path}: not a segment file name")
            continue
        size = path.stat().st_size
        if size != file_size:
            problems.append(f"{path}: size {size} != segment size {file_size}")
            break
        if int(name) % file_size:
            problems.append(f"{path}: start {int(name)} is not a multiple of {file_size}")
            break
        if files and int(name) != int(files[-1].name) + file_size:
            problems.append(f"{path}: gap after {files[-1].name}")
            break
        files.append(path)
    return files


def _first_nonzero(data: memoryview, pos: int) -> int:
    """Index of the first non-zero byte at or after ``pos``, or -1."""
    rest = bytes(data[pos:])
    stripped = rest.lstrip(b"\0")
    return -1 if not stripped else pos + len(rest) - len(stripped)


def scan_log(
    root: Path | str,
    file_size: int,
    commitlog_dir: Path | str | None = None,
    damaged: Sequence[tuple[int, int]] = (),
) -> LogScan:
    """Decode a store's CommitLog from its files, recording layout problems as it goes.

    Checks 1-4 of the module docstring happen here; the scan stops at the first
    structural problem because nothing after it can be located reliably, except at
    the start of a ``damaged`` range, where it goes on at the range's end. The records
    are read through the cursor (:class:`~mqstore.commitlog.cursor.LogCursor`, BODYCRC
    checked); what it judges torn is reported and kept, and the walk goes on where the
    cursor does.
    """
    directory = Path(commitlog_dir) if commitlog_dir else Path(root) / "commitlog"
    log = LogScan(directory, file_size, damaged=sorted(damaged))
    files = _segment_files(directory, file_size, log.problems)
    if not files:
        return log
    segments = [BufferSegment(memoryview(p.read_bytes()), int(p.name), file_size, p) for p in files]
    log.start = log.end = int(files[0].name)
    at: int | None = log.start
    while at is not None:
        at = _walk(log, segments, at)
    return log


def _walk(log: LogScan, segments: Sequence[BufferSegment], start: int) -> int | None:
    """Read the cursor's items from ``start`` into ``log``; where to go on (the end of a
    ``damaged`` range the walk reached, or the end of a kept torn record that the cursor
    went past: the next walk starts with what is there), or None when the scan is over."""
    fences = dict(log.damaged)
    size, last = log.file_size, segments[-1].file_from_offset
    ended = start  # the end of the last record, blank or kept torn record
    blank = True  # the last thing read was a blank record (or nothing yet)
    torn = False  # ... a kept torn record
    for item in LogCursor(segments, start, check_crc=True):
        if item.offset in fences:
            fence = fences[item.offset]
            if fence >= item.offset - item.offset % size + size:
                log.end = fence  # the range goes on into a later segment
            return fence
        if item.offset != ended:  # the cursor resynced past a kept torn record
            return ended
        seg = segments[(item.offset - segments[0].file_from_offset) // size]
        base = seg.file_from_offset
        if item.offset == base and not blank:
            log.problems.append(  # the previous segment's records fill it: no blank
                f"segment {_name(base - size)} ends without a blank record: "
                f"its records run to its last byte"
            )
            return None
        blank = isinstance(item, Blank)
        torn = isinstance(item, Damage) and item.record is not None
        if isinstance(item, Record):
            ended = _keep(log, item.offset, item.info, item.view)
        elif isinstance(item, Blank):
            pos = item.offset - base
            claimed = int.from_bytes(seg.view[pos : pos + 4], "big", signed=True)
            if claimed != item.size:
                log.problems.append(
                    f"blank record at {item.offset} claims {claimed} bytes, "
                    f"{item.size} are left in {_name(base)}"
                )
            junk = _first_nonzero(seg.view, pos + fmt.END_FILE_MIN_BLANK_LENGTH)
            if junk >= 0:
                log.problems.append(f"non-zero byte at {base + junk} after the blank record")
            log.end = ended = base + size
        elif item.record is not None:  # torn: BODYCRC does not cover the properties
            log.problems.append(f"record at {item.offset}: properties end in zeros (torn)")
            ended = _keep(log, item.offset, item.record, seg.view)
        else:  # the end of data: only the last segment may end without a blank
            if base != last:
                log.problems.append(
                    f"segment {_name(base)} ends without a blank record: {item.why}"
                )
                return None
            junk = _first_nonzero(seg.view, item.offset - base)
            if junk >= 0:
                log.problems.append(
                    f"non-zero byte at {base + junk} after the end of data at {item.offset} "
                    f"({item.why})"
                )
            return None
    return ended if torn else None  # what follows a torn last record is checked too


def _keep(log: LogScan, offset: int, r: fmt.RecordInfo, view: memoryview) -> int:
    """Add the record at ``offset`` to ``log`` (checking its PHYSICALOFFSET field); the
    end of its bytes."""
    if r.physical_offset != offset:
        log.problems.append(f"record at {offset} says PHYSICALOFFSET {r.physical_offset}")
    log.records.append((offset, r))
    log.bodies[offset] = bytes(view[r.body_pos : r.body_pos + r.body_len])
    log.end = offset + r.size
    return log.end


def _name(base: int) -> str:
    """A segment file's name."""
    return f"{base:020d}"


# ------------------------------------------------------------------- checks


def check_queue_offsets(log: LogScan) -> list[str]:
    """Check 5: per topic-queue offsets are contiguous, PREPARED/ROLLBACK carry 0."""
    problems: list[str] = []
    queue_next_offsets(log, problems)
    return problems


def queue_next_offsets(
    log: LogScan, problems: list[str] | None = None
) -> dict[tuple[str, int], int]:
    """The next queue offset of every topic-queue in the log (what a reopen must restore).

    Appends queue-offset problems to ``problems`` when given. A queue's offsets may
    jump forward across a damaged range (never back).
    """
    sink: list[str] = [] if problems is None else problems
    next_offset: dict[tuple[str, int], int] = {}
    last_at: dict[tuple[str, int], int] = {}
    for phys, r in log.records:
        if not rule.takes_queue_offset(r.sys_flag):
            if r.queue_offset != 0:
                sink.append(
                    f"transaction half/rollback record at {phys} has queue offset "
                    f"{r.queue_offset}, expected 0"
                )
            continue
        key = (r.topic, r.queue_id)
        want = next_offset.get(key, 0 if log.start == 0 else r.queue_offset)
        since = last_at.get(key, log.start - 1)
        skipped = any(since < a and b <= phys for a, b in log.damaged)
        if r.queue_offset != want and not (skipped and r.queue_offset > want):
            kind = "duplicate" if r.queue_offset < want else "gap"
            sink.append(
                f"{kind}: {r.topic}-{r.queue_id} record at {phys} has queue offset "
                f"{r.queue_offset}, expected {want}"
            )
        next_offset[key] = r.queue_offset + 1
        last_at[key] = phys
    return next_offset


Check = Callable[[LogScan], list[str]]
CHECKS: list[Check] = [check_queue_offsets]
"""Checks run by :func:`check_consistency` after the scan; extend by appending."""


def check_consistency(
    root: Path | str,
    file_size: int,
    *,
    end: int | None = None,
    commitlog_dir: Path | str | None = None,
    damaged: Sequence[tuple[int, int]] = (),
) -> list[str]:
    """Every problem found in the store at ``root`` (empty list: consistent).

    Reads the files directly, so it works on an open store (the mapping and the
    files share the page cache), a closed one, or a crashed one after recovery.
    With ``end``, the data must end exactly there (e.g. the store's recovered
    ``max_physical_offset``). Each check reports at most
    :data:`MAX_PROBLEMS_PER_CHECK` problems.
    """
    log = scan_log(root, file_size, commitlog_dir, damaged)
    problems = log.problems[:MAX_PROBLEMS_PER_CHECK]
    if end is not None and not log.problems and log.end != end:
        problems.append(f"data ends at {log.end}, expected {end}")
    for check in CHECKS:
        problems.extend(check(log)[:MAX_PROBLEMS_PER_CHECK])
    return problems
