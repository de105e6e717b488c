"""The segment reader: CommitLog segment files as byte ranges read in Spark tasks.

Plan on the driver, parse in tasks:

1. :func:`plan_ranges` turns the segments into ``(file, start, end)`` byte ranges. A file
   up to ``split_bytes`` is one range; a bigger one is cut at record boundaries found by a
   cheap pre-scan (:func:`mqstore.commitlog.format.peek_size`, 8 bytes per record). The
   pre-scan stops cutting at the first header that does not look like a record, so damage
   always falls in the last range of its file and a range never needs its neighbours.
2. :func:`mqstore.tools.spark.tasks.scan_ranges` (the audit) makes one partition per
   range: each task mmaps its file read-only, checks its range with
   :func:`mqstore.tools.spark.segscan.scan_range` and returns per (topic, queue) a small
   summary of its checks against the queue's units (:mod:`mqstore.tools.spark.queueparts`),
   plus the findings and a range summary; the driver joins a queue's summaries (no
   shuffle). Where those cannot settle a queue,
   :func:`~mqstore.tools.spark.tasks.queue_values` returns its records as packed values
   (a few large values, not one row per record). Reindex and export read their ranges'
   records with :func:`bulk_records`. Every job is a plain RDD job over the ranges (no
   query plan). Bytes never travel through the JVM (``binaryFiles`` copies whole files
   into its
   heap; docs/design.md §3.2).

Files are opened by path in the tasks: on a cluster the store must be on a filesystem that
every worker mounts at the same path.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt
from mqstore.tools.spark.byterange import ByteRange, range_records
from mqstore.tools.spark.layout import StoreLayout
from mqstore.tools.spark.segscan import Buffer, RecordColumns

if TYPE_CHECKING:
    from numpy.typing import NDArray


DEFAULT_SPLIT_BYTES: Final = 128 << 20
"""Ranges of at least 128 MiB: smaller ones cost more per task than they gain
(docs/design.md §3.2)."""

LIST_COLUMNS: Final = {
    "offset": "long", "size": "int", "queue_offset": "long", "sys_flag": "int",
    "store_ts": "long", "tags_code": "long",
}  # fmt: skip
"""Record fields shipped per (range, queue) for the queue checks: one value per queue and
range, not one row per record."""
RECORD_DTYPE: Final = np.dtype(
    [(k, "<i8" if v == "long" else "<i4") for k, v in LIST_COLUMNS.items()]
)
"""The LIST_COLUMNS of a queue's records in a range packed as one little-endian array:
the JVM moves it as one opaque value."""


UNREADABLE: Final = "mqstore-unreadable"
"""Marks a task's I/O error so the driver can tell it from a bug (see :func:`unreadable`)."""


@contextlib.contextmanager
def open_mapped(path: str) -> Iterator[mmap.mmap | bytes]:
    """The file at ``path`` mapped read-only (``b""`` when empty), in a task.

    Raises:
        OSError: the file cannot be opened or mapped; the message carries
            :data:`UNREADABLE` and the path, so the driver reports it in one line.
    """
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below, after the mapping
    except OSError as e:
        raise OSError(f"{UNREADABLE}<{path}: {e.strerror or e}>") from e
    try:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            yield b""
            return
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise OSError(f"{UNREADABLE}<{path}: {e.strerror or e}>") from e
        with mm:
            yield mm
    finally:
        f.close()


def unreadable(exc: BaseException) -> str | None:
    """The one-line message for a Spark job that failed because a task could not read a
    store file (None for any other failure)."""
    m = re.search(UNREADABLE + r"<([^>]*)>", str(exc))
    if m is None:
        return None
    return (
        f"cannot read {m.group(1)} in a Spark task: every Spark worker must see the store"
        " at the same path as the driver"
    )


def record_cuts(buf: bytes | mmap.mmap, length: int, split_bytes: int) -> list[int]:
    """Record-boundary positions about every ``split_bytes`` (excluding 0 and the end)."""
    cuts: list[int] = []
    pos = 0
    next_cut = split_bytes
    magics = (fmt.MAGIC_V1, fmt.MAGIC_V2)
    peek = fmt.peek_size
    with memoryview(buf) as view:
        while pos + 8 <= length:
            size, magic = peek(view, pos)
            if magic not in magics or size < fmt.MIN_RECORD_SIZE or pos + size > length:
                break
            pos += size
            if pos >= next_cut and pos < length:
                cuts.append(pos)
                next_cut = pos + split_bytes
                if next_cut >= length:
                    break  # no further cut: the rest is not walked
    return cuts


