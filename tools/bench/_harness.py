"""The one harness every benchmark in ``mqstore.tools.bench`` uses: no benchmark logic here.

Every benchmark module has ``main(argv) -> int`` and is run as ``mqstore bench NAME`` or
``python -m mqstore.tools.bench.NAME``; :func:`parser` gives each the options the CLI
passes (``--quick``, ``--json``, ``--dir``; ``--plot`` where there is a chart). A module
that needs no more declares itself as one :class:`Benchmark`, whose ``main`` is its own.

Every contender is measured the same way, so differences come from the contender:

* a single-thread contender processes the same pre-built work items in chunks and
  checks the clock once per chunk (:func:`drive`), so timing costs nothing per put;
* a multi-thread contender runs ``n`` workers released together by a barrier, each
  repeating one operation until a deadline and recording its latency
  (:func:`run_threads`); the rate is every completed operation over the wall time
  from release to the last worker's return;
* a plan of contenders runs interleaved (:func:`interleave`): each repetition runs
  every contender once, in the same order, so a noisy episode of the machine hits
  both sides of a comparison; results are medians over repetitions;
* between contenders :func:`settle` syncs the file system, so one contender's dirty
  pages are not written back on the next one's clock.

Everything is written under one temporary directory on a real disk (:func:`work_dir`:
``--dir``, else ``$MQSTORE_BENCH_DIR``, else the system temp dir unless it is a
memory file system), removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[2]


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


def percentile(sorted_values: Sequence[float], q: float) -> float:
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


@dataclass(frozen=True, slots=True)
class Contender:
    """One thing measured: ``run(workdir, duration)`` gives one repetition."""

    key: str
    label: str
    section: str
    durability: str
    run: Callable[[Path, float], Run]
    kind: str = "rate"  # "rate", "sync" (latencies, fsyncs) or "recovery"


def progress(total: int, desc: str) -> Any:
    """A progress bar on stderr (the report goes to stdout)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True)


def interleave(
    plan: Sequence[Contender], work: Path, duration: float, reps: int, desc: str
) -> dict[str, list[Run]]:
    """Run every contender of ``plan`` ``reps`` times, interleaved, each in a fresh
    directory under ``work`` that is removed (and the file system settled) right after.

    Every :class:`Run` gets ``extra["loadavg_1m"]`` (load when it started) and
    ``extra["wall_s"]`` (its wall time, setup and cleanup included).
    """
    per: dict[str, list[Run]] = {c.key: [] for c in plan}
    with progress(reps * len(plan), desc) as bar:
        for rep in range(reps):
            for c in plan:
                bar.set_description(f"rep {rep + 1}/{reps} {c.key}")
                d = work / f"{c.key}-{rep}"
                d.mkdir()
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                try:
                    run = c.run(d, duration)
                    run.extra["loadavg_1m"] = load
                    per[c.key].append(run)
                finally:
                    shutil.rmtree(d, ignore_errors=True)
                    settle()
                run.extra["wall_s"] = time.perf_counter() - t0
                bar.update(1)
    return per


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


@contextlib.contextmanager
def work_dir(explicit: str | None, prefix: str) -> Iterator[Path]:
    """A new temporary directory under :func:`pick_base_dir`, removed on exit."""
    base = pick_base_dir(explicit, _REPO)
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def machine(work: Path | None = None) -> dict[str, Any]:
    """The conditions of a run, for its report: CPUs, load, versions, file system."""
    out: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu_count": os.cpu_count(),
        "loadavg_before": list(os.getloadavg()),
        "python": platform.python_version(),
        "sqlite_version": sqlite3.sqlite_version,
        "persist_queue_version": _version("persist-queue"),
        "platform": platform.platform(),
    }
    if work is not None:
        out["dir"] = str(work)
        out["fs_type"] = fs_type(work)
    return out


def _version(distribution: str) -> str | None:
    """The installed version of ``distribution``; None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def run_meta(
    name: str, args: argparse.Namespace, reps: int, duration: float, work: Path
) -> dict[str, Any]:
    """The report's ``meta`` of an interleaved benchmark, taken before it runs."""
    return {
        "command": f"mqstore bench {name}" + (" --quick" if args.quick else ""),
        "quick": bool(args.quick),
        "repetitions": reps,
        "duration_s": duration,
        **machine(work),
    }


