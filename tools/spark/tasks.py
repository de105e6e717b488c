"""The audit's Spark tasks: one partition per byte range of :mod:`mqstore.tools.spark.reader`.

A task maps its range's file read-only, checks it with
:func:`mqstore.tools.spark.segscan.scan_range`, and returns per (topic, queue) a
:class:`~mqstore.tools.spark.queueparts.QueuePart` or the queue's packed records, then the
findings and range summaries. This module sits above the reader, the queue checks and the
index checks, so none of them needs to import another's task code.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, TypeAlias

from mqstore.tools.spark.byterange import ByteRange
from mqstore.tools.spark.queueparts import QueuePart, part
from mqstore.tools.spark.reader import open_mapped, pack, queue_groups
from mqstore.tools.spark.segscan import RecordColumns, Row, scan_range

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqstore.tools.spark.indexcheck import IndexPlan
    from mqstore.tools.spark.queues import QueueContext

AuditValue: TypeAlias = "tuple[str, int, bytes] | QueuePart | Row"


def audit_task(
    ranges: Iterable[ByteRange],
    now_ms: int,
    index: IndexPlan | None = None,
    queue_ctx: QueueContext | None = None,
) -> Iterator[AuditValue]:
    """Task body of :func:`scan_ranges`: per range and queue a
    :class:`~mqstore.tools.spark.queueparts.QueuePart` (its records checked here against
    their units) when ``queue_ctx`` is given, else, and for the queues of
    ``queue_ctx.packed``, its records packed
    (:func:`~mqstore.tools.spark.reader.queue_records`); then the findings
    (the index entries that point into the range checked against its records when
    ``index`` is given) and range summaries."""
    other: list[Row] = []
    cols = RecordColumns(keys=index is not None)
    for rng in ranges:
        with open_mapped(rng.path) as mm:
            if not isinstance(mm, mmap.mmap):
                continue
            other.extend(scan_range(mm, rng, now_ms, cols))
        if index is not None:
            other.extend(index.check_range(rng, cols, other))
        if len(cols):
            for t, q, c in queue_groups(cols):
                if queue_ctx is None or (t, q) in queue_ctx.packed:
                    yield t, q, pack(c)
                else:
                    yield part(t, q, c, queue_ctx, rng.base_offset + rng.start)
        cols.clear()
    yield from other


def records_task(
    ranges: Iterable[ByteRange], now_ms: int, wanted: frozenset[tuple[str, int]]
) -> Iterator[tuple[str, int, bytes]]:
    """Task body of :func:`queue_values`: the packed records of the ``wanted`` queues,
    read as :func:`audit_task` reads them (its findings are not repeated)."""
    cols = RecordColumns()
    for rng in ranges:
        with open_mapped(rng.path) as mm:
            if not isinstance(mm, mmap.mmap):
                continue
            for _ in scan_range(mm, rng, now_ms, cols):
                pass
        if len(cols):
            yield from ((t, q, pack(c)) for t, q, c in queue_groups(cols) if (t, q) in wanted)
        cols.clear()


def scan_ranges(
    spark: SparkSession,
    ranges: list[ByteRange],
    now_ms: int,
    index: IndexPlan | None = None,
    queue_ctx: QueueContext | None = None,
) -> list[AuditValue]:
    """Audit output of every range, parsed in tasks (one per range, :func:`audit_task`):
    per range and queue a QueuePart or packed records, and the findings and range
    summaries (:class:`mqstore.tools.spark.segscan.Row`); with ``index``, each task also
    checks the index entries of its range. A plain RDD job: the values are pickled
    by the Python workers and moved by the JVM as opaque bytes (no row conversion, no
    query plan)."""

    def task(part: Iterable[ByteRange]) -> Iterator[AuditValue]:
        return audit_task(part, now_ms, index, queue_ctx)

    rdd = spark.sparkContext.parallelize(ranges, max(1, len(ranges)))
    return rdd.mapPartitions(task).collect()


def queue_values(
    spark: SparkSession, ranges: list[ByteRange], now_ms: int, wanted: frozenset[tuple[str, int]]
) -> list[tuple[str, int, bytes]]:
    """The packed records of the ``wanted`` queues in every range (:func:`records_task`),
    for the queues whose parts the driver cannot join (tools.spark.queueparts)."""

    def task(part: Iterable[ByteRange]) -> Iterator[tuple[str, int, bytes]]:
        return records_task(part, now_ms, wanted)

    rdd = spark.sparkContext.parallelize(ranges, max(1, len(ranges)))
    return rdd.mapPartitions(task).collect()
