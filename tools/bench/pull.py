"""``mqstore bench pull``: sequential pulls and dispatch lag (one run, printed).

1. **Sequential pull, decoded** (``get_message``): a consumer reads a 1-queue topic and
   then an 8-queue topic from offset 0 to the end in batches of 32, ``"*"``
   subscription; messages per second = messages returned / wall time. Each message is
   fully decoded (topic, properties string, hosts, timestamps, body copied out).
2. **Sequential pull, raw** (``get_message_raw``): the broker's path, the same walk
   returning zero-copy views of the records.
3. **Dispatch lag**: a producer thread puts 1 KiB messages under ASYNC_FLUSH at a
   steady rate; for each message, the time from ``put_message`` returning to the
   dispatcher's arrival notification; p50 / p99 / max in ms.

Bodies are 100 bytes with a tag and a key (records of ~190 bytes). Every pull is run
once to warm the page cache and code paths, then timed. The targets of the pull issue
are printed beside the results; the load average before and after is printed too, so
compare figures only within one run.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path
from typing import Any

from mqstore import Arrival, Message, MessageStore, StoreConfig
from mqstore.tools.bench._harness import Benchmark, Option, percentile

TARGET_DECODED = 300_000
TARGET_RAW = 1_000_000
PULL_BATCH = 32

OPTIONS = (
    Option("--messages", int, 200_000, "messages per topic", quick=5_000),
    Option("--lag-rate", int, 10_000, "puts per second for the lag test"),
    Option("--lag-seconds", float, 3.0, "seconds of the lag test", quick=0.5),
)


def fill(store: MessageStore, topic: str, queues: int, n: int) -> None:
    """Put ``n`` 100-byte messages round-robin over ``queues`` and wait for dispatch."""
    batch = 64
    for start in range(0, n, batch):
        store.put_messages(
            [
                Message(topic, b"x" * 100, tags="TagA", keys=[f"k{i}"], queue_id=i % queues)
                for i in range(start, min(n, start + batch))
            ]
        )
    if not store.wait_dispatched(300):
        raise TimeoutError(f"{topic}: dispatch did not catch up in 300 s")


def pull_rate(store: MessageStore, topic: str, queues: int, raw: bool) -> tuple[int, float]:
    """(messages, seconds) of reading every queue of ``topic`` from offset 0 to the end."""
    total = 0
    t0 = time.perf_counter()
    for qid in range(queues):
        offset = 0
        while True:
            if raw:
                r = store.get_message_raw("bench", topic, qid, offset, PULL_BATCH)
                got = r.message_count
                offset = r.next_begin_offset
            else:
                g = store.get_message("bench", topic, qid, offset, PULL_BATCH)
                got = len(g.messages)
                offset = g.next_begin_offset
            if not got:
                break
            total += got
    return total, time.perf_counter() - t0


def dispatch_lag(root: Path, rate: int, seconds: float) -> dict[str, float]:
    """Put at ``rate`` per second for ``seconds``; lag from put return to arrival."""
    cfg = StoreConfig(root_dir=root, commitlog_file_size=256 << 20,
                      max_hash_slot_num=500_000, max_index_num=2_000_000)  # fmt: skip
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
            r = store.put_message(Message("Lag", body, tags="T", keys=[f"k{i}"]))
            put_at[r.queue_offset] = time.perf_counter()
        elapsed = time.perf_counter() - t0
        finished.wait(60)
    lags = sorted((done_at[q] - put_at[q]) * 1000 for q in put_at if q in done_at)
    return {
        "rate_target": rate,
        "rate_achieved": round(total / elapsed),
        "messages": len(lags),
        "p50_ms": round(percentile(lags, 50), 3),
        "p99_ms": round(percentile(lags, 99), 3),
        "max_ms": round(lags[-1], 3) if lags else 0.0,
    }


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Fill two topics, time the four pull walks, then the dispatch lag."""
    messages = args.messages
    out: dict[str, Any] = {"loadavg": list(os.getloadavg()), "messages_per_topic": messages}
    cfg = StoreConfig(root_dir=work / "pull", commitlog_file_size=256 << 20,
                      max_hash_slot_num=1_000_000, max_index_num=4_000_000)  # fmt: skip
    with MessageStore.open(cfg) as store:
        t = time.perf_counter()
        fill(store, "One", 1, messages)
        fill(store, "Eight", 8, messages)
        out["fill_seconds"] = round(time.perf_counter() - t, 2)
        for topic, queues in (("One", 1), ("Eight", 8)):
            for raw in (False, True):
                pull_rate(store, topic, queues, raw)  # warm: page cache, code paths
                n, dt = pull_rate(store, topic, queues, raw)
                key = f"pull_{'raw' if raw else 'decoded'}_{queues}q"
                out[key] = {"messages": n, "seconds": round(dt, 3), "per_second": round(n / dt)}
    out["dispatch_lag"] = dispatch_lag(work / "lag", args.lag_rate, args.lag_seconds)
    out["loadavg_after"] = list(os.getloadavg())
    return out


def report(out: dict[str, Any], _args: argparse.Namespace) -> str:
    """The printed table."""
    lines = [f"load average before/after: {out['loadavg']} / {out['loadavg_after']}"]
    for key, target in (
        ("pull_decoded_1q", TARGET_DECODED),
        ("pull_decoded_8q", TARGET_DECODED),
        ("pull_raw_1q", TARGET_RAW),
        ("pull_raw_8q", TARGET_RAW),
    ):
        r = out[key]
        verdict = "ok" if r["per_second"] >= target else "BELOW TARGET"
        lines.append(f"{key:18s} {r['per_second']:>10,d} msg/s  ({r['messages']} in "
                     f"{r['seconds']} s; target {target:,d}: {verdict})")  # fmt: skip
    lag = out["dispatch_lag"]
    at = f"dispatch lag at {lag['rate_achieved']:,d} puts/s (async):"
    over = f"over {lag['messages']} messages"
    lag_ms = f"p50 {lag['p50_ms']} ms, p99 {lag['p99_ms']} ms, max {lag['max_ms']} ms"
    return "\n".join([*lines, f"{at} {lag_ms} {over}"])


main = Benchmark("pull", __doc__, OPTIONS, measure, report).main


if __name__ == "__main__":
    raise SystemExit(main())
