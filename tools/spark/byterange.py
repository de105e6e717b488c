"""A byte range of one CommitLog segment, read in a Spark task through the cursor.

Every Spark job reads its records through :class:`mqstore.commitlog.cursor.LogCursor`:
the task maps its file and walks its range with a cursor over that one file
(:func:`range_cursor`), so the cursor's rules hold in the tasks too: one stepping by
TOTALSIZE (the bulk backend), one resync past damage, one torn-tail rule. What a job
does with the items is its own: the audit reports every :class:`~mqstore.commitlog.cursor.Damage`
(:mod:`mqstore.tools.spark.segscan`), reindex and export skip them
(:func:`range_records`).

A range's end is the end of the log to its cursor: damage after which no valid record
follows *in the range* ends the walk. The ranges are cut so that this is the truth: a
file's ranges are cut at record boundaries the planner walked
(:func:`mqstore.tools.spark.reader.record_cuts`), and only the last data file's last range,
or a live audit's cut (:mod:`mqstore.tools.spark.livecut`), ends at the log's end
(:attr:`ByteRange.ends_log`).
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass

from mqstore.commitlog import bulk
from mqstore.commitlog.cursor import BufferSegment, ColumnRun, LogCursor


@dataclass(frozen=True, slots=True)
class ByteRange:
    """``[start, end)`` of segment ``name`` (positions in the file) to check in one task.

    ``is_last_file``: the segment is the log's last holding data (it need not end with
    a blank record). ``ends_log``: the range ends where the log's data ends (the last
    range of the last file, or a live audit's cut): damage that nothing valid follows
    in it is the torn tail, not damage.
    """

    path: str
    name: str
    base_offset: int
    start: int
    end: int
    is_last_file: bool
    ends_log: bool = False


def range_cursor(view: memoryview, rng: ByteRange, *, check_crc: bool) -> LogCursor:
    """The cursor over ``rng`` of the file whose bytes are ``view`` (the whole file).

    ``check_crc`` as the cursor's: a record with a bad BODYCRC is damage (export),
    or not checked (the audit checks CRCs itself, to keep such records in its
    queue checks; reindex reads like the reput service, which checks none).
    """
    segment = BufferSegment(view, rng.base_offset, len(view), rng.path)
    start, end = rng.base_offset + rng.start, rng.base_offset + rng.end
    return LogCursor([segment], start, end, check_crc=check_crc, chunk=bulk.CHUNK_RECORDS)


def range_records(
    buf: bytes | mmap.mmap,
    rng: ByteRange,
    *,
    check_crc: bool = False,
    keys: bool = False,
    tags: bool = True,
) -> Iterator[bulk.RecordArrays]:
    """The valid records of ``rng`` (``buf``: the whole file) as column chunks, damage
    skipped as the cursor skips it (resumed at the next record that names its own
    position), a blank record ending the range. ``keys``, ``tags``: the text columns
    wanted (as :func:`mqstore.commitlog.bulk.scan`'s). The chunks reference ``buf``
    until it is closed."""
    with memoryview(buf) as view:
        for item in range_cursor(view, rng, check_crc=check_crc).column_runs(keys=keys, tags=tags):
            if isinstance(item, ColumnRun):
                yield item.records
