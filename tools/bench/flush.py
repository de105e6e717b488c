"""``mqstore bench flush``: what SYNC_FLUSH and ASYNC_FLUSH cost and what they lose.

Part 1, throughput and latency. The same workload (``put_message`` of a message with
tags and keys; bodies of 100 B and 1 KiB) under ASYNC_FLUSH and SYNC_FLUSH with 1, 4,
16 and 64 producer threads: messages/s, MB/s of bodies (10^6 bytes), put latency
p50/p99/p99.9, fdatasyncs/s and messages per fdatasync (the group-commit batch; for
ASYNC_FLUSH the periodic flusher's syncs). In the same run, interleaved with them
(each repetition runs every contender once, in the same order): SQLite WAL with
synchronous=FULL and NORMAL (one INSERT + COMMIT per message, 1 and 16 threads, each
thread its own connection), persist-queue (SQLiteQueue and file Queue, defaults, one
thread), the raw write + fdatasync rate of the disk and the raw group-commit ceiling
(16 threads). Figures are medians over the repetitions.

Part 2, durability. Many simulated power losses at random moments per mode (seeded):
four producer threads put messages into a store with small segments while the
power-loss model of :mod:`mqstore.tools.powerloss` watches every fdatasync; the power fails
after a random number of acknowledgements, inside the n-th fdatasync (before or after
it completes), inside a segment allocation, or at the end. Unsynced pages are kept,
dropped or torn at random, the store is reopened (abnormal recovery) and judged:

* **acked lost**: a put acknowledged PUT_OK before the power failed whose record is
  missing or different after recovery (SYNC_FLUSH must have none);
* **records lost**: every put written to the log (acknowledged or not) not recovered;
* **recovery problems**: the recovered log fails :func:`mqstore.tools.logcheck.check_consistency`
  (a corrupt or torn record served, queue offsets broken), or serves a record that is
  not the one put at its offset, or the reopened store refuses a put.

With ``--layer fuse`` part 2 runs on a real lower layer instead of the model: the store on
a FUSE mount that loses every write no sync covered (:mod:`mqstore.tools.lazyfs`), the
producers in a child process, the power cut at a random moment, the store reopened from
what survived (:mod:`mqstore.tools.bench._flush_fuse`). The report and the plot name the
layer each figure came from.

ASYNC_FLUSH syncs every 500 ms (``flushIntervalCommitLog``), so a cut loses what it
acknowledged since the last sync. The page-model trials put for about one flush
interval or less, so ASYNC_FLUSH loses most of what they put: the report says so with
the trials' lengths, and the plot shows the loss per trial against its length
(``--layer fuse``: against the time since the last sync).

Exit status 1 when SYNC_FLUSH lost an acknowledged message or any recovery problem was
seen (a correctness alarm), else 0. Everything is written under one temp directory on a
real disk (``--dir``, else ``$MQSTORE_BENCH_DIR``, else the system temp dir if it is
not tmpfs), removed at the end. Progress bars go to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from mqstore import FlushDiskType
from mqstore.tools.bench._flush_durability import _store_logs_captured, durability, trial
from mqstore.tools.bench._flush_fuse import durability as fuse_durability
from mqstore.tools.bench._flush_plan import (
    CDF_POINTS,
    CDF_THREADS,
    FULL,
    MODES,
    QUICK,
    SIZES,
    THREADS,
    contenders,
)
from mqstore.tools.bench._flush_report import format_report, write_plot
from mqstore.tools.bench._harness import (
    Contender,
    Run,
    interleave,
    parser,
    percentile,
    run_meta,
    work_dir,
    write_json,
)
from mqstore.tools.bench.commitlog import summarize
from mqstore.tools.lazyfs import unavailable_reason

# ------------------------------------------------------------------- matrix


def _parse_key(key: str) -> tuple[str, int, int]:
    """(family, threads, body size) of a contender key."""
    family, t, b = key.rsplit("_", 2)
    return family, int(t[:-1]), int(b[:-1])


def _cdf(latencies_ns: list[int]) -> list[list[float]]:
    s = sorted(latencies_ns)
    return [[q, percentile(s, q) / 1e6] for q in CDF_POINTS] if s else []


def describe(c: Contender, runs: list[Run]) -> dict[str, Any]:
    """commitlog's summary of one contender plus the lab's fields."""
    out = summarize(c, runs)
    family, threads, size = _parse_key(c.key)
    out.update(family=family, threads=threads, body_size=size)
    out["mb_per_s"] = out["messages_per_s"] * size / 1e6
    if family in ("async", "sync"):
        out["mode"] = "ASYNC_FLUSH" if family == "async" else "SYNC_FLUSH"
        out["fdatasyncs"] = [r.extra.get("fdatasyncs") for r in runs]
        if not any(out["fdatasyncs"]):  # no sync happened during the runs: no batch size
            out["messages_per_fdatasync"] = None
    if c.kind != "sync":  # persist-queue: no per-put timing
        out.update(p50_ms=None, p99_ms=None, p999_ms=None, max_ms=None)
        out.update(fdatasyncs_per_s=None, messages_per_fdatasync=None)
    if threads == CDF_THREADS and size == 100 and c.kind == "sync":
        out["latency_cdf_ms"] = _cdf([x for r in runs for x in r.latencies_ns])
    return out


def measure(work: Path, duration: float, reps: int) -> dict[str, list[Run]]:
    """Run every contender ``reps`` times, interleaved; directories removed as it goes."""
    return interleave(contenders(), work, duration, reps, "flush lab: throughput")


# --------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Options: the CLI passes --json/--plot/--quick; the rest are for experiments."""
    ap = parser("flush", __doc__, plot=True)
    ap.add_argument("--duration", type=float, default=None, help="seconds per contender")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (median)")
    ap.add_argument("--trials", type=int, default=None, help="power losses per mode")
    ap.add_argument("--seed", type=int, default=8, help="seed of the power-loss trials")
    ap.add_argument(
        "--layer",
        choices=("model", "fuse"),
        default="model",
        help="what the power cuts happen on: the page model (tools/powerloss.py) or the "
        "FUSE layer that loses unsynced writes (tools/lazyfs.py) (default model)",
    )
    return ap.parse_args(argv)


