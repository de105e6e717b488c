"""``mqstore bench timers``: what pending timer messages cost the puts of everything else.

``mqstore bench timers [--quick] [--pending 1000000] [--seconds 1] [--reps 21] [--json FILE]
[--dir DIR]``

Two embedded stores with the default sizes and ASYNC_FLUSH, open side by side in this
process: one holding ``--pending`` timer messages (``TIMER_DELIVER_MS`` spread over the
day that starts an hour from now, so none comes due; 100-byte bodies) that the timer
service has linked into its wheel, and a reference holding as many ordinary messages of
the same size (so both CommitLogs, indexes and page caches hold a million records, and
what differs is the timer topic, the timer log and the wheel). Then, in
``--reps`` interleaved rounds (which store goes first alternates), ordinary 100-byte
messages (the fast path) are put into each for ``--seconds``, and the put rates compared:
the median rate with timers pending against the reference's, and the median of the
rounds' ratios (docs/timer.md §2: RocketMQ's issue asks that a million pending
timers slow puts by no more than 20 %). Also reported: how long the timers took to put and
to enqueue, and what the timer files hold on disk (``du``: allocated blocks).

Figures vary with the load of this shared machine: compare within one run only (the load
average is printed with them).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from mqstore import Message, MessageStore, StoreConfig
from mqstore.tools.bench._harness import Benchmark, Option

BODY = b"x" * 100
OPTIONS = (
    Option("--pending", int, 1_000_000, "timer messages pending in the loaded store", quick=5000),
    Option("--seconds", float, 1.0, "seconds of puts per round and store", quick=0.3),
    Option("--reps", int, 21, "interleaved rounds", quick=2),
)


def allocated(path: Path) -> int:
    """Bytes allocated under ``path`` (``st_blocks * 512``, what ``du`` counts)."""
    if path.is_file():
        return path.stat().st_blocks * 512
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def fill(store: MessageStore, pending: int, *, timed: bool) -> dict[str, float]:
    """Put ``pending`` timers due over a day from an hour ahead (or, not ``timed``, as many
    messages with an ordinary property instead); wait until all are linked (dispatched)."""
    start = time.time_ns() // 1_000_000 + 3_600_000
    step = max(1, 86_400_000 // pending)
    name = "TIMER_DELIVER_MS" if timed else "deliver_ms"
    t0 = time.perf_counter()
    for i in range(pending):
        props = {name: str(start + i * step)}
        store.put_message(Message(topic="Timed", body=BODY, queue_id=i % 4, properties=props))
    put_s = time.perf_counter() - t0
    store.wait_dispatched()
    timer = store.logics.timer
    assert timer is not None
    while timed and timer.enqueued < pending:
        if timer.error is not None:
            raise timer.error
        time.sleep(0.05)
    return {"put_s": put_s, "enqueued_s": time.perf_counter() - t0}


def put_for(store: MessageStore, seconds: float) -> float:
    """Ordinary puts for ``seconds``; their rate."""
    put = store.put_message
    msgs = [Message(topic="Plain", body=BODY, queue_id=i % 4) for i in range(256)]
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        for m in msgs:
            put(m)
        n += len(msgs)
        t = time.perf_counter()
        if t >= deadline:
            return n / (t - t0)


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Fill the loaded store, then the interleaved rounds (reference first in each)."""
    loaded_cfg = StoreConfig(root_dir=work / "timers")
    ref_cfg = StoreConfig(root_dir=work / "reference")
    with MessageStore.open(loaded_cfg) as loaded, MessageStore.open(ref_cfg) as ref:
        filled = fill(loaded, args.pending, timed=True)
        fill(ref, args.pending, timed=False)
        rates: dict[str, list[float]] = {"reference": [], "timers": []}
        loads = []
        for rep in range(args.reps):  # which store goes first alternates
            loads.append(os.getloadavg()[0])
            order = [("reference", ref), ("timers", loaded)]
            for key, store in order if rep % 2 == 0 else reversed(order):
                rates[key].append(put_for(store, args.seconds))
        timer = loaded.logics.timer
        delivered = timer.delivered if timer is not None else -1
    root = loaded_cfg.root
    disk = {name: allocated(root / name) for name in ("timerlog", "timerwheel")}
    cq = root / "consumequeue" / "rmq_sys_wheel_timer"
    disk["rmq_sys_wheel_timer consume queue"] = allocated(cq)
    return {
        "pending": args.pending, "fill": filled, "rates": rates, "delivered": delivered,
        "disk": disk, "loadavg": loads, "loadavg_after": list(os.getloadavg()),
        "cpu_count": os.cpu_count(),
    }  # fmt: skip


def report(out: dict[str, Any], _args: argparse.Namespace) -> str:
    """Median put rates and their ratio, the fill times and the timer files' disk."""
    ref = statistics.median(out["rates"]["reference"])
    timed = statistics.median(out["rates"]["timers"])
    pairs = statistics.median(
        t / r for t, r in zip(out["rates"]["timers"], out["rates"]["reference"], strict=True)
    )
    mib = 1024 * 1024
    lines = [
        f"{out['pending']:,} timers pending: put {out['fill']['put_s']:.1f} s, linked into "
        f"the wheel {out['fill']['enqueued_s']:.1f} s after the first put",
        f"  puts with them pending {timed:9.0f}/s vs reference {ref:9.0f}/s = {timed / ref:.2f}x "
        f"(medians of {len(out['rates']['reference'])} interleaved rounds; median of the "
        f"rounds' ratios {pairs:.2f}x)",
        *(f"  {name:<36} {b / mib:8.1f} MiB on disk" for name, b in out["disk"].items()),
        f"  delivered while measuring: {out['delivered']} (none is due)",
        f"load average {max(out['loadavg']):.1f} (highest at a round's start) on "
        f"{out['cpu_count']} CPUs",
    ]
    return "\n".join(lines)


BENCHMARK = Benchmark("timers", __doc__, OPTIONS, measure, report)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table; 0."""
    return BENCHMARK.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
