"""ConsumeQueue files as a DataFrame of units, read in Spark tasks.

One task per CQ file. Units are decoded with :mod:`store.consumequeue.format`; numpy is
used only to skip never-written (all-zero) units without a Python loop, which keeps a
6,000,000-byte file that holds a few units cheap. Blank pre-fill units are dropped
(they point at no message); units with a negative offset or size become findings.
Whole-file checks (length) need no task: :func:`file_findings` runs on the driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import astuple
from typing import TYPE_CHECKING, Any, Final

from store.consumequeue import format as cqfmt
from tools.spark.layout import CqFile
from tools.spark.report import Finding

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

CQ_FILE_SCHEMA: Final = (
    "path string, rel_path string, topic string, queue_id int, base_unit long, length long"
)
UNIT_SCHEMA: Final = (
    "row_type string, file string, offset long, topic string, queue_id int, queue_offset long,"
    " u_phys long, u_size int, u_tags long, kind string, detail string"
)
_BATCH: Final = 16_384


def file_findings(
    files: tuple[CqFile, ...],
) -> tuple[list[Finding], list[tuple[str, int, int, int]]]:
    """``cq_truncated`` findings and the queue-offset ranges ``[lo, hi)`` each one lost."""
    findings: list[Finding] = []
    lost: list[tuple[str, int, int, int]] = []
    for f in files:
        if f.length == cqfmt.FILE_SIZE:
            continue
        whole = f.length // cqfmt.UNIT_SIZE
        partial = f.length % cqfmt.UNIT_SIZE
        detail = f"{f.length} bytes, not {cqfmt.FILE_SIZE}"
        if partial:
            detail += f"; {partial} bytes of a partial unit at the end"
        findings.append(Finding(f.rel_path, f.length, "cq_truncated", detail))
        lost.append((f.topic, f.queue_id, f.base_unit + whole, f.base_unit + cqfmt.UNITS_PER_FILE))
    return findings, lost


def read_units(data: bytes, cq: CqFile) -> Iterator[tuple[Any, ...]]:
    """Rows (see UNIT_SCHEMA) for the non-zero, non-blank units of one file's bytes."""
    import numpy as np

    whole = len(data) // cqfmt.UNIT_SIZE
    grid = np.frombuffer(data, dtype=np.uint8, count=whole * cqfmt.UNIT_SIZE)
    used = np.flatnonzero(grid.reshape(whole, cqfmt.UNIT_SIZE).any(axis=1))
    for i in used.tolist():
        pos = i * cqfmt.UNIT_SIZE
        phys, size, tags = cqfmt.unpack_unit(data, pos)
        if phys == 0 and size == cqfmt.BLANK_SIZE and tags == 0:
            continue
        qoff = cq.base_unit + i
        if phys < 0 or size <= 0:
            yield (
                "finding",
                cq.rel_path,
                pos,
                cq.topic,
                cq.queue_id,
                qoff,
                phys,
                size,
                tags,
                "cq_bad_unit",
                f"unit for queue offset {qoff}: offset {phys}, size {size}",
            )
            continue
        yield ("unit", cq.rel_path, pos, cq.topic, cq.queue_id, qoff, phys, size, tags, None, None)


def _to_batch(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    import pyarrow as pa

    names = [c.split()[0] for c in UNIT_SCHEMA.split(",")]
    kinds = [c.split()[1] for c in UNIT_SCHEMA.split(",")]
    types = {"string": pa.string(), "long": pa.int64(), "int": pa.int32()}
    cols = list(zip(*rows, strict=True))
    arrays = [pa.array(c, type=types[k]) for c, k in zip(cols, kinds, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    rows: list[tuple[Any, ...]] = []
    for batch in batches:
        for d in batch.to_pylist():
            cq = CqFile(**d)
            with open(cq.path, "rb") as f:
                data = f.read()
            for row in read_units(data, cq):
                rows.append(row)
                if len(rows) >= _BATCH:
                    yield _to_batch(rows)
                    rows = []
    if rows:
        yield _to_batch(rows)


def units_dataframe(spark: SparkSession, files: tuple[CqFile, ...]) -> DataFrame:
    """Unit and ``cq_bad_unit`` rows of every CQ file; a few files per task."""
    rows = [astuple(f) for f in files]
    slices = max(1, min(len(rows), 4 * spark.sparkContext.defaultParallelism))
    rdd = spark.sparkContext.parallelize(rows, slices)
    return spark.createDataFrame(rdd, CQ_FILE_SCHEMA).mapInArrow(_task, UNIT_SCHEMA)