def _durability(work: Path, layer: str, trials: int, seed: int) -> dict[str, Any]:
    """Part 2 on the layer asked for; the model when FUSE cannot run here (said once)."""
    if layer == "fuse":
        reason = unavailable_reason()
        if reason is None:
            with _store_logs_captured() as logs:
                dur = fuse_durability(work, trials, seed)
            dur["store_log_messages"] = {"count": len(logs.messages), "first": logs.messages[:10]}
            return dur
        print(
            f"mqstore bench flush: the FUSE layer is unavailable ({reason}); "
            "power cuts on the page model instead",
            file=sys.stderr,
        )
    dur = durability(work, trials, seed)
    dur["layer"] = "model"
    return dur


def _verdict(dur: dict[str, Any]) -> tuple[str, bool]:
    """(verdict line, alarm): alarm if SYNC_FLUSH lost an acked message or a recovery
    served something wrong."""
    sync_lost = dur[FlushDiskType.SYNC_FLUSH.value]["acked_lost"]
    problems = sum(dur[m.value]["recovery_problems"] for m in MODES)
    alarm = sync_lost > 0 or problems > 0
    verdict = (
        f"ALARM: SYNC_FLUSH lost {sync_lost} acknowledged messages, {problems} recovery problems"
        if alarm
        else "OK: SYNC_FLUSH lost no acknowledged message; every recovery served only "
        "intact records"
    )
    return verdict, alarm


def main(argv: list[str] | None = None) -> int:
    """Run the lab; print the table; 1 if SYNC_FLUSH lost an acked message or a
    recovery served something wrong, else 0."""
    args = parse_args(argv)
    opts = dict(QUICK if args.quick else FULL)
    for name in ("duration", "reps", "trials"):
        if getattr(args, name) is not None:
            opts[name] = getattr(args, name)
    reps = max(1, int(opts["reps"]))
    t0 = time.perf_counter()
    with work_dir(args.dir, "mqstore-flush-") as work:
        meta = run_meta("flush", args, reps, float(opts["duration"]), work)
        meta.update(trials_per_mode=opts["trials"], seed=args.seed, quick=args.quick)
        per = measure(work, float(opts["duration"]), reps)
        dur = _durability(work, args.layer, int(opts["trials"]), args.seed)
    meta["wall_seconds"] = round(time.perf_counter() - t0, 1)
    meta["loadavg_after"] = list(os.getloadavg())
    plan = {c.key: c for c in contenders()}
    summary = {k: describe(plan[k], runs) for k, runs in per.items()}
    verdict, alarm = _verdict(dur)
    result = {
        "benchmark": "flush",
        "meta": meta,
        "contenders": summary,
        "durability": dur,
        "verdict": verdict,
        "alarm": alarm,
    }
    print(format_report(result))
    write_json(args.json, result)
    if args.plot:
        write_plot(result, args.plot)
    return 1 if alarm else 0


__all__ = [
    "FULL",
    "MODES",
    "QUICK",
    "SIZES",
    "THREADS",
    "contenders",
    "describe",
    "durability",
    "format_report",
    "main",
    "measure",
    "parse_args",
    "trial",
    "write_plot",
]

if __name__ == "__main__":
    raise SystemExit(main())