def parser(name: str, doc: str | None, *, plot: bool = False) -> argparse.ArgumentParser:
    """The options every benchmark takes: ``--quick``, ``--json FILE``, ``--dir DIR``
    (and ``--plot FILE.png`` when it draws one); ``mqstore bench NAME`` passes them on."""
    ap = argparse.ArgumentParser(
        prog=f"mqstore bench {name}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="small counts (smoke run)")
    ap.add_argument("--json", default=None, metavar="FILE", help="write every figure here")
    ap.add_argument("--dir", default=None, help="parent of the temp dir (must be a real disk)")
    if plot:
        ap.add_argument("--plot", default=None, metavar="FILE.png", help="chart of the figures")
    return ap


def write_json(path: str | None, result: dict[str, Any]) -> None:
    """Write ``result`` to ``path`` as indented JSON (nothing when ``path`` is None)."""
    if path:
        Path(path).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


@dataclass(frozen=True, slots=True)
class Option:
    """One option of a benchmark: ``flag`` parsed as ``kind``, ``default`` unless given.

    ``quick`` is its value under ``--quick`` (a smoke run); None keeps ``default``.
    """

    flag: str
    kind: type
    default: Any
    help: str
    quick: Any = None


Measure = Callable[[Path, argparse.Namespace], dict[str, Any]]
"""``measure(work, args)``: run the benchmark in the empty directory ``work``; its figures."""

Report = Callable[[dict[str, Any], argparse.Namespace], str]
"""``report(result, args)``: the table printed for ``measure``'s figures."""


@dataclass(frozen=True, slots=True)
class Benchmark:
    """A benchmark declared once, in its module: :meth:`main` is the module's ``main``.

    ``name`` is the one ``mqstore bench`` takes, ``doc`` the module docstring (the
    ``--help`` text); without ``report``, ``measure`` prints its own rows as they come.
    """

    name: str
    doc: str | None
    options: tuple[Option, ...]
    measure: Measure
    report: Report | None = None

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Parse :func:`parser`'s options plus :attr:`options` (``--quick`` sets their
        quick values), ``measure(work, args)`` in a fresh :func:`work_dir`, print
        ``report(result, args)``, write ``--json``; 0."""
        ap = parser(self.name, self.doc)
        quick: dict[str, Any] = {}
        for o in self.options:
            help_text = f"{o.help} (default {o.default})"
            action = ap.add_argument(o.flag, type=o.kind, default=o.default, help=help_text)
            if o.quick is not None:
                quick[action.dest] = o.quick
        args = ap.parse_args(argv)
        if args.quick:
            vars(args).update(quick)
        with work_dir(args.dir, f"mqstore-bench-{self.name}-") as work:
            out = {"benchmark": self.name, **self.measure(work, args)}
        if self.report is not None:
            print(self.report(out, args))
        write_json(args.json, out)
        return 0


# -------------------------------------------------------- scenario plumbing


def run_parallel(n_threads: int, work: Callable[[int], int]) -> tuple[int, float]:
    """Run ``work(i)`` on ``n_threads`` threads released together; return (the sum of
    their results, seconds from the release to the last thread's end)."""
    results = [0] * n_threads
    start = threading.Barrier(n_threads + 1)

    def body(i: int) -> None:
        start.wait()
        results[i] = work(i)

    pool = [threading.Thread(target=body, args=(i,), name=f"bench-{i}") for i in range(n_threads)]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    return sum(results), time.perf_counter() - t0


def wait_until(check: Callable[[], bool], timeout: float, what: str, poll: float = 0.01) -> None:
    """Poll ``check`` every ``poll`` seconds until it is true.

    Raises:
        TimeoutError: ``check`` was still false after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_listening(
    proc: subprocess.Popen[bytes], port: int, what: str, timeout: float = 30.0
) -> None:
    """Wait until ``proc`` accepts TCP connections on 127.0.0.1:``port``.

    Raises:
        RuntimeError: ``proc`` exited first.
        TimeoutError: it did not listen within ``timeout`` seconds.
    """

    def listening() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    wait_until(listening, timeout, what, poll=0.05)


def spawn_cli(args: Sequence[str]) -> subprocess.Popen[bytes]:
    """``mqstore ARGS`` in a child process (its own interpreter and GIL), output discarded."""
    cmd = [sys.executable, "-m", "mqstore.tools.cli", *args]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate ``proc``; kill it if it has not exited 20 s later."""
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def fresh_dirs(root: Path, prefix: str) -> Iterator[Path]:
    """Endless new, empty directories under ``root`` named ``prefix-N``."""
    n = 0
    while True:
        n += 1
        d = root / f"{prefix}-{n}"
        d.mkdir(parents=True)
        yield d
