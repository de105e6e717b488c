"""``mqstore bench commitlog``: the issue-2 CommitLog benchmark, references in the same run.

What it measures (median of 3 repetitions; within a repetition every contender runs
once, in a fixed order that keeps each pair being compared next to each other, so a
noisy episode of this 2-core VM hits both sides of a ratio):

1. ASYNC_FLUSH, one producer, 100-byte bodies with tags and keys, ``put_message``
   per message, against SQLite WAL synchronous=NORMAL (one INSERT + COMMIT per
   message), LMDB ``sync=False`` (one write transaction per message) and
   persist-queue's SQLiteQueue and file Queue (their defaults).
2. ``put_messages`` of 32 against SQLite NORMAL inserting 32 rows per COMMIT
   (``executemany``) and LMDB writing 32 records per transaction.
3. SYNC_FLUSH with 16 and 64 producer threads (rate, put latency percentiles,
   fdatasyncs/s, messages per fdatasync) against the raw group-commit ceiling of
   the disk (16 threads, plain file, one flusher) and SQLite WAL synchronous=FULL
   with 16 and 64 threads; plus the raw single-thread write + fdatasync rate.
4. Abnormal recovery with CRC checks of a 256 MiB store of 1 KiB messages
   (``--quick``: 16 MiB): MB/s (10^6 bytes) and records/s from the store's
   RecoveryResult, with the page cache warm (after a process crash) and cold; and
   the CommitLog scan alone (``recovery.scan``), since ``open`` also re-dispatches
   every scanned record to the consume queues; and "until indexed": ``open`` plus
   the wait for the index, which the reput thread rebuilds after ``open`` returns
   (``mqstore.consumequeue.catch_up``), i.e. until every key is findable again.

Everything is written under one temp directory on a real disk (``--dir``, else
``$MQSTORE_BENCH_DIR``, else the system temp dir if it is not tmpfs), removed at the
end. Progress goes to stderr; the table to stdout; ``--json FILE`` writes every
figure (schema: :data:`CONTENDER_FIELDS`, :data:`RATIO_FIELDS`).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from mqstore.tools.bench import _mqstore as mq
from mqstore.tools.bench._commitlog_plan import contenders
from mqstore.tools.bench._harness import (
    Contender,
    Run,
    interleave,
    latency_ms,
    median,
    parser,
    progress,
    run_meta,
    settle,
    work_dir,
    write_json,
)
from mqstore.tools.bench._report import format_table, write_plot

REPETITIONS = 3
FULL = {"duration": 2.5, "recovery_bytes": 256 << 20}
QUICK = {"duration": 0.3, "recovery_bytes": 16 << 20}

CONTENDER_FIELDS = ("label", "section", "durability", "messages_per_s", "reps_messages_per_s")
LATENCY_FIELDS = ("p50_ms", "p99_ms", "p999_ms", "max_ms")
SYNC_FIELDS = ("fdatasyncs_per_s", "messages_per_fdatasync")
RECOVERY_FIELDS = (
    "mb_per_s", "records_per_s", "scanned_bytes", "records", "open_mb_per_s", "ready_mb_per_s",
)  # fmt: skip
RATIO_FIELDS = (
    "title", "value", "ratio_of_medians", "numerator", "denominator", "target", "met", "reps",
)  # fmt: skip


SECTIONS = {
    "async": "1. one producer, 100-byte body + tags + keys, ack without fsync",
    "batch": "2. batches of 32 messages, ack without fsync",
    "sync": "3. acked after fdatasync: group commit",
    "recovery": "4. abnormal recovery, CRC checked, 1 KiB messages (MB = 10^6 bytes)",
}

RATIOS = (  # name, title, numerator, denominator, target (None: shown, no target)
    ("async_vs_sqlite_normal", "async put / SQLite NORMAL", "mqstore_async_1t",
     "sqlite_normal_1t", 3.0),
    ("async_proc_vs_sqlite_normal", "async put, dispatcher process / SQLite",
     "mqstore_async_1t_proc", "sqlite_normal_1t", 3.0),
    ("async_log_only_vs_sqlite_normal", "async put, log only / SQLite NORMAL",
     "mqstore_async_1t_log_only", "sqlite_normal_1t", None),
    ("async_vs_lmdb", "async put / LMDB sync=False", "mqstore_async_1t", "lmdb_1t", 1.0),
    ("async_vs_pq_sqlite", "async put / persist-queue SQLiteQueue", "mqstore_async_1t",
     "pq_sqlite_queue", None),
    ("async_vs_pq_file", "async put / persist-queue file Queue", "mqstore_async_1t",
     "pq_file_queue", None),
    ("batch32_vs_sqlite_batch32", "put_messages(32) / SQLite 32 per commit", "mqstore_batch32",
     "sqlite_normal_batch32", 1.0),
    ("batch32_vs_lmdb_batch32", "put_messages(32) / LMDB 32 per txn", "mqstore_batch32",
     "lmdb_batch32", 0.5),
    ("batch32_proc_vs_sqlite_batch32", "put_messages(32), dispatcher process / SQLite 32",
     "mqstore_batch32_proc", "sqlite_normal_batch32", 1.0),
    ("batch32_log_only_vs_sqlite_batch32", "put_messages(32), log only / SQLite 32",
     "mqstore_batch32_log_only", "sqlite_normal_batch32", None),
    ("sync16_vs_raw_ceiling16", "SYNC 16 threads / raw ceiling 16", "mqstore_sync_16t",
     "raw_group_commit_16t", 0.8),
    ("sync16_proc_vs_raw_ceiling16", "SYNC 16, dispatcher process / raw ceiling 16",
     "mqstore_sync_16t_proc", "raw_group_commit_16t", 0.8),
    ("sync16_split_vs_raw_ceiling16", "SYNC 16, dispatcher process, split CPUs / raw ceiling",
     "mqstore_sync_16t_split", "raw_group_commit_16t", 0.8),
    ("sync16_log_only_vs_raw_ceiling16", "SYNC 16, log only / raw ceiling 16",
     "mqstore_sync_16t_log_only", "raw_group_commit_16t", None),
    ("sync16_vs_sqlite_full16", "SYNC 16 threads / SQLite FULL 16", "mqstore_sync_16t",
     "sqlite_full_16t", None),
    ("sync64_vs_sqlite_full64", "SYNC 64 threads / SQLite FULL 64", "mqstore_sync_64t",
     "sqlite_full_64t", 5.0),
    ("sync64_proc_vs_sqlite_full64", "SYNC 64, dispatcher process / SQLite FULL 64",
     "mqstore_sync_64t_proc", "sqlite_full_64t", 5.0),
    ("sync64_split_vs_sqlite_full64", "SYNC 64, dispatcher process, split CPUs / SQLite FULL 64",
     "mqstore_sync_64t_split", "sqlite_full_64t", 5.0),
    ("sync64_split_vs_sqlite_full64_cpu0",
     "SYNC 64, split CPUs / SQLite FULL 64 on CPU 0", "mqstore_sync_64t_split",
     "sqlite_full_64t_cpu0", 5.0),
    ("sync64_vs_raw_ceiling16", "SYNC 64 threads / raw ceiling 16", "mqstore_sync_64t",
     "raw_group_commit_16t", None),
    ("raw_ceiling16_vs_sqlite_full16", "raw ceiling 16 / SQLite FULL 16",
     "raw_group_commit_16t", "sqlite_full_16t", None),
)  # fmt: skip
RECOVERY_TARGET_MB_S = 200.0


def summarize(c: Contender, runs: list[Run]) -> dict[str, Any]:
    """Medians over the repetitions of one contender (each figure independently)."""
    out: dict[str, Any] = {
        "label": c.label,
        "section": c.section,
        "durability": c.durability,
        "messages_per_s": median([r.rate for r in runs]),
        "reps_messages_per_s": [round(r.rate, 1) for r in runs],
        "reps_loadavg_1m": [round(r.extra.get("loadavg_1m", 0.0), 2) for r in runs],
        "reps_wall_s": [round(r.extra.get("wall_s", 0.0), 2) for r in runs],
    }
    if "dispatch_behind_bytes" in runs[0].extra:
        out["dispatch_behind_bytes"] = [r.extra["dispatch_behind_bytes"] for r in runs]
    if "end_to_end_per_s" in runs[0].extra:
        # Puts, then the wait until consume queues and index caught up: the rate a
        # producer can keep up indefinitely (dispatch may lag puts during a burst).
        out["end_to_end_per_s"] = median([r.extra["end_to_end_per_s"] for r in runs])
        out["reps_drain_seconds"] = [round(r.extra["drain_seconds"], 3) for r in runs]
    if c.kind == "sync":
        lats = [latency_ms(r.latencies_ns) for r in runs]
        for f in LATENCY_FIELDS:
            out[f] = median([x[f] for x in lats])
        counted = all("fdatasyncs" in r.extra for r in runs)  # SQLite's are not observed
        out["fdatasyncs_per_s"] = (
            median([r.extra["fdatasyncs"] / r.seconds for r in runs]) if counted else None
        )
        out["messages_per_fdatasync"] = (
            median([r.ops / max(1, r.extra["fdatasyncs"]) for r in runs]) if counted else None
        )
        if "busy_retries" in runs[0].extra:
            out["busy_retries"] = sum(r.extra["busy_retries"] for r in runs)
    if c.kind == "recovery":
        out.update(
            mb_per_s=median([r.extra["scanned_bytes"] / r.seconds / 1e6 for r in runs]),
            reps_mb_per_s=[round(r.extra["scanned_bytes"] / r.seconds / 1e6, 1) for r in runs],
            records_per_s=out.pop("messages_per_s"),
            scanned_bytes=runs[0].extra["scanned_bytes"],
            records=runs[0].ops,
            open_mb_per_s=median([r.extra["scanned_bytes"] / r.extra["open_seconds"] / 1e6
                                  for r in runs]),
            ready_mb_per_s=median([r.extra["scanned_bytes"] / r.extra["ready_seconds"] / 1e6
                                   for r in runs]),
            stop_reason=runs[0].extra["stop_reason"],
        )  # fmt: skip
        out["reps_records_per_s"] = out.pop("reps_messages_per_s")
    return out


def ratios(per: dict[str, list[Run]], summary: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every comparison. ``value`` is the median of the per-repetition ratios: each pairs
    two contenders run back to back, so a noisy episode mostly hits both sides; the
    ratio of the two medians is kept as ``ratio_of_medians``. Targets judge ``value``.
    """
    out: dict[str, Any] = {}
    for name, title, num, den, target in RATIOS:
        if num not in per or den not in per:  # split-CPU contenders need 2 CPUs
            continue
        reps = [x.rate / y.rate if y.rate else 0.0 for x, y in zip(per[num], per[den], strict=True)]
        value = median(reps)
        b = summary[den]["messages_per_s"]
        out[name] = {
            "title": title,
            "value": value,
            "ratio_of_medians": summary[num]["messages_per_s"] / b if b else 0.0,
            "numerator": num,
            "denominator": den,
            "target": target,
            "met": None if target is None else value >= target,
            "reps": [round(r, 3) for r in reps],
        }
    warm = summary["recovery_warm"]
    out["recovery_mb_per_s"] = {
        "title": "open() recovery MB/s (warm)",
        "value": warm["mb_per_s"],
        "ratio_of_medians": None,
        "numerator": "recovery_warm",
        "denominator": None,
        "target": RECOVERY_TARGET_MB_S,
        "met": warm["mb_per_s"] >= RECOVERY_TARGET_MB_S,
        "reps": warm["reps_mb_per_s"],
    }
    scan = summary["recovery_scan_only"]
    out["recovery_scan_mb_per_s"] = {
        "title": "CommitLog scan alone MB/s",
        "value": scan["mb_per_s"],
        "ratio_of_medians": None,
        "numerator": "recovery_scan_only",
        "denominator": None,
        "target": RECOVERY_TARGET_MB_S,
        "met": scan["mb_per_s"] >= RECOVERY_TARGET_MB_S,
        "reps": scan["reps_mb_per_s"],
    }
    return out


