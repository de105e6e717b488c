"""In-situ costs for ``python -m mqstore.tools.bench.putpath``: each put step replaced by a
constant inside the real ``put_message``, timed against the plain put."""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
import timeit
from collections.abc import Callable, Iterator
from typing import Any

from mqstore import Message, MessageStore, PutStatus
from mqstore import put as put_module
from mqstore.commitlog.mapped_file import MappedFile
from mqstore.tools.bench._workload import items

_OK = PutStatus.PUT_OK


@contextlib.contextmanager
def _patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def ablations(store: MessageStore, number: int, rounds: int) -> dict[str, float]:
    """ns the whole put saves when one step is replaced by a constant (in situ cost).

    Measured inside the real put, so it includes what isolated micro-benchmarks miss
    (cold caches, argument passing). Each figure is the median over rounds of
    (plain put - ablated put), the two timed back to back.
    """
    msgs = [it.message() for it in items(100, n=64)]
    cases = _ablation_cases(store, msgs[0])
    put = store.put_message
    it = iter(range(1 << 62))
    timer = timeit.Timer(lambda: put(msgs[next(it) & 63]), timer=time.thread_time)
    diffs: dict[str, list[float]] = {name: [] for name in cases}
    bases: list[float] = []
    for r in range(rounds):
        for name, ctx in cases.items():
            # base and ablated back to back, order alternating: the pair shares the noise
            base = timer.timeit(number) if r % 2 == 0 else None
            with ctx():
                abl = timer.timeit(number)
            if base is None:
                base = timer.timeit(number)
            bases.append(base)
            diffs[name].append((base - abl) / number * 1e9)
    out = {"(plain put_message)": min(bases) / number * 1e9}
    out.update({k: statistics.median(v) for k, v in diffs.items()})
    return out


def _ablation_cases(store: MessageStore, msg: Message) -> dict[str, Callable[[], Any]]:
    """For each put step, a context manager factory that replaces it by a constant."""
    cl = store.commitlog
    enc, uniq = store._prepare(msg)  # type: ignore[misc]
    props, _ = store._properties(msg)
    frame = store._frame(0, 100, msg.topic.encode(), props)
    rec = cl._pack(enc.total, 1, enc.crc, 0, 0, 0, 0, 0, 0, enc.born_host, 0, 0, 0,
                   msg.body, enc.tail)  # fmt: skip
    ts = cl._clock()

    class _NoCrc:
        @staticmethod
        def crc32(_b: bytes) -> int:
            return 0

    def no_copy(mf: MappedFile, data: bytes) -> int:
        pos = mf.wrote_position
        mf.wrote_position = pos + len(data)
        return pos

    cases: dict[str, Callable[[], Any]] = {
        "UNIQ_KEY generation": lambda: _patched(store, "_next_uniq", lambda: uniq),
        "whole _properties (keys, UNIQ_KEY, string, encode)": lambda: _patched(
            store, "_properties", lambda _m: (props, uniq)
        ),
        "frame (tail bytes)": lambda: _patched(store, "_frame", lambda *_a: frame),
        "crc32 of the body": lambda: _patched(put_module, "zlib", _NoCrc),
        "put_lock (uncontended)": lambda: _patched(cl, "put_lock", contextlib.nullcontext()),
        "clock read": lambda: _patched(cl, "_clock", lambda: ts),
        "encode (pack + concat)": lambda: _patched(cl, "_pack", lambda *_a: rec),
        "copy into the mapping": lambda: _patched(MappedFile, "append", no_copy),
        "flusher.wait_for": lambda: _patched(store.flusher, "wait_for", lambda _n: _OK),
        "garbage collector (gc.disable)": _gc_off,
    }  # fmt: skip
    return cases


@contextlib.contextmanager
def _gc_off() -> Iterator[None]:
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
