"""Cross-record checks on the scanned records, as Spark SQL: queue continuity, statistics,
ConsumeQueue units against the CommitLog.

Only *dispatchable* records (transaction type NOT or COMMIT; prepared and rolled-back
halves get no queue offset and no unit, rocketmq-facts 1.2/6.8) take part in continuity
and ConsumeQueue checks. When two records share a queue offset the earlier one is the
one a unit should name (RocketMQ's dispatcher skips a unit already written).

A unit is matched to a record by (topic, queue, queue offset), the unit's position in its
queue. A position with no unit and no record is consistent (a gap in the CommitLog is
reported once, as ``queue_gap``); runs of records without units are reported as one
``cq_missing`` per run, minus the queue offsets a ``cq_truncated`` file already explains.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from store.commitlog import format as fmt
from store.consumequeue import format as cqfmt
from tools.spark.layout import StoreLayout
from tools.spark.report import Finding, QueueStats

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
"""Its units carry a delivery time instead of a tag hash (rocketmq-facts 4.3)."""
MAX_PER_KIND: Final = 10_000
"""Findings collected per kind from a Spark check; beyond it one summary finding."""


class Locator:
    """Maps a physical offset to (segment file relative path, position in the file)."""

    def __init__(self, layout: StoreLayout) -> None:
        self._bases = [s.base_offset for s in layout.segments]
        self._names = [self.rel(layout, s.path) for s in layout.segments]

    @staticmethod
    def rel(layout: StoreLayout, path: str) -> str:
        """``path`` relative to the store root when below it."""
        try:
            return str(Path(path).relative_to(layout.root))
        except ValueError:
            return path

    def __call__(self, physical_offset: int) -> tuple[str, int]:
        i = max(0, bisect.bisect_right(self._bases, physical_offset) - 1)
        return self._names[i], physical_offset - self._bases[i]


def dispatchable(records: DataFrame) -> DataFrame:
    """Records that own a queue offset and a ConsumeQueue unit."""
    from pyspark.sql import functions as F

    tx = F.col("sys_flag").bitwiseAND(fmt.TRANSACTION_MASK)
    return records.where(tx.isin(fmt.TRANSACTION_NOT_TYPE, fmt.TRANSACTION_COMMIT_TYPE))


def queue_stats(records: DataFrame) -> list[QueueStats]:
    """Per topic/queue count, queue-offset range, bytes and store-time range."""
    from pyspark.sql import functions as F

    tx = F.col("sys_flag").bitwiseAND(fmt.TRANSACTION_MASK)
    disp = tx.isin(fmt.TRANSACTION_NOT_TYPE, fmt.TRANSACTION_COMMIT_TYPE)
    rows = (
        records.groupBy("topic", "queue_id")
        .agg(
            F.count(F.when(disp, 1)).alias("count"),
            F.min(F.when(disp, F.col("queue_offset"))).alias("min_qo"),
            F.max(F.when(disp, F.col("queue_offset"))).alias("max_qo"),
            F.sum("size").alias("bytes"),
            F.min("store_ts").alias("min_ts"),
            F.max("store_ts").alias("max_ts"),
            F.count(F.when(~disp, 1)).alias("not_dispatched"),
        )
        .collect()
    )
    out = [
        QueueStats(
            r.topic,
            r.queue_id,
            r["count"],
            r.min_qo if r.min_qo is not None else -1,
            r.max_qo if r.max_qo is not None else -1,
            r.bytes,
            r.min_ts,
            r.max_ts,
            r.not_dispatched,
        )
        for r in rows
    ]
    return sorted(out)


def continuity(disp: DataFrame, where: Locator, log_starts_at_zero: bool) -> list[Finding]:
    """``queue_gap`` and ``queue_duplicate`` findings per topic/queue."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("topic", "queue_id").orderBy("queue_offset", "offset")
    d = disp.select(
        "topic",
        "queue_id",
        "queue_offset",
        "offset",
        F.lag("queue_offset").over(w).alias("prev"),
    )
    first_gap = F.col("prev").isNull() & (F.col("queue_offset") > 0) & F.lit(log_starts_at_zero)
    bad = d.where(
        first_gap
        | (F.col("queue_offset") > F.col("prev") + 1)
        | (F.col("queue_offset") == F.col("prev"))
    )
    out: list[Finding] = []
    for r in bad.limit(MAX_PER_KIND).collect():
        file, pos = where(r.offset)
        q = f"{r.topic}/{r.queue_id}"
        if r.prev is not None and r.queue_offset == r.prev:
            out.append(
                Finding(file, pos, "queue_duplicate", f"{q}: queue offset {r.queue_offset} again")
            )
            continue
        lo = 0 if r.prev is None else r.prev + 1
        hi = r.queue_offset - 1
        out.append(
            Finding(
                file,
                pos,
                "queue_gap",
                f"{q}: queue offsets {lo}..{hi} ({hi - lo + 1}) missing before this record",
            )
        )
    return out