def measure(work: Path, opts: dict[str, Any], reps: int) -> tuple[dict[str, list[Run]], int]:
    """Build the recovery store, then run every contender ``reps`` times, interleaved."""
    rec_root = work / "recovery-store"
    with progress(opts["recovery_bytes"], "building recovery store") as bar:
        log_bytes = mq.build_recovery_store(rec_root, opts["recovery_bytes"], bar.update)
    settle()
    return interleave(contenders(rec_root), work, opts["duration"], reps, "benchmark"), log_bytes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Options: the CLI passes --json/--plot/--quick; --dir/--duration/--reps for experiments."""
    ap = parser("commitlog", __doc__, plot=True)
    ap.add_argument("--duration", type=float, default=None, help="seconds per contender")
    ap.add_argument("--reps", type=int, default=REPETITIONS, help="repetitions (median)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table; 0 on success (targets missed still return 0)."""
    args = parse_args(argv)
    opts = dict(QUICK if args.quick else FULL)
    if args.duration:
        opts["duration"] = args.duration
    reps = max(1, args.reps)
    t0 = time.perf_counter()
    with work_dir(args.dir, "mqstore-bench-") as work:
        meta = run_meta("commitlog", args, reps, opts["duration"], work)
        meta["recovery_target_bytes"] = opts["recovery_bytes"]
        per, log_bytes = measure(work, opts, reps)
        plan = {c.key: c for c in contenders(work)}
    meta["recovery_log_bytes"] = log_bytes
    meta["wall_seconds"] = round(time.perf_counter() - t0, 1)
    meta["loadavg_after"] = list(os.getloadavg())
    summary = {k: summarize(plan[k], runs) for k, runs in per.items()}
    result = {"benchmark": "commitlog", "meta": meta, "contenders": summary,
              "ratios": ratios(per, summary)}  # fmt: skip
    print(format_table(result, SECTIONS))
    write_json(args.json, result)
    if args.plot:
        write_plot(result, SECTIONS, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
