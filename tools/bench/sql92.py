"""``mqstore bench sql92``: reading a queue through a SQL92 filter against reading its
matches alone.

``mqstore bench sql92 [--quick] [--messages 1000000] [--every 100] [--reps 5] [--json FILE]
[--dir DIR]``

One embedded store (default sizes, ASYNC_FLUSH). Topic ``Mixed``, one queue, holds
``--messages`` 100-byte messages; every ``--every``-th (1 % by default) has TAGS ``Hit`` and
the property ``hit=yes``, the others TAGS ``Miss`` and ``hit=no``. Topic ``Matches`` holds
the matching messages alone. In ``--reps`` interleaved rounds, each read pulls its queue
from offset 0 to the end with ``get_message`` (32 at a time, the pull's own unit-scan
limit and ``NO_MATCHED_MESSAGE`` skips included):

* ``reference``: ``Matches`` with no filter (the unfiltered read of the matches);
* ``sql with TAGS``: ``Mixed`` through ``TAGS = 'Hit' AND hit = 'yes'`` (the consume queue's
  tag codes skip the misses, docs/sql92.md §5);
* ``sql on properties``: ``Mixed`` through ``hit = 'yes'`` (every message read and
  evaluated).

Reported: matches read per second for each, and each filtered read's speed as a fraction of
the reference's (the issue's target is at least 0.5 at 1 % matching). Figures vary with the
load of this shared machine: compare within one run only (the load average is printed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from mqstore import Message, MessageStore, StoreConfig
from mqstore.consumequeue.filter import SQL92, Subscription, parse_subscription
from mqstore.tools.bench._harness import Benchmark, Option

BODY = b"x" * 100
OPTIONS = (
    Option("--messages", int, 1_000_000, "messages in the filtered queue", quick=20_000),
    Option("--every", int, 100, "one message in this many matches", quick=100),
    Option("--reps", int, 5, "interleaved rounds", quick=1),
)
READS = {
    "reference": ("Matches", "*"),
    "sql with TAGS": ("Mixed", "TAGS = 'Hit' AND hit = 'yes'"),
    "sql on properties": ("Mixed", "hit = 'yes'"),
}


def fill(store: MessageStore, messages: int, every: int) -> int:
    """Put the mixed queue and the matches-only queue; the number of matches."""
    hits = 0
    for i in range(messages):
        hit = i % every == 0
        props = {"hit": "yes" if hit else "no"}
        tags = "Hit" if hit else "Miss"
        store.put_message(Message(topic="Mixed", body=BODY, tags=tags, properties=props))
        if hit:
            hits += 1
            store.put_message(Message(topic="Matches", body=BODY, tags=tags, properties=props))
    store.wait_dispatched()
    return hits


def read_all(store: MessageStore, topic: str, sub: str | Subscription) -> tuple[float, int]:
    """Pull ``topic``'s queue 0 from the start to the end; (seconds, messages read)."""
    end = store.max_offset_in_queue(topic, 0)
    offset, n = 0, 0
    t0 = time.perf_counter()
    while offset < end:
        r = store.get_message("bench", topic, 0, offset, 32, sub)
        n += len(r.messages)
        offset = r.next_begin_offset
    return time.perf_counter() - t0, n


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Fill the store, then the interleaved rounds (the order rotates each round)."""
    subs = {
        name: (topic, expr if name == "reference" else parse_subscription(expr, SQL92))
        for name, (topic, expr) in READS.items()
    }
    rates: dict[str, list[float]] = {name: [] for name in READS}
    loads = []
    with MessageStore.open(StoreConfig(root_dir=work / "store")) as store:
        hits = fill(store, args.messages, args.every)
        names = list(READS)
        for rep in range(args.reps):
            loads.append(os.getloadavg()[0])
            for name in names[rep % 3 :] + names[: rep % 3]:
                topic, sub = subs[name]
                seconds, n = read_all(store, topic, sub)
                assert n == hits, (name, n, hits)
                rates[name].append(n / seconds)
    return {"messages": args.messages, "matches": hits, "rates": rates, "loadavg": loads,
            "loadavg_after": list(os.getloadavg()), "cpu_count": os.cpu_count()}  # fmt: skip


def report(out: dict[str, Any], _args: argparse.Namespace) -> str:
    """Matches read per second, and each filtered read against the reference."""
    ref = statistics.median(out["rates"]["reference"])
    lines = [f"{out['messages']:,} messages, {out['matches']:,} matching; "
             f"medians of {len(out['rates']['reference'])} interleaved rounds"]  # fmt: skip
    for name, rates in out["rates"].items():
        rate = statistics.median(rates)
        lines.append(f"  {name:<18} {rate:12,.0f} matches/s  {rate / ref:5.2f}x reference")
    lines.append(f"load average {max(out['loadavg']):.1f} (highest at a round's start) on "
                 f"{out['cpu_count']} CPUs")  # fmt: skip
    return "\n".join(lines)


BENCHMARK = Benchmark("sql92", __doc__, OPTIONS, measure, report)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table; 0."""
    return BENCHMARK.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
