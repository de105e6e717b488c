"""Issue-3 pull and dispatch benchmark (one run, printed)::

    python benchmarks/bench_pull.py [--messages N] [--dir DIR] [--json FILE]

What it measures:

1. **Sequential pull, decoded** (``get_message``): a consumer reads a 1-queue topic
   and then an 8-queue topic from offset 0 to the end in batches of 32, ``"*"``
   subscription; messages per second = messages returned / wall time. Each message
   is fully decoded (topic, properties string, hosts, timestamps, body copied out).
2. **Sequential pull, raw** (``get_message_raw``): the broker's path, the same
   walk returning zero-copy views of the records.
3. **Dispatch lag**: a producer thread puts 1 KiB-ish messages under ASYNC_FLUSH at
   a steady rate; for each message, the time from ``put_message`` returning to the
   dispatcher's arrival notification. p50 / p99 / max in ms.

Bodies are 100 bytes with a tag and a key (records of ~190 bytes). The targets from
issue 3 are printed next to the results. The machine's load average is printed too:
compare runs only within one run on a busy machine (perf-notes.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from mqstore import Arrival, Message, MessageStore, StoreConfig

TARGET_DECODED = 300_000
TARGET_RAW = 1_000_000


def fill(store: MessageStore, topic: str, queues: int, n: int) -> None:
    batch = 64
    for start in range(0, n, batch):
        store.put_messages(
            [
                Message(
                    topic=topic, body=b"x" * 100, tags="TagA", keys=[f"k{i}"], queue_id=i % queues
                )
                for i in range(start, min(n, start + batch))
            ]
        )
    assert store.wait_dispatched(300)


def pull_rate(store: MessageStore, topic: str, queues: int, raw: bool) -> tuple[int, float]:
    fn = store.get_message_raw if raw else store.get_message
    total = 0
    t0 = time.perf_counter()
    for qid in range(queues):
        offset = 0
        while True:
            r = fn("bench", topic, qid, offset, 32)
            got = r.message_count if raw else len(r.messages)  # type: ignore[union-attr]
            if not got:
                break
            total += got
            offset = r.next_begin_offset
    return total, time.perf_counter() - t0


def dispatch_lag(root: Path, rate: int, seconds: float) -> dict[str, float]:
    cfg = StoreConfig(
        root_dir=root,
        commitlog_file_size=256 << 20,
        max_hash_slot_num=500_000,
        max_index_num=2_000_000,
    )
    done_at: dict[int, float] = {}
    put_at: dict[int, float] = {}
    finished = threading.Event()
    total = int(rate * seconds)

    def on_arrival(a: Arrival) -> None:
        done_at[a.queue_offset] = time.perf_counter()
        if len(done_at) == total:
            finished.set()

    body = os.urandom(1000)
    with MessageStore.open(cfg) as store:
        store.add_arrival_listener(on_arrival)
        t0 = time.perf_counter()
        for i in range(total):
            delay = t0 + i / rate - time.perf_counter()
            if delay > 0:  # sleep, not spin: a spinning producer would starve the dispatcher
                time.sleep(delay)
            r = store.put_message(Message(topic="Lag", body=body, tags="T", keys=[f"k{i}"]))
            put_at[r.queue_offset] = time.perf_counter()
        elapsed = time.perf_counter() - t0
        finished.wait(60)
    lags = sorted((done_at[q] - put_at[q]) * 1000 for q in put_at if q in done_at)
    return {
        "rate_target": rate,
        "rate_achieved": round(total / elapsed),
        "messages": len(lags),
        "p50_ms": round(statistics.median(lags), 3),
        "p99_ms": round(lags[int(len(lags) * 0.99) - 1], 3),
        "max_ms": round(lags[-1], 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000, help="messages per topic")
    ap.add_argument("--lag-rate", type=int, default=10_000, help="puts per second for the lag test")
    ap.add_argument("--lag-seconds", type=float, default=3.0)
    ap.add_argument("--dir", type=Path, default=None, help="where to put the stores (temp dir)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="mq-bench-pull-", dir=args.dir))
    out: dict[str, Any] = {"loadavg": os.getloadavg(), "messages_per_topic": args.messages}
    try:
        cfg = StoreConfig(root_dir=base / "pull", commitlog_file_size=256 << 20,
                          max_hash_slot_num=1_000_000, max_index_num=4_000_000)  # fmt: skip
        with MessageStore.open(cfg) as store:
            t = time.perf_counter()
            fill(store, "One", 1, args.messages)
            fill(store, "Eight", 8, args.messages)
            out["fill_seconds"] = round(time.perf_counter() - t, 2)
            for topic, queues in (("One", 1), ("Eight", 8)):
                for raw in (False, True):
                    pull_rate(store, topic, queues, raw)  # warm: page cache, code paths
                    n, dt = pull_rate(store, topic, queues, raw)
                    key = f"pull_{'raw' if raw else 'decoded'}_{queues}q"
                    out[key] = {"messages": n, "seconds": round(dt, 3), "per_second": round(n / dt)}
        out["dispatch_lag"] = dispatch_lag(base / "lag", args.lag_rate, args.lag_seconds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out["loadavg_after"] = os.getloadavg()
    print(f"load average before/after: {out['loadavg']} / {out['loadavg_after']}")
    for key, target in (
        ("pull_decoded_1q", TARGET_DECODED),
        ("pull_decoded_8q", TARGET_DECODED),
        ("pull_raw_1q", TARGET_RAW),
        ("pull_raw_8q", TARGET_RAW),
    ):
        r = out[key]
        verdict = "ok" if r["per_second"] >= target else "BELOW TARGET"
        print(f"{key:18s} {r['per_second']:>10,d} msg/s  ({r['messages']} in {r['seconds']} s; "
              f"target {target:,d}: {verdict})")  # fmt: skip
    lag = out["dispatch_lag"]
    print(
        f"dispatch lag at {lag['rate_achieved']:,d} puts/s (async): p50 {lag['p50_ms']} ms, "
        f"p99 {lag['p99_ms']} ms, max {lag['max_ms']} ms over {lag['messages']} messages"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
