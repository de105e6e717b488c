"""``mqstore bench embedded``: the embedded store against the fastest embedded peers.

``mqstore bench embedded [--quick] [--open-messages N] [--read-messages N] [--reps R]
[--duration S] [--json FILE] [--dir DIR]``

One run measures mqstore (ASYNC_FLUSH, the default dispatcher thread, default sizes)
and, in the same repetitions, interleaved, SQLite (WAL, synchronous=NORMAL), LMDB
(``lmdb``, ``sync=False``) and persist-queue's file ``Queue``, each storing the same
items (a topic, a tag, a key and a 100-byte body; see :mod:`._workload`):

1. **put**: one producer, one put per message (mqstore ``put_message``; SQLite one
   INSERT + COMMIT; LMDB one write transaction; persist-queue ``put``);
2. **batch of 32**: mqstore ``put_messages``; SQLite ``executemany`` of 32 rows per
   COMMIT; LMDB ``putmulti`` of 32 in one write transaction;
3. **read back** ``--read-messages`` (200,000) stored messages, page cache warm:
   mqstore ``read_batch`` of 1024 (bodies; and bodies + tags) and ``get_message``
   batches of 32 reading each message's body and tags; LMDB
   one read transaction's cursor over every value (bytes, nothing decoded: the
   strictest reference); SQLite ``SELECT tags, body`` in id order;
4. **open** a store of ``--open-messages`` (1,000,000; 10,000,000 for the large
   case) messages after a clean close: mqstore ``MessageStore.open``; LMDB open and
   find the last key; SQLite connect and ``SELECT max(id)``. Each repetition opens
   each store :data:`OPENS_PER_REP` times and keeps the median.

The stores read and opened are built once, before the repetitions, off the clock.
Rates are medians of the repetitions; each ratio is the median of the per-repetition
ratios (the two sides ran back to back). Figures vary with the machine's load: the
load average is printed; compare within one run only.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore.tools.bench import _mqstore as mq
from mqstore.tools.bench import _references as ref
from mqstore.tools.bench._harness import (
    Contender,
    Run,
    interleave,
    median,
    parser,
    progress,
    run_meta,
    settle,
    work_dir,
    write_json,
)
from mqstore.tools.bench._workload import items

REPETITIONS = 3
OPENS_PER_REP = 5
FULL = {"duration": 2.0, "read_messages": 200_000, "open_messages": 1_000_000}
QUICK = {"duration": 0.2, "read_messages": 5_000, "open_messages": 20_000}
OPEN_TARGET_MS = 50.0

SECTIONS = {
    "put": "1. one producer, one put per message, ack without fsync",
    "batch": "2. batches of 32 messages, ack without fsync",
    "read": "3. read back every stored message (page cache warm)",
    "open": "4. open after a clean close",
}

RATIOS = (  # key, title, numerator, denominator, target (None: shown only)
    ("put_vs_lmdb", "put / LMDB", "mqstore_put", "lmdb_put", 1.0),
    ("put_vs_sqlite", "put / SQLite NORMAL", "mqstore_put", "sqlite_put", None),
    ("put_vs_pq_file", "put / persist-queue file Queue", "mqstore_put", "pq_file_put", None),
    ("batch_vs_sqlite", "batch of 32 / SQLite executemany", "mqstore_batch", "sqlite_batch", 1.0),
    ("batch_vs_lmdb", "batch of 32 / LMDB putmulti", "mqstore_batch", "lmdb_batch", 0.5),
    ("read_batch_vs_lmdb", "read_batch / LMDB cursor", "mqstore_read_batch", "lmdb_read", 1.0),
    (
        "read_batch_tags_vs_lmdb",
        "read_batch + tags / LMDB cursor",
        "mqstore_read_batch_tags",
        "lmdb_read",
        None,
    ),
    ("read_vs_lmdb", "get_message / LMDB cursor", "mqstore_read", "lmdb_read", None),
    ("read_vs_sqlite", "read back / SQLite SELECT", "mqstore_read", "sqlite_read", None),
    ("open_vs_lmdb", "open time / LMDB's", "mqstore_open", "lmdb_open", None),
    ("open_vs_sqlite", "open time / SQLite's", "mqstore_open", "sqlite_open", None),
)

_NO_FSYNC = "page cache (no fsync per ack)"


def _opened(open_once: Callable[[], float]) -> Run:
    """One open repetition: the median of :data:`OPENS_PER_REP` opens (one op)."""
    seconds = statistics.median(open_once() for _ in range(OPENS_PER_REP))
    return Run(1, seconds)


def contenders(stores: dict[str, Path]) -> list[Contender]:
    """Everything measured, in the order each repetition runs it; ``stores`` holds the
    filled stores (``read-*`` and ``open-*``, see :func:`build_stores`)."""
    p = functools.partial
    p100 = items(100)
    return [
        Contender("mqstore_put", "mqstore put_message, ASYNC_FLUSH", "put",
                  _NO_FSYNC + "; flusher every 500 ms", p(mq.async_single, pool=p100)),
        Contender("lmdb_put", "LMDB sync=False, txn per put", "put",
                  _NO_FSYNC, p(ref.lmdb_puts, items=p100, batch=1)),
        Contender("sqlite_put", "SQLite WAL NORMAL, commit per message", "put",
                  _NO_FSYNC + "; WAL synced at checkpoints",
                  p(ref.sqlite_single, items=p100, batch=1)),
        Contender("pq_file_put", "persist-queue file Queue (defaults)", "put",
                  "fsync every 100 puts", p(ref.persist_queue, items=p100, kind="file")),
        Contender("mqstore_batch", "mqstore put_messages(32)", "batch",
                  _NO_FSYNC, p(mq.async_batch, pool=p100, batch=32)),
        Contender("lmdb_batch", "LMDB putmulti(32), txn per batch", "batch",
                  _NO_FSYNC, p(ref.lmdb_puts, items=p100, batch=32)),
        Contender("sqlite_batch", "SQLite executemany(32) per commit", "batch",
                  _NO_FSYNC, p(ref.sqlite_single, items=p100, batch=32)),
        Contender("mqstore_read", "mqstore get_message(32): body + tags", "read",
                  "", lambda _d, _t: mq.read_back(stores["read-mqstore"])),
        Contender("mqstore_read_batch", "mqstore read_batch(1024): bodies", "read",
                  "", lambda _d, _t: mq.read_batches(stores["read-mqstore"], tags=False)),
        Contender("mqstore_read_batch_tags", "mqstore read_batch(1024): bodies + tags", "read",
                  "", lambda _d, _t: mq.read_batches(stores["read-mqstore"], tags=True)),
        Contender("lmdb_read", "LMDB cursor, values as bytes", "read",
                  "", lambda _d, _t: ref.lmdb_read(stores["read-lmdb"])),
        Contender("sqlite_read", "SQLite SELECT tags, body", "read",
                  "", lambda _d, _t: ref.sqlite_read(stores["read-sqlite"])),
        Contender("mqstore_open", "mqstore MessageStore.open", "open", "",
                  lambda _d, _t: _opened(p(mq.open_seconds, stores["open-mqstore"]))),
        Contender("lmdb_open", "LMDB open + last key", "open", "",
                  lambda _d, _t: _opened(p(ref.lmdb_open, stores["open-lmdb"]))),
        Contender("sqlite_open", "SQLite connect + max(id)", "open", "",
                  lambda _d, _t: _opened(p(ref.sqlite_open, stores["open-sqlite"]))),
    ]  # fmt: skip


def build_stores(work: Path, read_n: int, open_n: int) -> dict[str, Path]:
    """The stores read back and opened: one per contender and size, filled and closed."""
    pool = items(100)
    out = {}
    with progress(6, "building stores") as bar:
        for purpose, n in (("read", read_n), ("open", open_n)):
            out[f"{purpose}-mqstore"] = work / f"{purpose}-mqstore"
            mq.fill_store(out[f"{purpose}-mqstore"], pool, n)
            bar.update(1)
            out[f"{purpose}-lmdb"] = work / f"{purpose}-lmdb"
            ref.lmdb_fill(out[f"{purpose}-lmdb"], pool, n)
            bar.update(1)
            out[f"{purpose}-sqlite"] = work / f"{purpose}-sqlite.db"
            ref.sqlite_fill(out[f"{purpose}-sqlite"], pool, n)
            bar.update(1)
    settle()
    return out


def summarize(c: Contender, runs: list[Run]) -> dict[str, Any]:
    """Medians over the repetitions of one contender."""
    out: dict[str, Any] = {
        "label": c.label,
        "section": c.section,
        "durability": c.durability,
        "per_s": median([r.rate for r in runs]),
        "reps_per_s": [round(r.rate, 1) for r in runs],
        "reps_loadavg_1m": [round(r.extra.get("loadavg_1m", 0.0), 2) for r in runs],
    }
    if c.section == "open":
        out["ms"] = median([r.seconds * 1e3 for r in runs])
        out["reps_ms"] = [round(r.seconds * 1e3, 2) for r in runs]
    return out


def ratios(per: dict[str, list[Run]]) -> dict[str, Any]:
    """Every comparison: the median of the per-repetition ratios, of rates (above 1.0,
    mqstore is faster) or, for an open, of times (above 1.0, mqstore is slower)."""
    out: dict[str, Any] = {}
    for key, title, num, den, target in RATIOS:
        pairs = zip(per[num], per[den], strict=True)
        if key.startswith("open"):
            reps = [x.seconds / y.seconds if y.seconds else 0.0 for x, y in pairs]
        else:
            reps = [x.rate / y.rate if y.rate else 0.0 for x, y in pairs]
        value = median(reps)
        out[key] = {
            "title": title,
            "value": value,
            "numerator": num,
            "denominator": den,
            "target": target,
            "met": None if target is None else value >= target,
            "reps": [round(r, 3) for r in reps],
        }
    ms = median([r.seconds * 1e3 for r in per["mqstore_open"]])
    out["open_ms"] = {
        "title": "mqstore open, ms",
        "value": ms,
        "numerator": "mqstore_open",
        "denominator": None,
        "target": OPEN_TARGET_MS,
        "met": ms <= OPEN_TARGET_MS,
        "reps": [round(r.seconds * 1e3, 2) for r in per["mqstore_open"]],
    }
    return out


def report(result: dict[str, Any]) -> str:
    """The printed table: each section's contenders, then its ratios."""
    meta = result["meta"]
    lines = [
        f"{meta['command']}: median of {meta['repetitions']} interleaved repetitions; "
        f"{meta['cpu_count']} CPUs, {meta['fs_type']} at {meta['dir']}; load "
        f"{meta['loadavg_before'][0]:.2f} -> {meta['loadavg_after'][0]:.2f}; "
        f"{meta['wall_seconds']:g} s wall; read {meta['read_messages']:,} messages, "
        f"open {meta['open_messages']:,}",
        "",
    ]
    cs = result["contenders"]
    for sec, title in SECTIONS.items():
        lines.append(title)
        for c in cs.values():
            if c["section"] != sec:
                continue
            fig = f"{c['ms']:10.2f} ms" if sec == "open" else f"{c['per_s']:10,.0f} /s"
            lines.append(f"  {c['label']:<44}{fig}")
        for r in result["ratios"].values():
            if cs[r["numerator"]]["section"] != sec:
                continue
            if r["denominator"] is None:
                value, target = f"{r['value']:.2f} ms", f"<= {r['target']:g} ms"
            else:
                value = f"{r['value']:.2f}x"
                target = "" if r["target"] is None else f">= {r['target']:g}x"
            verdict = "" if r["met"] is None else ("MET" if r["met"] else "MISSED")
            reps = " ".join(f"{x:g}" for x in r["reps"])
            lines.append(f"  = {r['title']:<42}{value:>10} {target:<10}{verdict:<7} reps: {reps}")
        lines.append("")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The harness's options plus the store sizes, repetitions and duration."""
    ap = parser("embedded", __doc__)
    ap.add_argument("--read-messages", type=int, default=None, help="messages read back")
    ap.add_argument("--open-messages", type=int, default=None, help="messages in the opened store")
    ap.add_argument("--duration", type=float, default=None, help="seconds per put contender")
    ap.add_argument("--reps", type=int, default=REPETITIONS, help="repetitions (median)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table; 0 (targets missed still return 0)."""
    args = parse_args(argv)
    opts: dict[str, Any] = dict(QUICK if args.quick else FULL)
    for k in ("duration", "read_messages", "open_messages"):
        if getattr(args, k):
            opts[k] = getattr(args, k)
    reps = max(1, args.reps)
    t0 = time.perf_counter()
    with work_dir(args.dir, "mqstore-bench-embedded-") as work:
        meta = run_meta("embedded", args, reps, opts["duration"], work)
        meta.update(read_messages=opts["read_messages"], open_messages=opts["open_messages"])
        stores = build_stores(work, opts["read_messages"], opts["open_messages"])
        plan = contenders(stores)
        per = interleave(plan, work, opts["duration"], reps, "benchmark")
    meta["wall_seconds"] = round(time.perf_counter() - t0, 1)
    meta["loadavg_after"] = list(os.getloadavg())
    summary = {c.key: summarize(c, per[c.key]) for c in plan}
    result = {"benchmark": "embedded", "meta": meta, "contenders": summary,
              "ratios": ratios(per)}  # fmt: skip
    print(report(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
