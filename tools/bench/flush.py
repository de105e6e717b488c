"""``mqstore bench flush``: the sync vs async flush lab (issue 8).

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
power-loss model of :mod:`tools.powerloss` watches every fdatasync; the power fails
after a random number of acknowledgements, inside the n-th fdatasync (before or after
it completes), inside a segment allocation, or at the end. Unsynced pages are kept,
dropped or torn at random, the store is reopened (abnormal recovery) and judged:

* **acked lost**: a put acknowledged PUT_OK before the power failed whose record is
  missing or different after recovery (SYNC_FLUSH must have none);
* **records lost**: every put written to the log (acknowledged or not) not recovered;
* **recovery problems**: the recovered log fails :func:`tools.logcheck.check_consistency`
  (a corrupt or torn record served, queue offsets broken), or serves a record that is
  not the one put at its offset, or the reopened store refuses a put.

Exit status 1 when SYNC_FLUSH lost an acknowledged message or any recovery problem was
seen (a correctness alarm), else 0. Everything is written under one temp directory on a
real disk (``--dir``, else ``$MQSTORE_BENCH_DIR``, else the system temp dir if it is
not tmpfs), removed at the end. Progress bars go to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import platform
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store import FlushDiskType, Message, MessageStore, PutStatus, StoreConfig
from tools.bench import _mqstore as mq
from tools.bench import _references as ref
from tools.bench._harness import Run, fs_type, percentile, pick_base_dir, settle
from tools.bench._workload import items
from tools.bench.commitlog import Contender, _progress, summarize
from tools.logcheck import check_consistency, scan_log
from tools.powerloss import DiskModel, power_loss

MODES = (FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH)
THREADS = (1, 4, 16, 64)
SQLITE_THREADS = (1, 16)
SIZES = (100, 1024)
FULL = {"duration": 1.0, "reps": 3, "trials": 100}
QUICK = {"duration": 0.25, "reps": 1, "trials": 10}
CDF_THREADS = 16
CDF_POINTS = (
    [float(q) for q in range(0, 90, 2)]
    + [90 + q / 2 for q in range(0, 19)]
    + [99.5, 99.7, 99.9, 99.95, 99.99, 100.0]
)

NO_FSYNC = "page cache (no fsync per ack)"
FSYNC = "fdatasync before ack"
DURABILITY = {
    FlushDiskType.ASYNC_FLUSH: NO_FSYNC + "; flusher every 500 ms (default)",
    FlushDiskType.SYNC_FLUSH: FSYNC + " (group commit)",
}

# Durability trials: small files so every trial rolls segments and the model's
# per-sync snapshots stay cheap; store defaults otherwise (ASYNC flushes every 500 ms).
TRIAL_THREADS = 4
TRIAL_PER_THREAD = 120
TRIAL_FILE_SIZE = 32 * 1024
CRASH_KINDS = ("acks", "acks", "acks", "before_fdatasync", "after_fdatasync", "before_allocate")


# ------------------------------------------------------------------- matrix


def _key(mode_or_ref: str, threads: int, size: int) -> str:
    return f"{mode_or_ref}_{threads}t_{size}b"


def contenders() -> list[Contender]:
    """Everything part 1 measures, in the order each repetition runs it."""
    p = functools.partial
    plan: list[Contender] = []
    for size in SIZES:
        pool = items(size)
        for n in THREADS:
            for mode in MODES:
                short = "async" if mode is FlushDiskType.ASYNC_FLUSH else "sync"
                plan.append(
                    Contender(
                        _key(short, n, size),
                        f"mqstore {mode.value}, {n} thr, {size} B",
                        short,
                        DURABILITY[mode],
                        p(mq.put_threads, pool=pool, n_threads=n, flush=mode),
                        "sync",
                    )
                )
            if n in SQLITE_THREADS:
                for sync in ("FULL", "NORMAL"):
                    plan.append(
                        Contender(
                            _key(f"sqlite_{sync.lower()}", n, size),
                            f"SQLite WAL {sync}, {n} thr, {size} B",
                            f"sqlite_{sync.lower()}",
                            FSYNC if sync == "FULL" else NO_FSYNC + "; WAL synced at checkpoints",
                            p(ref.sqlite_threads, items=pool, n_threads=n, synchronous=sync),
                            "sync",
                        )
                    )
        plan.append(
            Contender(
                _key("pq_sqlite_queue", 1, size),
                f"persist-queue SQLiteQueue, 1 thr, {size} B",
                "persist_queue",
                "WAL, synchronous=FULL default: fsync per put",
                p(ref.persist_queue, items=pool, kind="sqlite"),
            )
        )
        plan.append(
            Contender(
                _key("pq_file_queue", 1, size),
                f"persist-queue file Queue, 1 thr, {size} B",
                "persist_queue",
                "fsync every 100 puts (chunk full), info file without fsync",
                p(ref.persist_queue, items=pool, kind="file"),
            )
        )
    plan.append(
        Contender(
            _key("raw_fdatasync", 1, 100),
            "raw pwrite + fdatasync, 1 thr, 100 B",
            "raw",
            FSYNC,
            ref.raw_single,
            "sync",
        )
    )
    plan.append(
        Contender(
            _key("raw_group_commit", 16, 100),
            "raw group-commit ceiling, 16 thr, 100 B",
            "raw",
            FSYNC,
            p(ref.raw_group_commit, n_threads=16),
            "sync",
        )
    )
    return plan


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
    plan = contenders()
    per: dict[str, list[Run]] = {c.key: [] for c in plan}
    with _progress(reps * len(plan), "flush lab: throughput") as bar:
        for rep in range(reps):
            for c in plan:
                bar.set_description(f"rep {rep + 1}/{reps} {c.key}")
                d = work / f"{c.key}-{rep}"
                d.mkdir()
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                try:
                    run = c.run(d, duration)
                    run.extra["loadavg_1m"] = load
                    per[c.key].append(run)
                finally:
                    shutil.rmtree(d, ignore_errors=True)
                    settle()
                run.extra["wall_s"] = time.perf_counter() - t0
                bar.update(1)
    return per


# --------------------------------------------------------------- durability


def _trial_config(root: Path, mode: FlushDiskType) -> StoreConfig:
    return StoreConfig(
        root_dir=root,
        flush_disk_type=mode,
        commitlog_file_size=TRIAL_FILE_SIZE,
        mapped_file_size_consume_queue=1024 * 20,
        message_index_enable=False,  # the CommitLog is what the trial judges
        sync_flush_timeout_ms=3000,
    )


def _body(rng: random.Random, tid: int, seq: int) -> bytes:
    head = f"t{tid}-s{seq}-".encode()
    return head + rng.randbytes(rng.randrange(60, 600))


def _produce(
    store: MessageStore, model: DiskModel, seed: int, cut_after: int | None
) -> list[tuple[int, bytes, bool]]:
    """Producer threads until done or the power fails: (offset, body, acked) per stored put."""
    puts: list[tuple[int, bytes, bool]] = []
    lock = threading.Lock()
    acks = [0]
    errors: list[BaseException] = []

    def worker(tid: int) -> None:
        rng = random.Random(f"{seed}:{tid}")
        try:
            for seq in range(TRIAL_PER_THREAD):
                if model.crashed.is_set():
                    return
                body = _body(rng, tid, seq)
                r = store.put_message(Message("FlushLab", body, tags=f"T{tid}", keys=[f"k{seq}"]))
                acked = r.status is PutStatus.PUT_OK and not model.crashed.is_set()
                with lock:
                    if r.status.stored:
                        puts.append((r.physical_offset, body, acked))
                    acks[0] += acked
                    due = cut_after is not None and acks[0] >= cut_after
                if due:
                    model.cut(f"after {cut_after} acks")
                if not r.status.stored:
                    return
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(TRIAL_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return puts


def trial(root: Path, mode: FlushDiskType, seed: int) -> dict[str, Any]:
    """One power loss at a random moment; what the reopened store lost or got wrong."""
    rng = random.Random(seed)
    cfg = _trial_config(root, mode)
    model = DiskModel(root)
    kind = rng.choice(CRASH_KINDS)
    cut_after = None
    if kind == "acks":
        cut_after = rng.randrange(1, TRIAL_THREADS * TRIAL_PER_THREAD)
    elif kind == "before_allocate":
        model.crash_at(kind, rng.randrange(1, 4))
    else:
        model.crash_at(kind, rng.randrange(1, 40))
    puts: list[tuple[int, bytes, bool]] = []
    image = None
    with model.installed():
        try:
            store = MessageStore.open(cfg)
        except OSError:  # the power failed while the store was opening
            store = None
        if store is not None:
            puts = _produce(store, model, seed, cut_after)
            image = store.abandon()
    loss = power_loss(image, rng, model)

    problems: list[str] = []
    store = MessageStore.open(cfg)
    try:
        problems += check_consistency(root, TRIAL_FILE_SIZE, end=store.max_physical_offset)
        log = scan_log(root, TRIAL_FILE_SIZE)
        put_at = {off: body for off, body, _a in puts}
        for off, _r in log.records:
            if log.bodies.get(off) != put_at.get(off):
                problems.append(f"record at {off} is not the message put there")
        acked_lost = sum(1 for off, b, a in puts if a and log.bodies.get(off) != b)
        lost = sum(1 for off, b, _a in puts if log.bodies.get(off) != b)
        after = store.put_message(Message("FlushLab", b"after recovery"))
        if after.status is not PutStatus.PUT_OK:
            problems.append(f"put after recovery returned {after.status}")
        recovery = store.recovery
        recovery_mode = recovery.mode.value if recovery is not None else "?"
    finally:
        store.close()
    return {
        "seed": seed,
        "crash": loss.reason,
        "puts_stored": len(puts),
        "acked": sum(1 for p in puts if p[2]),
        "acked_lost": acked_lost,
        "records_lost": lost,
        "recovered": len(log.records),
        "problems": problems[:5],
        "pages_kept": loss.kept,
        "pages_dropped": loss.dropped,
        "pages_torn": loss.torn,
        "abort_lost": loss.abort_lost,
        "recovery_mode": recovery_mode,
    }


class _Captured(logging.Handler):
    """Keeps the store's log records (the simulated EIO makes its threads log errors)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}")


