"""``mqstore bench putpath``: what one put costs, and what it is made of.

Three tables, on ASYNC_FLUSH stores, 100-byte bodies with a tag and a key (the
commitlog benchmark's messages):

1. **The put**, in nanoseconds of this thread's CPU per call: ``put_message``, and
   ``put_messages`` of 32 per message. The consume-queue dispatcher is stopped, so
   what is timed is the producer's own work.
2. **Its pieces**, each timed alone with the values a put uses: the UNIQ_KEY, the
   properties string, the body CRC, encoding the record, copying it into the mapped
   segment, the put lock, and the flusher's wait (which returns at once under
   ASYNC_FLUSH). A put does each of these once; the fast path packs the record straight
   into the mapping, so the encode and copy rows bound that step from above. What a put
   costs beyond its pieces is bookkeeping: queue offsets, checks, the result.
3. **CPU per message** over a few seconds of puts on a fresh store with its dispatcher
   running: the producer thread against the whole process (dispatcher, index and
   flusher included), with the index on and off.

Each row is the minimum over rounds of the mean over many calls (the least disturbed
measurement on a noisy machine), rounds interleaved so a busy moment hits every row,
minus the cost of calling an empty function. Only public names are used, so the
same tool measures the put path before and after a change to it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore import FlushDiskType, MessageStore, StoreConfig
from mqstore.commitlog import format as fmt
from mqstore.message import host_bytes, new_uniq_key, standard_properties_string
from mqstore.tools.bench._harness import Option, bench_main
from mqstore.tools.bench._workload import items

BATCH = 32


def measure_all(fns: dict[str, Callable[[], Any]], number: int, rounds: int) -> dict[str, float]:
    """ns per call of each function: the minimum over ``rounds`` of the mean CPU time of
    this thread (``thread_time``: time the machine gave to others is not counted) over
    ``number`` calls, rounds interleaved, minus an empty lambda called the same way."""
    timers = {name: timeit.Timer(fn, timer=time.thread_time) for name, fn in fns.items()}
    empty = timeit.Timer(lambda: None, timer=time.thread_time)
    best = dict.fromkeys(timers, float("inf"))
    base = float("inf")
    for _ in range(rounds):
        base = min(base, empty.timeit(number))
        for name, t in timers.items():
            best[name] = min(best[name], t.timeit(number))
    return {name: max(0.0, (v - base) / number * 1e9) for name, v in best.items()}


def whole_put(store: MessageStore, number: int, rounds: int) -> dict[str, float]:
    """ns per message of ``put_message`` and of ``put_messages(32)``."""
    msgs = [it.message() for it in items(100, n=64)]
    batches = [msgs[i : i + BATCH] for i in range(0, 64, BATCH)]
    put, put_many = store.put_message, store.put_messages
    n = itertools.count()
    out = measure_all({"put_message": lambda: put(msgs[next(n) & 63])}, number, rounds)
    many = measure_all(
        {"batch": lambda: put_many(batches[next(n) & 1])}, max(1, number // BATCH), rounds
    )
    out[f"put_messages({BATCH}), per message"] = many["batch"] / BATCH
    return out


def pieces(store: MessageStore, number: int, rounds: int) -> dict[str, float]:
    """ns per call of each piece of a put, alone, with the values a put uses."""
    m = items(100, n=1)[0].message()
    keys = " ".join(m.keys or [])
    uniq = new_uniq_key()
    log = store.commitlog
    encoder = log.encoder
    props = standard_properties_string(uniq, m.tags, keys).encode()
    tail, version = encoder.tail(m.topic.encode(), props)
    total = encoder.size(0, len(m.body), len(tail))
    born = host_bytes(m.born_host)
    crc = fmt.body_crc(m.body)
    now = time.time_ns() // 1_000_000
    record = encoder.encode(total, version, crc, 0, 0, 0, 0, 0, now, born, now, 0, 0, m.body, tail)
    segment = log.segments.last
    if segment is None:
        raise RuntimeError("the store has no segment: put one message first")
    lock = log.put_lock
    wait_for = store.flusher.wait_for

    def lock_round() -> None:
        with lock:
            pass

    return measure_all(
        {
            "UNIQ_KEY (new_uniq_key)": new_uniq_key,
            "properties string + UTF-8": lambda: standard_properties_string(
                uniq, m.tags, keys
            ).encode(),
            "body CRC": lambda: fmt.body_crc(m.body),
            "topic + properties tail": lambda: encoder.tail(m.topic.encode(), props),
            "record encode (header + body + tail)": lambda: encoder.encode(
                total, version, crc, 0, 0, 0, 0, 0, now, born, now, 0, 0, m.body, tail
            ),
            "copy into the mapped segment": lambda: segment.append(record),
            "put lock acquire + release": lock_round,
            "flusher wait (ASYNC_FLUSH)": lambda: wait_for(1),
        },
        number,
        rounds,
    )


def cpu_split(store: MessageStore, seconds: float) -> dict[str, float]:
    """µs of CPU per message: the producer thread against the whole process (dispatcher,
    index and flusher threads included), ``seconds`` of puts, then until dispatched."""
    msgs = [it.message() for it in items(100)]
    put = store.put_message
    p0, c0 = time.thread_time(), os.times()
    n = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for m in msgs:
            put(m)
        n += len(msgs)
    p1 = time.thread_time()
    store.wait_dispatched(60.0)
    c1 = os.times()
    proc = (c1.user - c0.user) + (c1.system - c0.system)
    return {
        "producer thread": (p1 - p0) / n * 1e6,
        "whole process": proc / n * 1e6,
        "other threads (dispatch, index, flush)": (proc - (p1 - p0)) / n * 1e6,
    }


def _open(root: Path, **cfg: Any) -> MessageStore:
    store = MessageStore.open(
        StoreConfig(root_dir=root, flush_disk_type=FlushDiskType.ASYNC_FLUSH, **cfg)
    )
    store.put_message(items(100, n=1)[0].message())  # create + map the segment
    return store


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """All three tables; each on its own store under ``work``."""
    number, rounds, seconds = args.number, args.rounds, args.seconds
    split: dict[str, float] = {}
    for label, cfg in (("", {}), (", index off", {"message_index_enable": False})):
        store = _open(work / f"split{len(split)}", **cfg)
        try:
            split.update({k + label: v for k, v in cpu_split(store, seconds).items()})
        finally:
            store.close()
    # The timed puts and pieces write into this store's log (the pieces out of band), so
    # its dispatcher is stopped first and the store is thrown away, never reopened.
    store = _open(work / "put")
    try:
        store.reput.stop()
        put = whole_put(store, number, rounds)
        parts = pieces(store, number, rounds)
    finally:
        store.abandon()
    return {"put_ns": put, "pieces_ns": parts, "cpu_us_per_message": split}


def report(out: dict[str, Any], args: argparse.Namespace) -> str:
    """The printed tables."""
    number, rounds, seconds = args.number, args.rounds, args.seconds
    lines = [f"the put, ns per message (min of {rounds} rounds x {number:,} calls)"]
    lines += [f"  {k:<52}{v:>8.0f}" for k, v in out["put_ns"].items()]
    lines.append("its pieces, each alone, ns per call")
    lines += [f"  {k:<52}{v:>8.0f}" for k, v in out["pieces_ns"].items()]
    beyond = out["put_ns"]["put_message"] - sum(out["pieces_ns"].values())
    lines.append(f"  {'put_message beyond its pieces':<52}{beyond:>8.0f}")
    lines.append(f"CPU per message, us ({seconds:g} s of puts, then until dispatched)")
    lines += [f"  {k:<52}{v:>8.1f}" for k, v in out["cpu_us_per_message"].items()]
    return "\n".join(lines)


OPTIONS: tuple[Option, ...] = (
    ("--rounds", int, 40, "rounds (the minimum is kept)"),
    ("--number", int, 2_000, "calls per round"),
    ("--seconds", float, 3.0, "seconds of puts for the CPU split"),
)
QUICK = {"rounds": 3, "number": 200, "seconds": 0.3}


def main(argv: list[str] | None = None) -> int:
    """Print the three tables; 0."""
    return bench_main("putpath", __doc__, argv, measure, report, OPTIONS, QUICK)


if __name__ == "__main__":
    raise SystemExit(main())
