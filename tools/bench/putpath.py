"""``mqstore bench putpath``: what one put costs, and what it is made of.

Three tables, on stores with the default config (ASYNC_FLUSH, the dispatcher thread),
100-byte bodies with a tag and a key (the commitlog benchmark's messages):

1. **The put**, in nanoseconds of this thread's CPU per call: ``put_message``, and
   ``put_messages`` of 32 per message. The consume-queue dispatcher is stopped, so
   what is timed is the producer's own work.
2. **Its pieces**, each timed alone with the values a put uses, the steps every
   message takes: framing it outside the put lock (``MessageFramer.frame``; of which
   the UNIQ_KEY, the properties string and the body CRC), then ``CommitLog.append``
   of the one frame (the put lock, the reservation, the record packed into the
   mapping); for a batch, ``frame_batch`` and ``append`` of its frames, per message.
   What a put costs beyond framing and appending is the writer's own
   work: the state check, the msg id, the result.
3. **CPU per message** over a few seconds of puts on a fresh store with its dispatcher
   running (``put_message``, and ``put_messages`` of 32): the producer thread against
   the whole process (dispatcher, index and flusher included), with the index on and
   off.

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

from mqstore import MessageStore, StoreConfig
from mqstore.commitlog import format as fmt
from mqstore.commitlog.commitlog import FRAME_UNIQ
from mqstore.message import standard_properties_string
from mqstore.put_frame import Refusal
from mqstore.tools.bench._harness import Benchmark, Option
from mqstore.tools.bench._workload import items

BATCH = 32
BATCH_PUT = f"put_messages({BATCH}), per message"
FRAMING = "framing (MessageFramer.frame)"
APPEND = "append (CommitLog.append of one frame)"
BATCH_FRAMING = "batch framing (frame_batch), per message"
BATCH_APPEND = "batch append (CommitLog.append), per message"

OPTIONS = (
    Option("--rounds", int, 40, "rounds (the minimum is kept)", quick=3),
    Option("--number", int, 2_000, "calls per round", quick=200),
    Option("--seconds", float, 3.0, "seconds of puts for the CPU split", quick=0.3),
)


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
    out[BATCH_PUT] = many["batch"] / BATCH
    return out


def pieces(store: MessageStore, number: int, rounds: int) -> dict[str, float]:
    """ns per call (a batch's: per message) of each step of a common put, alone, with
    the values a put uses. The appends write into the store's log out of band."""
    msgs = [it.message() for it in items(100, n=BATCH)]
    m = msgs[0]
    keys = " ".join(m.keys or [])
    framer = store.writer.framer
    frame = framer.frame(m)
    frames = framer.frame_batch(msgs)
    if isinstance(frame, Refusal) or isinstance(frames, Refusal):
        raise RuntimeError("the store refused the benchmark's messages")
    one = (frame,)
    uniq = frame[FRAME_UNIQ]
    log = store.commitlog
    out = measure_all(
        {
            FRAMING: lambda: framer.frame(m),
            "  of which UNIQ_KEY": framer.next_uniq,
            "  of which properties string + UTF-8": lambda: standard_properties_string(
                uniq, m.tags, keys
            ).encode(),
            "  of which body CRC": lambda: fmt.body_crc(m.body),
            APPEND: lambda: log.append(one),
        },
        number,
        rounds,
    )
    many = measure_all(
        {
            BATCH_FRAMING: lambda: framer.frame_batch(msgs),
            BATCH_APPEND: lambda: log.append(frames),
        },
        max(1, number // BATCH),
        rounds,
    )
    out.update({k: v / BATCH for k, v in many.items()})
    return out


def cpu_split(store: MessageStore, seconds: float, batch: int = 1) -> dict[str, float]:
    """µs of CPU per message: the producer thread against the whole process (dispatcher,
    index and flusher threads included), ``seconds`` of puts (``put_messages`` of
    ``batch`` when it is more than 1), then until dispatched."""
    msgs = [it.message() for it in items(100)]
    put, put_many = store.put_message, store.put_messages
    batches = [msgs[i : i + batch] for i in range(0, len(msgs) - batch + 1, batch)]
    p0, c0 = time.thread_time(), os.times()
    n = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        if batch == 1:
            for m in msgs:
                put(m)
        else:
            for b in batches:
                put_many(b)
        n += len(batches) * batch
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
    """A store with the default config (ASYNC_FLUSH, dispatcher thread) but ``cfg``."""
    store = MessageStore.open(StoreConfig(root_dir=root, **cfg))
    store.put_message(items(100, n=1)[0].message())  # create + map the segment
    return store


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """All three tables; each on its own store under ``work``."""
    number, rounds, seconds = args.number, args.rounds, args.seconds
    split: dict[str, float] = {}
    runs: tuple[tuple[str, dict[str, Any], int], ...] = (
        ("", {}, 1),
        (", index off", {"message_index_enable": False}, 1),
        (f", put_messages({BATCH})", {}, BATCH),
    )
    for i, (label, cfg, batch) in enumerate(runs):
        store = _open(work / f"split{i}", **cfg)
        try:
            split.update({k + label: v for k, v in cpu_split(store, seconds, batch).items()})
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
    lines += [f"  {k:<60}{v:>8.0f}" for k, v in out["put_ns"].items()]
    lines.append("its steps, each alone, ns per call (a batch's: per message)")
    parts = out["pieces_ns"]
    lines += [f"  {k:<60}{v:>8.0f}" for k, v in parts.items()]
    put = out["put_ns"]
    beyond = put["put_message"] - parts[FRAMING] - parts[APPEND]
    lines.append(f"  {'put_message beyond framing + append':<60}{beyond:>8.0f}")
    beyond = put[BATCH_PUT] - parts[BATCH_FRAMING] - parts[BATCH_APPEND]
    lines.append(f"  {f'put_messages({BATCH}) beyond framing + append':<60}{beyond:>8.0f}")
    lines.append(f"CPU per message, us ({seconds:g} s of puts, then until dispatched)")
    lines += [f"  {k:<60}{v:>8.1f}" for k, v in out["cpu_us_per_message"].items()]
    return "\n".join(lines)


main = Benchmark("putpath", __doc__, OPTIONS, measure, report).main


if __name__ == "__main__":
    raise SystemExit(main())
