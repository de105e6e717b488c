"""``mqstore audit DIR``: check every record of a store with Spark, report what is wrong.

Usage::

    mqstore audit DIR [--master URL] [--report FILE.json] [--strict]
    python -m mqstore.tools.spark.audit DIR [...]      spark-submit tools/spark/audit.py DIR [...]

Exit status: 0 clean (warnings allowed, counted in the summary line), 1 problems found
(with ``--strict``, warnings too), 2 usage or I/O error. The JSON report's schema and
every finding kind's severity: docs/audit.md.

What is checked (finding kinds are listed in :mod:`mqstore.tools.spark.report`):

1. every record of every segment, in parallel tasks (:mod:`mqstore.tools.spark.segscan`): magic,
   TOTALSIZE against the recomputed length, body CRC, PHYSICALOFFSET against the
   position, blank end-of-file records followed by zeros, store timestamps plausible and
   non-decreasing per file, and the header fields the CRC does not cover (reconsume
   times, prepared offset, SYSFLAG bits, hosts, born and store times:
   :mod:`mqstore.tools.spark.headercheck`); a torn tail of the last segment is reported once;
2. the segment series: equal sizes, names one segment size apart;
3. per topic/queue queue-offset continuity (gaps, duplicates) and statistics;
4. ConsumeQueue files: length, and every unit against the CommitLog (offset, size, tag
   code); records without units where the queue has a CQ directory;
5. the checkpoint: no timestamp after the newest record (+3 s, RocketMQ's slack);
6. index files (``index/``): header, slot and chain consistency per file, and every
   used entry against the record at its physical offset (key hash, time diff), every
   entry linked once, and every keyed record in the files' span against its entries, see
   :mod:`mqstore.tools.spark.indexcheck`; skipped (noted in ``checks``) without ``index/``;
7. the ranges recovery fenced off as damaged (``damage.json``,
   :mod:`mqstore.commitlog.recovery_damage`): one ``fenced_damage`` finding each (file and
   position of its start, log range, reason); and segments that hold bytes but not one
   valid record are a ``no_valid_record`` finding, never CLEAN.

A store whose broker is running (or did not close cleanly) is judged at a cut taken
before anything else is read: what the dispatcher had handled; the in-flight tail past it
is named in the report, never reported as damage (:mod:`mqstore.tools.spark.livecut`).

Design: one Spark job of one stage, no shuffle. Segment byte ranges are read in tasks
(each mmaps its file and reads it with the bulk scanner, :mod:`mqstore.commitlog.bulk`);
each task checks its records, per (topic, queue), against the ConsumeQueue units at their
queue offsets and sends the driver a small summary per queue; the driver joins a queue's
summaries and reads its files for the units no record owns
(:mod:`mqstore.tools.spark.queueparts`). A queue offset whose records lie in two ranges
is the one case the summaries cannot settle: such a queue's records are read again by a
second job and checked on the driver (:mod:`mqstore.tools.spark.queues`). The index is
checked by the same scan tasks: each reads the index entries that point into its range
and looks them up in its own records (keys hashed in the same pass; no second parse, no
join), and checks the header and chains of the index files assigned to it
(:mod:`mqstore.tools.spark.indexcheck`). No per-record value leaves a task: only
findings, the queue summaries and range summaries come back to the driver; findings are
capped per kind with a count, so any damage gives a report of bounded size. A task that
cannot read a store file ends the run with exit 2 and one line naming the path: every
Spark worker must see the store at the same path as the driver.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if not __package__:  # run as a script: spark-submit tools/spark/audit.py DIR
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mqstore.tools.spark import cqscan, headercheck, indexcheck, livecut, queueparts, queues
from mqstore.tools.spark._cli import check_output_file, run
from mqstore.tools.spark.layout import (
    StoreLayout,
    add_geometry_args,
    discover,
    geometry_flags,
)
from mqstore.tools.spark.queueparts import QueuePart
from mqstore.tools.spark.reader import balanced_split, plan_ranges
from mqstore.tools.spark.report import AuditReport, Cut, Finding, QueueStats
from mqstore.tools.spark.segscan import Row, RowType
from mqstore.tools.spark.session import master_url
from mqstore.tools.spark.tasks import queue_values, scan_ranges

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession


JVM_WORK = False
"""The JVM does not work through the data: the checks run in the Python tasks, the JVM
schedules them and collects their small results (the session's JVM options follow it:
:func:`mqstore.tools.spark.session.quick_start`)."""


def _segment_series(layout: StoreLayout) -> list[Finding]:
    """Segments one size apart, each that long (the last may be shorter only if torn)."""
    out: list[Finding] = []
    size = layout.segment_size
    segs = layout.segments
    for i, seg in enumerate(segs):
        name = queues.rel_name(layout, seg.path)
        if size and seg.base_offset % size:
            out.append(Finding(name, 0, "segment_size", f"start not a multiple of {size}"))
        if i + 1 < len(segs):
            if segs[i + 1].base_offset != seg.base_offset + size:
                detail = f"next segment starts at {segs[i + 1].base_offset}"
                out.append(Finding(name, 0, "segment_size", detail))
            if seg.length != size:
                out.append(Finding(name, 0, "segment_size", f"{seg.length} bytes, not {size}"))
    return out


def _read_checkpoint(layout: StoreLayout) -> dict[str, int] | None:
    """The checkpoint's timestamps, read through store.checkpoint on a private copy (it
    maps read-write); None without one. Read before the scan: a live broker moves it."""
    if layout.checkpoint is None:
        return None
    from mqstore.checkpoint import Checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "checkpoint"
        shutil.copyfile(layout.checkpoint, copy)
        cp = Checkpoint(copy)
        fields = {
            "physicMsgTimestamp": cp.physic_msg_timestamp,
            "logicsMsgTimestamp": cp.logics_msg_timestamp,
            "indexMsgTimestamp": cp.index_msg_timestamp,
        }
        cp.close()
    return fields


def _checkpoint(
    layout: StoreLayout, fields: dict[str, int] | None, newest: int | None
) -> list[Finding]:
    """``checkpoint_ahead`` for each timestamp after the newest record seen (+3 s)."""
    from mqstore.checkpoint import MIN_TIMESTAMP_SLACK_MS

    if fields is None:
        return []
    limit = (newest or 0) + MIN_TIMESTAMP_SLACK_MS
    rel = queues.rel_name(layout, str(layout.checkpoint))
    out = [
        Finding(rel, pos, "checkpoint_ahead", f"{name} {value} > newest store timestamp {newest}")
        for pos, (name, value) in zip((0, 8, 16), fields.items(), strict=True)
        if value > limit
    ]
    return out


def _collect(rows: list[Row], layout: StoreLayout) -> tuple[list[Finding], int]:
    """Findings and the record count from the scan's finding and range rows; checks
    store-time order across the ranges of one file."""
    by_name = {s.name: queues.rel_name(layout, s.path) for s in layout.segments}
    found: list[Finding] = []
    ranges: dict[str, list[Row]] = {}
    for r in rows:
        file = r.file or ""
        if r.row_type == RowType.FINDING.value:
            found.append(Finding(by_name.get(file, file), r.offset, r.kind or "", r.detail or ""))
        elif r.row_type == RowType.RANGE.value:
            ranges.setdefault(file, []).append(r)
    for name, rs in ranges.items():
        rs.sort(key=lambda x: x.offset)
        for a, b in itertools.pairwise(rs):
            last, first = a.last_ts, b.first_ts
            if last is not None and first is not None and first < last:
                detail = f"store timestamp {first} < previous record's {last}"
                found.append(
                    Finding(by_name.get(name, name), b.offset, "timestamp_regression", detail)
                )
    records = sum(r.count or 0 for rs in ranges.values() for r in rs)
    in_order = [(s.name, r.edges or ()) for s in layout.segments for r in ranges.get(s.name, [])]
    for name, (at, kind, detail) in headercheck.edge_outliers(in_order):
        found.append(Finding(by_name.get(name, name), at, kind, detail))
    return found, records


def _queue_checks(
    spark: SparkSession,
    layout: StoreLayout,
    split_bytes: int | None,
    ctx: queues.QueueContext,
    index: tuple[indexcheck.Geometry, list[Path]] | None = None,
    announce: Callable[[str], None] | None = None,
    cut: Cut | None = None,
) -> tuple[list[Row], list[Finding], list[QueueStats]]:
    """The segment scan (tools.spark.tasks.scan_ranges): its finding and range rows,
    and the per-queue findings and statistics from the queue parts it sent
    (tools.spark.queueparts); the queues the parts cannot settle are checked from their
    records, read by a second job. With ``index`` (geometry, files), the scan tasks also
    check the index entries (tools.spark.indexcheck.IndexPlan). ``announce`` is handed
    the plan (segments, bytes, ranges, queue files) before the job starts; with ``cut``
    (a live store, tools.spark.livecut) only what lies below it is read and judged."""
    split = split_bytes or balanced_split(layout, spark.sparkContext.defaultParallelism)
    ranges = plan_ranges(layout, split)
    at = None
    if cut is not None:
        ranges, at = livecut.clip(ranges, cut), cut.log_end
    iplan = indexcheck.plan(layout, ranges, *index, cut=at) if index else None
    if announce is not None:
        announce(
            f"audit: {len(layout.segments)} segments, {layout.total_bytes / 2**20:.1f} MiB,"
            f" {len(ranges)} ranges, {len(layout.cq_files)} ConsumeQueue files"
        )
    now = int(time.time() * 1000)
    out = scan_ranges(spark, ranges, now, iplan, ctx)
    rows = [r for r in out if isinstance(r, Row)]
    parts = [r for r in out if isinstance(r, QueuePart)]
    packed = [r for r in out if not isinstance(r, (Row, QueuePart))]
    found, stats, redo = queueparts.check_all(parts, packed, ctx, layout.cq_queues)
    if redo:
        f, s = queues.check_queues(queue_values(spark, ranges, now, redo), ctx, redo)
        found, stats = found + f, stats + s
    return rows, found, stats


def audit_with(
    spark: SparkSession,
    layout: StoreLayout,
    *,
    split_bytes: int | None = None,
    index_slots: int | None = None,
    index_num: int | None = None,
    announce: Callable[[str], None] | None = None,
) -> AuditReport:
    """Run every check of the module doc on ``layout`` with an existing session.

    ``index_slots``/``index_num``: the index geometry (see tools.spark.indexcheck);
    ``announce``: handed one line with the job's plan before it starts."""
    t0 = time.perf_counter()
    cut = livecut.take(layout)  # before anything else is read: the broker moves on
    cp_fields = _read_checkpoint(layout)
    cq_found, lost = cqscan.file_findings(layout.cq_files, layout.cq_file_size)
    ctx = queues.QueueContext.of(layout, lost, cut.log_end if cut else 1 << 62)
    ifiles = indexcheck.index_files(layout.index_dir)
    shown = layout.index_geometry() or (index_slots, index_num)
    geo = indexcheck.resolve_geometry(ifiles, *shown) if ifiles else None
    index = (geo, ifiles) if geo is not None else None
    rows, q_found, stats = _queue_checks(spark, layout, split_bytes, ctx, index, announce, cut)
    findings, n_records = _collect(rows, layout)
    findings += q_found
    stats.sort()
    findings += cq_found + _segment_series(layout)
    findings += _damage_findings(layout, n_records, findings)
    state = {"records": "checked", "queue offsets": "checked"}
    state["consumequeue"] = (
        f"checked ({len(layout.cq_queues)} queues)"
        if layout.cq_queues
        else "skipped (no consumequeue/)"
    )
    newest = max((q.max_store_timestamp for q in stats), default=None)
    if cut is not None:
        tail = livecut.walk_tail(layout, cut)
        if tail.newest_ts is not None:
            newest = max(newest or 0, tail.newest_ts)
        state["cut"] = (
            f"live store judged up to log offset {cut.log_end} ({cut.reason}); in-flight"
            f" tail left out: {tail.records} records, {tail.bytes} bytes from"
            f" {cut.tail_file}@{cut.tail_offset}"
        )
    findings += _checkpoint(layout, cp_fields, newest)
    state["checkpoint"] = "checked" if cp_fields is not None else "skipped (no checkpoint file)"
    state["geometry"] = _geometry_state(layout)
    if geo is not None:
        findings += indexcheck.order_findings(layout, geo, ifiles)
        state["index"] = f"checked ({len(ifiles)} files, {geo.slots} slots x {geo.num} entries)"
    else:
        state["index"] = "skipped (no index/ files)"
    return AuditReport(
        store=str(layout.root),
        segments=len(layout.segments),
        segment_size=layout.segment_size,
        records=n_records,
        bytes=layout.total_bytes,
        findings=sorted(findings),
        queues=stats,
        checks=state,
        checkpoint=cp_fields,
        master=master_url(spark),
        elapsed_s=time.perf_counter() - t0,
        cut=cut,
    )