def last_data_index(layout: StoreLayout) -> int:
    """Index of the last segment holding data: later ones whose first record header is
    all zero were pre-allocated (RocketMQ creates the next file ahead) and are empty, so
    the log ends in this one (where a torn tail may be, and no blank record is due)."""
    last = 0
    for i, seg in enumerate(layout.segments):
        if seg.length >= 8:
            with open(seg.path, "rb") as f:
                if f.read(8).strip(b"\0"):
                    last = i
    return last


def balanced_split(layout: StoreLayout, parallelism: int) -> int:
    """Range size for ``parallelism`` task slots: the segments' data (allocated bytes)
    shared out evenly, at least :data:`DEFAULT_SPLIT_BYTES`. Fewer, larger ranges
    than slots cost a task each and a pre-scan of cuts on the driver for nothing."""
    share = -(-layout.data_bytes() // max(1, parallelism))
    return max(DEFAULT_SPLIT_BYTES, share)


def plan_ranges(layout: StoreLayout, split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[ByteRange]:
    """Byte ranges covering every non-empty segment (see the module doc)."""
    out: list[ByteRange] = []
    last_index = last_data_index(layout)
    for i, seg in enumerate(layout.segments):
        if seg.length == 0:
            continue
        cuts: list[int] = []
        if seg.length > split_bytes:
            with open(seg.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                cuts = record_cuts(mm, seg.length, split_bytes)
        bounds = [0, *cuts, seg.length]
        for start, end in itertools.pairwise(bounds):
            last = i >= last_index
            out.append(ByteRange(seg.path, seg.name, seg.base_offset, start, end, last,
                                 last and end == seg.length))  # fmt: skip
    return out


def bulk_records(buf: Buffer, rng: ByteRange, *, keys: bool = False) -> Iterator[bulk.RecordArrays]:
    """The valid records of ``rng`` as bulk column chunks, read like the reput service
    (no CRC check; damage skipped up to the next record that names its own position,
    a blank record ends the range): the jobs that rebuild use this, the audit reports
    the damage instead (segscan). Read through the cursor
    (:func:`mqstore.tools.spark.byterange.range_records`)."""
    return range_records(buf, rng, check_crc=False, keys=keys)


def queue_order(
    topic_id: NDArray[Any], queue_id: NDArray[Any]
) -> tuple[NDArray[Any], NDArray[Any]]:
    """The stable order of records by (topic id, queue id), and their sorted
    ``topic_id << 32 | queue_id`` keys (a radix sort of a 16-bit key when both fit a byte,
    the usual case)."""
    key = (topic_id << 32) | (queue_id & 0xFFFFFFFF)
    small = key.size > 0 and int(topic_id.max()) < 256 and int(queue_id.min()) >= 0
    if small and int(queue_id.max()) < 256:
        order = np.argsort(((topic_id << 8) | queue_id).astype(np.uint16), kind="stable")
    else:
        order = np.argsort(key, kind="stable")
    return order, key[order]


def queue_groups(cols: RecordColumns) -> list[tuple[str, int, dict[str, NDArray[Any]]]]:
    """A range's records per (topic, queue), in (topic id, queue id) order: (topic, queue
    id, the LIST_COLUMNS of its records in log order)."""
    topic_id, queue_id = cols.column("topic_id"), cols.column("queue_id")
    order, sorted_key = queue_order(topic_id, queue_id)
    first = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    heads = order[first]
    ends = np.r_[first[1:], sorted_key.size].tolist()
    columns = {name: cols.column(name)[order] for name in LIST_COLUMNS}
    names = cols.topics
    return [
        (names[t], int(q), {k: v[lo:hi] for k, v in columns.items()})
        for lo, hi, t, q in zip(first.tolist(), ends, topic_id[heads].tolist(),
                                queue_id[heads].tolist(), strict=True)
    ]  # fmt: skip


def pack(columns: dict[str, NDArray[Any]]) -> bytes:
    """LIST_COLUMNS of some records as one RECORD_DTYPE value (one opaque value for the JVM)."""
    packed = np.empty(columns["offset"].size, RECORD_DTYPE)
    for name in LIST_COLUMNS:
        packed[name] = columns[name]
    return packed.tobytes()


def queue_records(cols: RecordColumns) -> list[tuple[str, int, bytes]]:
    """A range's records per (topic, queue): (topic, queue id, LIST_COLUMNS packed as
    RECORD_DTYPE in log order), one value per queue instead of one row per record."""
    return [(t, q, pack(c)) for t, q, c in queue_groups(cols)]
