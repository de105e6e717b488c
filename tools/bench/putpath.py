"""Where the microseconds of one ``put_message`` go (ASYNC_FLUSH, 100-byte body).

``python -m mqstore.tools.bench.putpath [--rounds N]`` times, in one process and on the same
open store, the whole put and each step of ``put_message -> _prepare -> CommitLog.append``
executed on its own with the values the real path uses; then a few alternatives,
each checked to produce the same record bytes. Step costs are the minimum over
rounds (the least disturbed measurement on a noisy machine) in nanoseconds per
call; "rest" rows are the whole minus its timed parts: attribute checks,
argument passing and calls.

Since the put fast path landed (``mqstore.put``), ``put_message`` of this workload takes
it: the whole-put rows measure the fast path, while the step rows (``_prepare``,
``_properties``, ``CommitLog.append``) dissect the general path it replaced, and
ablations of steps the fast path skips (encode, ``MappedFile.append``) save ~0.

A diagnostic, not a benchmark of record: it reads private attributes of the store
(``_prepare``, ``_properties``, ``_frame``) and breaks when they change. The step
timings scribble on a throwaway store with its consume-queue dispatcher stopped; the
CPU split (producer thread vs the whole process, dispatcher included) runs first,
on a clean store.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import struct
import tempfile
import time
import timeit
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore import FlushDiskType, MessageStore, PutStatus, StoreConfig
from mqstore.commitlog.commitlog import EncodedMessage
from mqstore.commitlog.mapped_file import MappedFile
from mqstore.message import new_uniq_key, standard_properties_string
from mqstore.message_store import PutResult
from mqstore.tools.bench._putpath_ablate import ablations
from mqstore.tools.bench._workload import items

_tuple_new = tuple.__new__
_OK = PutStatus.PUT_OK


def measure_all(fns: dict[str, Callable[[], Any]], number: int, rounds: int) -> dict[str, float]:
    """ns per call of each function: the minimum over ``rounds`` of the mean CPU time
    of this thread (``thread_time``: time the machine gave to other processes is not
    counted) over ``number`` calls, rounds interleaved (every function once per round) so a busy
    moment of the machine hits all alike, minus the cost of calling an empty lambda
    the same way (timeit's loop and the call)."""
    timers = {name: timeit.Timer(fn, timer=time.thread_time) for name, fn in fns.items()}
    empty = timeit.Timer(lambda: None, timer=time.thread_time)
    best = dict.fromkeys(timers, float("inf"))
    base = float("inf")
    for _ in range(rounds):
        base = min(base, empty.timeit(number))
        for name, t in timers.items():
            best[name] = min(best[name], t.timeit(number))
    return {name: max(0.0, (v - base) / number * 1e9) for name, v in best.items()}


def steps(store: MessageStore, number: int, rounds: int) -> dict[str, float]:
    """ns per call of the whole put and of each step on its path."""
    msgs = [it.message() for it in items(100, n=64)]
    m = msgs[0]
    cl = store.commitlog
    enc, uniq = store._prepare(m)  # type: ignore[misc]
    props, _ = store._properties(m)
    topic_b = m.topic.encode()
    mf = cl.segments.last
    assert mf is not None
    rec = cl._pack(
        enc.total, 1, enc.crc, 0, 0, 0, 0, 0, 0, enc.born_host, 0, 0, 0, m.body, enc.tail
    )
    keys = m.keys
    lock = cl.put_lock
    host_hex = store._host_hex
    put = store.put_message
    it = iter(range(1 << 62))

    def lock_only() -> None:
        with lock:
            pass

    t: dict[str, Callable[[], Any]] = {
        "put_message (whole)": lambda: put(msgs[next(it) & 63]),
        "_prepare": lambda: store._prepare(m),
        "  _properties": lambda: store._properties(m),
        "    keys ' '.join(genexpr)": lambda: " ".join(k for k in keys if k),  # type: ignore[union-attr]
        "    new_uniq_key()": new_uniq_key,
        "    properties f-string + encode": lambda: standard_properties_string(
            uniq, m.tags, "order-000000"
        ).encode("utf-8"),
        "  frame (tail bytes, size)": lambda: store._frame(0, 100, topic_b, props),
        "  crc32 of body": lambda: zlib.crc32(m.body) & 0x7FFFFFFF,
        "  EncodedMessage + queue key": lambda: _tuple_new(
            EncodedMessage, (f"{m.topic}-{m.queue_id}", 0, 0, 0, None, b"", 0, 0, b"", 0, b"", 1, 0)
        ),
        "CommitLog.append": lambda: cl.append(enc),
        "  put_lock acquire+release": lock_only,
        "  clock time.time_ns()//1e6": cl._clock,
        "  encode (pack + body + tail)": lambda: cl._pack(
            enc.total, 1, enc.crc, 0, 0, 7, 7, 0, 7, enc.born_host, 7, 0, 0, m.body, enc.tail
        ),
        "  MappedFile.append (mmap copy)": lambda: mf.append(rec),
        "flusher.wait_for (async)": lambda: store.flusher.wait_for(1),
        "PutResult + msg id": lambda: _tuple_new(
            PutResult, (None, 1, 2, f"{host_hex}{12345:016X}", 3, 4, uniq, None)
        ),
    }
    out = measure_all(t, number, rounds)
    batches = [msgs[i : i + 32] for i in range(0, 64, 32)]
    put_messages = store.put_messages
    b = measure_all(
        {"batch": lambda: put_messages(batches[next(it) & 1])}, max(1, number // 32), rounds
    )
    out["put_messages(32), per message"] = b["batch"] / 32
    return out


def _direct_write(store: MessageStore) -> tuple[Callable[[], None], Callable[[], None]]:
    """(current, alternative) record writers: pack + concat + copy vs pack_into + 2 copies."""
    cl = store.commitlog
    mf = cl.segments.last
    assert mf is not None
    mm = mf._mm
    m = items(100, n=1)[0].message()
    enc, _ = store._prepare(m)  # type: ignore[misc]
    hdr = struct.Struct(">iiiiiqqiq8sq8siqi")
    hsize = hdr.size
    args = (
        enc.total,
        -626843481,
        enc.crc,
        0,
        0,
        5,
        9,
        0,
        11,
        enc.born_host,
        11,
        cl.store_host,
        0,
        0,
        len(m.body),
    )
    body, tail = m.body, enc.tail
    blen = len(body)
    total = enc.total
    pack_into = hdr.pack_into

    def current() -> None:
        mf.append(
            cl._pack(enc.total, 1, enc.crc, 0, 0, 5, 9, 0, 11, enc.born_host, 11, 0, 0, body, tail)
        )

    def alternative() -> None:
        pos = mf.wrote_position
        pack_into(mm, pos, *args)
        b = pos + hsize
        mm[b : b + blen] = body
        mm[b + blen : pos + total] = tail
        mf.wrote_position = pos + total

    _check_same_bytes(mf, current, alternative, total)
    return current, alternative


def _check_same_bytes(
    mf: MappedFile, current: Callable[[], None], alternative: Callable[[], None], total: int
) -> None:
    """Run both writers back to back in ``mf``: their ``total``-byte records must match."""
    mm = mf._mm
    # same bytes at the same place
    start = mf.wrote_position
    current()
    a = bytes(mm[start : start + total])
    alternative()
    assert bytes(mm[start + total : start + 2 * total]) == a, "alternative writes other bytes"


def _uniq_table() -> Callable[[], str]:
    """``new_uniq_key`` with the 4-hex-digit counter suffix looked up, not formatted."""
    from mqstore import message as message_mod

    g = message_mod._default_uniq
    hex4 = [f"{i:04X}" for i in range(65536)]
    counter = itertools.count(1)
    time_ns = time.time_ns

    def next_id() -> str:
        now = time_ns() // 1_000_000
        if now != g._last_ms:
            if now >= g._next_month_ms:
                g._roll_month(now)
            g._last_ms = now
            g._time_prefix = f"{g._prefix}{(now - g._month_start_ms) & 0xFFFFFFFF:08X}"
        return g._time_prefix + hex4[next(counter) & 0xFFFF]

    a, b = new_uniq_key(), next_id()
    assert len(a) == len(b) == 32 and a[:20] == b[:20], (a, b)  # same host, pid, loader
    return next_id


def alternatives(store: MessageStore, number: int, rounds: int) -> dict[str, tuple[float, float]]:
    """(current ns, alternative ns) for each suggested change, same output checked."""
    msgs = [it.message() for it in items(100, n=64)]
    m = msgs[0]
    keys = m.keys
    assert isinstance(keys, list)
    assert " ".join(k for k in keys if k) == (keys[0] if len(keys) == 1 else "")
    cur_w, alt_w = _direct_write(store)
    hx = store._host_hex
    pairs: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "keys: genexpr join -> 1-key fast path": (
            lambda: " ".join(k for k in keys if k),
            lambda: keys[0] if len(keys) == 1 and keys[0] else " ".join(keys),
        ),
        "record: pack+concat+copy -> pack_into mmap + 2 copies": (cur_w, alt_w),
        "UNIQ_KEY: :04X format -> 65536-entry hex table": (new_uniq_key, _uniq_table()),
        "PutResult: with msg id f-string -> without": (
            lambda: _tuple_new(PutResult, (_OK, 1, 2, f"{hx}{123456:016X}", 3, 4, "u", None)),
            lambda: _tuple_new(PutResult, (_OK, 1, 2, hx, 3, 4, "u", None)),
        ),
    }
    fns = {f"{name}|{i}": f for name, ab in pairs.items() for i, f in enumerate(ab)}
    got = measure_all(fns, number, rounds)
    out = {name: (got[f"{name}|0"], got[f"{name}|1"]) for name in pairs}
    return out


def cpu_split(store: MessageStore, seconds: float) -> dict[str, float]:
    """µs of CPU per message: producer thread alone vs the whole process (the
    consume-queue dispatcher, index and flusher threads included), puts for
    ``seconds`` then waiting until the dispatcher has caught up."""
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
    reput = getattr(store, "reput", None)
    if reput is not None:
        reput.wait_until(store.max_physical_offset, 60.0)
    c1 = os.times()
    proc = (c1.user - c0.user) + (c1.system - c0.system)
    return {
        "producer thread": (p1 - p0) / n * 1e6,
        "whole process": proc / n * 1e6,
        "other threads (dispatch, index, flush)": (proc - (p1 - p0)) / n * 1e6,
        "messages": n,
    }


def _open(root: Path, **cfg: Any) -> MessageStore:
    store = MessageStore.open(
        StoreConfig(root_dir=root, flush_disk_type=FlushDiskType.ASYNC_FLUSH, **cfg)
    )
    store.put_message(items(100, n=1)[0].message())  # create + map the segment
    return store


def _print_report(
    args: argparse.Namespace,
    st: dict[str, float],
    abl: dict[str, float],
    alt: dict[str, tuple[float, float]],
    split: dict[str, float],
) -> None:
    """Print the step, in-situ, alternatives and CPU tables."""
    whole = st["put_message (whole)"]
    print(f"put path, ns per call (min of {args.rounds} rounds x {args.number:,} calls)")
    for name, ns in st.items():
        print(f"  {name:<36}{ns:>8.0f}  {ns / whole:>6.1%}")
    parts = ("_prepare", "CommitLog.append", "flusher.wait_for (async)", "PutResult + msg id")
    print(f"  {'rest of put_message':<36}{whole - sum(st[p] for p in parts):>8.0f}")
    sub = [k for k in st if k.startswith("  ") and not k.startswith("    ")]
    prep = [k for k in sub if list(st).index(k) < list(st).index("CommitLog.append")]
    app = [k for k in sub if k not in prep]
    print(f"  {'rest of _prepare':<36}{st['_prepare'] - sum(st[k] for k in prep):>8.0f}")
    print(f"  {'rest of append':<36}{st['CommitLog.append'] - sum(st[k] for k in app):>8.0f}")
    print("in situ: ns the whole put saves when one step is replaced by a constant (median of")
    print("paired differences; the plain row is the fastest plain put seen)")
    for name, ns in abl.items():
        print(f"  {name:<56}{ns:>7.0f}")
    print("alternatives (same output checked), ns per call: current -> alternative")
    for name, (a, b) in alt.items():
        print(f"  {name:<56}{a:>7.0f} -> {b:>6.0f}  ({a - b:+.0f})")
    print("CPU per message, us (3 s of puts, then until the dispatcher caught up)")
    for name, us in split.items():
        if not name.startswith("messages"):
            print(f"  {name:<56}{us:>7.1f}")


def main(argv: list[str] | None = None) -> int:
    """Print the step table and the alternatives table."""
    ap = argparse.ArgumentParser(prog="python -m mqstore.tools.bench.putpath", description=__doc__)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--number", type=int, default=2_000)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mqstore-putpath-"))
    try:
        # A clean store for the CPU split: the dispatcher runs as in production.
        store = _open(root / "split")
        try:
            split = cpu_split(store, 3.0)
        finally:
            store.close()
        store = _open(root / "split-noindex", message_index_enable=False)
        try:
            split.update({f"{k}, index off": v for k, v in cpu_split(store, 3.0).items()})
        finally:
            store.close()
        # The step timings write records out of band (and ablations write nothing where
        # a record should be): the consume-queue dispatcher is stopped first, it must
        # not read this log. The store is thrown away, never reopened.
        store = _open(root / "steps")
        try:
            reput = getattr(store, "reput", None)
            if reput is not None:
                reput.stop()
            st = steps(store, args.number, args.rounds)
            abl = ablations(store, args.number, args.rounds)
            alt = alternatives(store, args.number, args.rounds)
        finally:
            store.abandon()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _print_report(args, st, abl, alt, split)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