def _damage_findings(layout: StoreLayout, records: int, found: list[Finding]) -> list[Finding]:
    """``fenced_damage`` per range in the store's damage list; ``no_valid_record`` when
    the segments hold something (a finding or a fenced range) but no valid record."""
    from mqstore.commitlog.recovery_damage import read_ranges

    ranges = read_ranges(layout.root)
    if not ranges and layout.commitlog_dir == layout.root:  # DIR is the segments' directory
        ranges = read_ranges(layout.root.parent)
    out: list[Finding] = []
    for r in ranges:
        seg = next((s for s in layout.segments if s.base_offset <= r.start < s.base_offset
                    + max(s.length, layout.segment_size)), None)  # fmt: skip
        name = queues.rel_name(layout, seg.path) if seg is not None else "commitlog"
        at = r.start - seg.base_offset if seg is not None else r.start
        detail = (
            f"log bytes [{r.start}, {r.end}) fenced off by recovery ({r.size} bytes, at "
            f"least {r.messages_lost} messages lost): {r.reason}"
        )
        out.append(Finding(name, at, "fenced_damage", detail))
    names = {queues.rel_name(layout, s.path) for s in layout.segments}
    if records == 0 and (out or any(f.file in names for f in found)):
        first = min(names, default="commitlog")
        out.append(Finding(first, 0, "no_valid_record", "the segments hold no valid record"))
    return out