def _subtract(lo: int, hi: int, holes: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Closed range [lo, hi] minus half-open ranges ``holes``."""
    parts = [(lo, hi)]
    for h_lo, h_hi in holes:
        nxt: list[tuple[int, int]] = []
        for a, b in parts:
            if b < h_lo or a >= h_hi:
                nxt.append((a, b))
                continue
            if a < h_lo:
                nxt.append((a, h_lo - 1))
            if b >= h_hi:
                nxt.append((h_hi, b))
        parts = nxt
    return parts


def cq_against_log(
    disp: DataFrame,
    units: DataFrame,
    layout: StoreLayout,
    lost: list[tuple[str, int, int, int]],
) -> list[Finding]:
    """Every unit against the record at its queue offset, and records without units."""
    from pyspark.sql import functions as F

    key = ["topic", "queue_id", "queue_offset"]
    units = units.where(F.col("row_type") == "unit").select(
        "file", F.col("offset").alias("offset_in_file"), *key, "u_phys", "u_size", "u_tags"
    )
    recs = (
        disp.groupBy(*key)
        .agg(F.min(F.struct("offset", "size", "tags_code")).alias("r"))
        .select(*key, "r.offset", "r.size", "r.tags_code")
    )
    j = units.join(recs, key, "full_outer").persist()
    out: list[Finding] = []
    both = j.where(F.col("u_phys").isNotNull() & F.col("offset").isNotNull())
    tags_differ = (F.col("u_tags") != F.col("tags_code")) & (F.col("topic") != SCHEDULE_TOPIC)
    mismatch = both.where(
        (F.col("u_phys") != F.col("offset")) | (F.col("u_size") != F.col("size")) | tags_differ
    )
    for r in mismatch.limit(MAX_PER_KIND).collect():
        q = f"{r.topic}/{r.queue_id} queue offset {r.queue_offset}"
        if r.u_phys != r.offset:
            kind, detail = "cq_wrong_offset", f"{q}: unit offset {r.u_phys}, record at {r.offset}"
        elif r.u_size != r.size:
            kind, detail = "cq_wrong_size", f"{q}: unit size {r.u_size}, record size {r.size}"
        else:
            kind, detail = "cq_wrong_tags", f"{q}: unit tag code {r.u_tags}, record {r.tags_code}"
        out.append(Finding(r.file, r.offset_in_file, kind, detail))
    orphans = j.where(F.col("offset").isNull() & (F.col("u_phys") >= layout.min_offset)).limit(
        MAX_PER_KIND
    )
    for r in orphans.collect():
        out.append(
            Finding(
                r.file,
                r.offset_in_file,
                "cq_orphan",
                f"{r.topic}/{r.queue_id} queue offset {r.queue_offset}: unit points at"
                f" {r.u_phys} (size {r.u_size}), the CommitLog has no such message",
            )
        )
    out += _missing_runs(j, layout, lost)
    j.unpersist()
    return out


def _missing_runs(
    j: DataFrame, layout: StoreLayout, lost: list[tuple[str, int, int, int]]
) -> list[Finding]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    queues = [f"{t}\x00{q}" for t, q in layout.cq_queues]
    missing = j.where(
        F.col("u_phys").isNull()
        & F.concat_ws("\x00", "topic", F.col("queue_id").cast("string")).isin(queues)
    ).select("topic", "queue_id", "queue_offset")
    w = Window.partitionBy("topic", "queue_id").orderBy("queue_offset")
    runs = (
        missing.withColumn("grp", F.col("queue_offset") - F.row_number().over(w))
        .groupBy("topic", "queue_id", "grp")
        .agg(F.min("queue_offset").alias("lo"), F.max("queue_offset").alias("hi"))
        .limit(MAX_PER_KIND)
        .collect()
    )
    out: list[Finding] = []
    for r in runs:
        holes = [(lo, hi) for t, q, lo, hi in lost if (t, q) == (r.topic, r.queue_id)]
        for lo, hi in _subtract(r.lo, r.hi, holes):
            file = f"consumequeue/{r.topic}/{r.queue_id}/{cqfmt.file_name_for(lo)}"
            out.append(
                Finding(
                    file,
                    lo * cqfmt.UNIT_SIZE % cqfmt.FILE_SIZE,
                    "cq_missing",
                    f"{r.topic}/{r.queue_id}: no unit for queue offsets {lo}..{hi}"
                    f" ({hi - lo + 1} messages)",
                )
            )
    return out