@contextlib.contextmanager
def _store_logs_captured() -> Iterator[_Captured]:
    """Route the ``store`` and ``mqstore`` loggers into a list instead of stderr."""
    handler = _Captured()
    loggers = [logging.getLogger(name) for name in ("store", "mqstore")]
    saved = [lg.propagate for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.propagate = False
    try:
        yield handler
    finally:
        for lg, prop in zip(loggers, saved, strict=True):
            lg.removeHandler(handler)
            lg.propagate = prop


def durability(work: Path, n_trials: int, seed: int) -> dict[str, Any]:
    """``n_trials`` power losses per mode (modes interleaved), summed per mode."""
    out: dict[str, Any] = {}
    trials: dict[str, list[dict[str, Any]]] = {m.value: [] for m in MODES}
    with (
        _progress(n_trials * len(MODES), "flush lab: power losses") as bar,
        _store_logs_captured() as logs,
    ):
        for i in range(n_trials):
            for mode in MODES:
                d = work / f"trial-{mode.value}-{i}"
                d.mkdir()
                try:
                    trials[mode.value].append(trial(d / "store", mode, seed * 1000 + i))
                finally:
                    shutil.rmtree(d, ignore_errors=True)
                bar.update(1)
    for mode in MODES:
        ts = trials[mode.value]
        out[mode.value] = {
            "durability": DURABILITY[mode],
            "trials": len(ts),
            "acked": sum(t["acked"] for t in ts),
            "acked_lost": sum(t["acked_lost"] for t in ts),
            "trials_with_acked_lost": sum(1 for t in ts if t["acked_lost"]),
            "puts_stored": sum(t["puts_stored"] for t in ts),
            "records_lost": sum(t["records_lost"] for t in ts),
            "recovery_problems": sum(len(t["problems"]) for t in ts),
            "pages_kept": sum(t["pages_kept"] for t in ts),
            "pages_dropped": sum(t["pages_dropped"] for t in ts),
            "pages_torn": sum(t["pages_torn"] for t in ts),
            "abort_lost": sum(1 for t in ts if t["abort_lost"]),
            "per_trial": ts,
        }
    out["store_log_messages"] = {  # expected: threads hitting the simulated EIO
        "count": len(logs.messages),
        "first": logs.messages[:10],
    }
    return out


# ------------------------------------------------------------------- output


def _f(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def format_report(result: dict[str, Any]) -> str:
    """The human-readable report: one section per part."""
    meta = result["meta"]
    lb, la = meta["loadavg_before"], meta["loadavg_after"]
    lines = [
        f"mqstore bench flush: {meta['cpu_count']} CPUs, {meta['fs_type']} at {meta['dir']}; "
        f"load average {lb[0]:.2f} {lb[1]:.2f} {lb[2]:.2f} -> {la[0]:.2f} {la[1]:.2f} "
        f"{la[2]:.2f}; {meta['wall_seconds']:g} s wall",
        "",
        f"1. put throughput and latency: median of {meta['repetitions']} interleaved "
        f"repetitions, {meta['duration_s']:g} s per contender (MB = 10^6 body bytes)",
        f"  {'contender':<42}{'msgs/s':>9}{'MB/s':>7}{'p50 ms':>8}{'p99 ms':>8}"
        f"{'p99.9ms':>8}{'fsync/s':>9}{'msg/sync':>9}",
    ]
    size = None
    for c in result["contenders"].values():
        if c["body_size"] != size and c["section"] != "raw":
            size = c["body_size"]
            lines.append(f"  -- {size} B bodies")
        elif c["section"] == "raw" and size != "raw":
            size = "raw"
            lines.append("  -- raw disk (100-byte records, no encoding)")
        lines.append(
            f"  {c['label']:<42}{c['messages_per_s']:>9,.0f}{c['mb_per_s']:>7.1f}"
            f"{_f(c['p50_ms'], '.2f'):>8}{_f(c['p99_ms'], '.2f'):>8}{_f(c['p999_ms'], '.2f'):>8}"
            f"{_f(c['fdatasyncs_per_s'], ',.0f'):>9}{_f(c['messages_per_fdatasync'], '.1f'):>9}"
        )
    lines += [
        "  fsync/s and msg/sync: the store's own flusher count (ASYNC: its periodic syncs);",
        "  not observable for SQLite and persist-queue ('-').",
        "",
        f"2. durability: simulated power losses at random moments, seed {meta['seed']}, "
        f"{TRIAL_THREADS} producer threads, {TRIAL_FILE_SIZE // 1024} KiB segments",
        f"  {'mode':<13}{'trials':>7}{'acked':>8}{'ACKED LOST':>11}{'(trials)':>9}"
        f"{'stored':>8}{'lost':>7}{'problems':>9}  pages kept/dropped/torn, abort lost",
    ]
    for mode in (m.value for m in MODES):
        d = result["durability"][mode]
        lines.append(
            f"  {mode:<13}{d['trials']:>7}{d['acked']:>8}{d['acked_lost']:>11}"
            f"{d['trials_with_acked_lost']:>9}{d['puts_stored']:>8}{d['records_lost']:>7}"
            f"{d['recovery_problems']:>9}  {d['pages_kept']}/{d['pages_dropped']}/"
            f"{d['pages_torn']}, {d['abort_lost']}"
        )
    lines += [
        "  acked lost: PUT_OK before the power failed, missing or different after recovery;",
        "  lost: every put written to the log and not recovered; problems: corrupt record",
        "  served, wrong record at an offset, inconsistent log, put refused after reopen.",
        f"  store log messages during the trials (simulated EIO, kept in the JSON): "
        f"{result['durability']['store_log_messages']['count']}",
        "",
        f"verdict: {result['verdict']}",
    ]
    return "\n".join(lines)


def write_plot(result: dict[str, Any], path: str) -> None:
    """Throughput vs producers, latency CDF at 16 threads, acked-lost per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs = result["contenders"]
    fig, (a1, a2, a3) = plt.subplots(
        1, 3, figsize=(16, 5.2), gridspec_kw={"width_ratios": [1.25, 1.25, 0.8]}
    )
    series = [
        ("async", 100, "ASYNC_FLUSH 100 B", "tab:blue", "-"),
        ("async", 1024, "ASYNC_FLUSH 1 KiB", "tab:blue", "--"),
        ("sync", 100, "SYNC_FLUSH 100 B", "tab:red", "-"),
        ("sync", 1024, "SYNC_FLUSH 1 KiB", "tab:red", "--"),
        ("sqlite_normal", 100, "SQLite WAL NORMAL 100 B", "tab:green", ":"),
        ("sqlite_full", 100, "SQLite WAL FULL 100 B", "tab:gray", ":"),
    ]
    for fam, size, label, color, ls in series:
        pts = sorted(
            (c["threads"], c["messages_per_s"])
            for c in cs.values()
            if c["family"] == fam and c["body_size"] == size
        )
        a1.plot(*zip(*pts, strict=True), ls, marker="o", color=color, label=label)
    raw_lines = (
        ("raw_fdatasync_1t_100b", "raw write+fdatasync, 1 thr"),
        ("raw_group_commit_16t_100b", "raw group-commit ceiling, 16 thr"),
    )
    for key, label in raw_lines:
        if key in cs:
            v = cs[key]["messages_per_s"]
            a1.axhline(v, color="black", lw=0.8, ls="-." if "1t" in key else "--")
            va = "top" if "1t" in key else "bottom"  # the two are often close
            a1.text(1, v, f" {label}: {v:,.0f}/s", va=va, ha="left", fontsize=7)
    a1.set_xscale("log", base=2)
    a1.set_yscale("log")
    a1.set_xticks(THREADS, [str(t) for t in THREADS])
    a1.set_xlabel("producer threads")
    a1.set_ylabel("messages per second (log)")
    a1.set_title("Throughput vs producer threads", fontsize=10)
    a1.grid(True, which="both", alpha=0.3)
    a1.legend(fontsize=7, loc="lower right")

    for key, label, color in (
        (_key("async", CDF_THREADS, 100), "ASYNC_FLUSH", "tab:blue"),
        (_key("sync", CDF_THREADS, 100), "SYNC_FLUSH", "tab:red"),
        (_key("sqlite_full", CDF_THREADS, 100), "SQLite WAL FULL", "tab:gray"),
        (_key("sqlite_normal", CDF_THREADS, 100), "SQLite WAL NORMAL", "tab:green"),
        (_key("raw_group_commit", CDF_THREADS, 100), "raw group commit", "black"),
    ):
        cdf = cs.get(key, {}).get("latency_cdf_ms") or []
        if cdf:
            qs = [q for q, _ms in cdf]
            ms = [max(v, 1e-4) for _q, v in cdf]
            a2.plot(ms, qs, color=color, label=label, lw=1.5)
    a2.set_xscale("log")
    a2.set_xlabel("put latency, ms (log)")
    a2.set_ylabel("percentile")
    a2.set_ylim(0, 100.5)
    a2.set_title(f"Put latency CDF, {CDF_THREADS} threads, 100 B", fontsize=10)
    a2.grid(True, which="both", alpha=0.3)
    a2.legend(fontsize=7, loc="lower right")

    dur = result["durability"]
    modes = [m.value for m in MODES]
    lost = [dur[m]["acked_lost"] for m in modes]
    acked = [dur[m]["acked"] for m in modes]
    colors = ["tab:blue" if m.startswith("ASYNC") else "tab:red" for m in modes]
    bars = a3.bar(modes, lost, color=colors)
    for b, n_lost, n_acked, m in zip(bars, lost, acked, modes, strict=True):
        a3.text(
            b.get_x() + b.get_width() / 2,
            b.get_height(),
            f"{n_lost:,} of {n_acked:,} acked\n({dur[m]['trials']} power losses)",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    a3.set_ylim(0, max([1, *lost]) * 1.3)
    a3.set_ylabel("acknowledged messages lost")
    a3.set_title("Acked-but-lost after simulated power loss", fontsize=10)
    meta = result["meta"]
    fig.suptitle(
        f"mqstore bench flush ({meta['cpu_count']} CPUs, {meta['fs_type']}, "
        f"median of {meta['repetitions']}, same run)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Options: the CLI passes --json/--plot/--quick; the rest are for experiments."""
    ap = argparse.ArgumentParser(prog="mqstore bench flush", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--json", default=None, metavar="FILE", help="write every figure here")
    ap.add_argument("--plot", default=None, metavar="FILE.png", help="three-panel chart")
    ap.add_argument("--quick", action="store_true", help="0.25 s per contender, 1 rep, 10 trials")
    ap.add_argument("--dir", default=None, help="parent of the temp dir (must be a real disk)")
    ap.add_argument("--duration", type=float, default=None, help="seconds per contender")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (median)")
    ap.add_argument("--trials", type=int, default=None, help="power losses per mode")
    ap.add_argument("--seed", type=int, default=8, help="seed of the power-loss trials")
    return ap.parse_args(argv)


def main(argv: list[str]) -> int:
    """Run the lab; print the table; 1 if SYNC_FLUSH lost an acked message or a
    recovery served something wrong, else 0."""
    args = parse_args(argv)
    opts = dict(QUICK if args.quick else FULL)
    for name in ("duration", "reps", "trials"):
        if getattr(args, name) is not None:
            opts[name] = getattr(args, name)
    reps = max(1, int(opts["reps"]))
    base = pick_base_dir(args.dir, Path(__file__).resolve().parents[2])
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="mqstore-flush-", dir=base))
    import persistqueue

    meta: dict[str, Any] = {
        "command": "mqstore bench flush" + (" --quick" if args.quick else ""),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "quick": bool(args.quick),
        "repetitions": reps,
        "duration_s": opts["duration"],
        "trials_per_mode": opts["trials"],
        "seed": args.seed,
        "dir": str(work),
        "fs_type": fs_type(base),
        "cpu_count": os.cpu_count(),
        "loadavg_before": list(os.getloadavg()),
        "python": platform.python_version(),
        "sqlite_version": sqlite3.sqlite_version,
        "persist_queue_version": getattr(persistqueue, "__version__", "?"),
        "platform": platform.platform(),
    }
    t0 = time.perf_counter()
    try:
        per = measure(work, float(opts["duration"]), reps)
        dur = durability(work, int(opts["trials"]), args.seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta["wall_seconds"] = round(time.perf_counter() - t0, 1)
    meta["loadavg_after"] = list(os.getloadavg())
    plan = {c.key: c for c in contenders()}
    summary = {k: describe(plan[k], runs) for k, runs in per.items()}
    sync_lost = dur[FlushDiskType.SYNC_FLUSH.value]["acked_lost"]
    problems = sum(dur[m.value]["recovery_problems"] for m in MODES)
    alarm = sync_lost > 0 or problems > 0
    verdict = (
        f"ALARM: SYNC_FLUSH lost {sync_lost} acknowledged messages, {problems} recovery problems"
        if alarm
        else "OK: SYNC_FLUSH lost no acknowledged message; every recovery served only "
        "intact records"
    )
    result = {
        "benchmark": "flush",
        "meta": meta,
        "contenders": summary,
        "durability": dur,
        "verdict": verdict,
        "alarm": alarm,
    }
    print(format_report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        write_plot(result, args.plot)
    return 1 if alarm else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