def _geometry_state(layout: StoreLayout) -> str:
    """The geometry the checks used and where each size came from (mqstore.geometry)."""
    if layout.geometry is None:
        return "RocketMQ's defaults"
    note = f"; {layout.geometry_note}" if layout.geometry_note else ""
    return layout.geometry.describe() + note


def run_audit(
    store_dir: str | Path,
    master: str | None = None,
    report: str | Path | None = None,
    *,
    progress: bool = False,
    split_bytes: int | None = None,
    index_slots: int | None = None,
    index_num: int | None = None,
    geometry_flags: dict[str, int | None] | None = None,
    broker_config: str | None = None,
    strict: bool = False,
) -> AuditReport:
    """Audit ``store_dir``; write the JSON report to ``report`` if given (``strict``:
    warnings fail the exit code too).

    The store's geometry comes from its files, else ``broker_config``, else
    ``geometry_flags`` (``mqstore.geometry``); the report says which.

    Reuses an active SparkSession (tests), else builds one for ``master``. ``progress``:
    Spark's stage progress and the job's plan on stderr (the command line's view).

    Raises:
        LayoutError: ``store_dir`` is not a store.
        ConfigError: ``report`` cannot be written (checked first).
        OSError: a file cannot be read or the report cannot be written.
    """
    from mqstore.tools.spark.session import build_session

    if report is not None:  # before the work: a run is not lost to its last write
        check_output_file(report, "--report")
    layout = discover(store_dir, flags=geometry_flags, broker_config=broker_config)
    spark = build_session(
        master,
        "mqstore-audit",
        progress=progress,
        input_bytes=layout.data_bytes(),
        jvm_work=JVM_WORK,
    )
    result = audit_with(
        spark,
        layout,
        split_bytes=split_bytes,
        index_slots=index_slots,
        index_num=index_num,
        announce=_to_stderr if progress else None,
    )
    result.strict = strict
    if report is not None:
        result.write_json(report)
    return result


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    """Arguments of ``mqstore audit``."""
    p = argparse.ArgumentParser(prog="mqstore audit", description=__doc__.splitlines()[0])
    p.add_argument("dir", help="store root (with commitlog/) or a directory of segments")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--report", default=None, metavar="FILE.json", help="write every finding")
    p.add_argument("--strict", action="store_true", help="warnings fail the audit too (exit 1)")
    p.add_argument(
        "--split-mib", type=int, default=None,
        help="split segments larger than this into ranges (default: the data shared out over"
        " the task slots, at least 128)",
    )  # fmt: skip
    add_geometry_args(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """CLI entry: 0 clean, 1 problems found, 2 usage or I/O error."""
    out = run(
        build_parser(),
        argv,
        "mqstore audit",
        lambda args: (
            run_audit(
                args.dir,
                args.master,
                args.report,
                progress=True,
                split_bytes=args.split_mib << 20 if args.split_mib else None,
                index_slots=args.index_slots,
                index_num=args.index_num,
                geometry_flags=geometry_flags(args),
                broker_config=args.broker_config,
                strict=args.strict,
            ),
            args.report,
        ),
    )
    if isinstance(out, int):
        return out
    result, report = out
    print(result.summary())
    if report:
        print(f"report written to {report}")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
