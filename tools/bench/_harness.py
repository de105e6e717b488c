"""Timing plumbing shared by the benchmark contenders: no contender logic here.

Every contender is measured the same way, so differences come from the contender:

* a single-thread contender processes the same pre-built work items in chunks and
  checks the clock once per chunk (:func:`drive`), so timing costs nothing per put;
* a multi-thread contender runs ``n`` workers released together by a barrier, each
  repeating one operation until a deadline and recording its latency
  (:func:`run_threads`); the rate is every completed operation over the wall time
  from release to the last worker's return;
* between contenders :func:`settle` syncs the file system, so one contender's dirty
  pages are not written back on the next one's clock.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(slots=True)
class Run:
    """One repetition of one contender: ``ops`` operations in ``seconds``."""

    ops: int
    seconds: float
    latencies_ns: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        """Operations per second."""
        return self.ops / self.seconds if self.seconds > 0 else 0.0


def percentile(sorted_values: Sequence[int], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of already sorted values; 0.0 when empty.

    >>> percentile([1, 2, 3, 4], 50), percentile([1, 2, 3, 4], 99), percentile([], 50)
    (2.0, 4.0, 0.0)
    """
    n = len(sorted_values)
    if n == 0:
        return 0.0
    rank = max(1, -(-n * q // 100))  # ceil(n * q / 100), at least the first value
    return float(sorted_values[min(n, int(rank)) - 1])


def latency_ms(latencies_ns: list[int]) -> dict[str, float]:
    """p50/p99/p99.9/max of nanosecond latencies, in milliseconds."""
    s = sorted(latencies_ns)
    return {
        "p50_ms": percentile(s, 50) / 1e6,
        "p99_ms": percentile(s, 99) / 1e6,
        "p999_ms": percentile(s, 99.9) / 1e6,
        "max_ms": (s[-1] if s else 0) / 1e6,
    }


def median(values: Sequence[float]) -> float:
    """Median; 0.0 for no values."""
    return float(statistics.median(values)) if values else 0.0


def drive(
    duration: float,
    items: Sequence[Any],
    process: Callable[[Sequence[Any]], None],
    per_item: int = 1,
) -> Run:
    """Call ``process(items)`` (a whole chunk each time) until ``duration`` has passed.

    ``process`` handles every element of ``items``; the clock is read once per chunk.
    Counts ``per_item`` operations per element (e.g. 32 messages per batch).
    """
    pc = time.perf_counter
    n = len(items) * per_item
    done = 0
    t0 = pc()
    deadline = t0 + duration
    while True:
        process(items)
        done += n
        t = pc()
        if t >= deadline:
            return Run(done, t - t0)


Worker = Callable[[], bool | None]
"""One operation of a multi-thread contender (one put, one insert+commit).

Returning ``False`` means "gave up at the deadline, not done": it is not counted and
the worker stops (a SQLite writer still waiting for the lock when time is up).
"""


class Deadline:
    """When a multi-thread run ends, in ``time.perf_counter_ns()`` units."""

    __slots__ = ("ns",)

    def __init__(self) -> None:
        self.ns = 1 << 62

    def passed(self) -> bool:
        """True once the run's time is up."""
        return time.perf_counter_ns() >= self.ns


MakeWorker = Callable[[int, Deadline], tuple[Worker, Callable[[], None]]]


def run_threads(n_threads: int, duration: float, make_worker: MakeWorker) -> Run:
    """Run ``n_threads`` workers for ``duration`` seconds; each times every operation.

    ``make_worker(i)`` is called inside thread ``i`` (SQLite connections must be
    created in the thread that uses them) and returns (operation, cleanup); the shared
    :class:`Deadline` it also gets is set (``perf_counter_ns``) when the clock starts.
    A worker that raises stops the whole run: the exception is re-raised here.
    """
    ready = threading.Barrier(n_threads + 1)
    go = threading.Event()
    lat: list[list[int]] = [[] for _ in range(n_threads)]
    errors: list[BaseException] = []
    deadline = Deadline()

    def body(i: int) -> None:
        op, cleanup = make_worker(i, deadline)
        append = lat[i].append
        ns = time.perf_counter_ns
        try:
            ready.wait()
            go.wait()
            deadline_ns = deadline.ns
            while True:
                t0 = ns()
                if t0 >= deadline_ns or errors:
                    break
                if op() is False:
                    break
                append(ns() - t0)
        except BaseException as e:
            errors.append(e)
            ready.abort()
        finally:
            cleanup()

    elapsed = _clocked(n_threads, body, ready, go, deadline, duration)
    if errors:
        raise errors[0]
    merged = [x for part in lat for x in part]
    return Run(len(merged), elapsed, merged)


def _clocked(
    n_threads: int,
    body: Callable[[int], None],
    ready: threading.Barrier,
    go: threading.Event,
    deadline: Deadline,
    duration: float,
) -> float:
    """Run ``body(i)`` in ``n_threads`` threads, start the clock once all reach ``ready``,
    set ``deadline`` and ``go``, join; return the seconds from the start to the last join."""
    threads = [
        threading.Thread(target=body, args=(i,), name=f"bench-{i}") for i in range(n_threads)
    ]
    for t in threads:
        t.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        ready.wait()  # every worker has its connection: start the clock now
    t0 = time.perf_counter_ns()
    deadline.ns = t0 + int(duration * 1e9)
    go.set()
    for t in threads:
        t.join()
    return (time.perf_counter_ns() - t0) / 1e9


def chunked(seq: Sequence[Any], size: int) -> list[list[Any]]:
    """Consecutive slices of ``size`` (the last may be shorter).

    >>> chunked([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4], [5]]
    """
    return [list(seq[i : i + size]) for i in range(0, len(seq), size)]


def settle() -> None:
    """Write back every dirty page now, outside any contender's clock."""
    os.sync()


def _mount_of(path: Path) -> tuple[str, str]:
    """(mount point, file system type) holding ``path``, from /proc/mounts."""
    best = ("/", "unknown")
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            mounts = [line.split()[1:3] for line in f if len(line.split()) >= 3]
    except OSError:
        return best
    real = str(path.resolve())
    for mnt, fstype in mounts:
        inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
        if inside and len(mnt) >= len(best[0]):
            best = (mnt, fstype)
    return best


def pick_base_dir(explicit: str | None, near: Path) -> Path:
    """Where the benchmark writes: ``explicit``, else ``$MQSTORE_BENCH_DIR``, else the
    system temp dir when it is on the same device as ``near`` and not tmpfs, else
    ``near`` itself (a memory file system would make every fsync free).
    """
    chosen = explicit or os.environ.get("MQSTORE_BENCH_DIR")
    if chosen:
        return Path(chosen)
    tmp = Path(tempfile.gettempdir())
    try:
        same_dev = os.stat(tmp).st_dev == os.stat(near).st_dev
    except OSError:
        same_dev = False
    if same_dev and _mount_of(tmp)[1] not in ("tmpfs", "ramfs"):
        return tmp
    return near


def fs_type(path: Path) -> str:
    """File system type of ``path`` (for the report)."""
    return _mount_of(path)[1]


def fresh_dirs(root: Path, prefix: str) -> Iterator[Path]:
    """Endless new, empty directories under ``root`` named ``prefix-N``."""
    n = 0
    while True:
        n += 1
        d = root / f"{prefix}-{n}"
        d.mkdir(parents=True)
        yield d
