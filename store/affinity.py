"""CPU affinity: keep a store's Python threads on one CPU, its dispatcher on others.

Why this exists. CPython runs one thread's Python code at a time (the GIL), so
spreading a process's threads over several CPUs buys nothing for Python code, but
every hand-off between threads on different CPUs costs a cross-CPU wake-up: an
inter-processor interrupt, which on a virtual machine is also a VM exit. Under
SYNC_FLUSH each acknowledged put is one such hand-off (the producer sleeps until the
group commit covering it is done, then is woken), plus the GIL changing hands. So
many SYNC_FLUSH producers are bound by hand-offs, and they go markedly faster with
the producers on one CPU and the dispatcher process (``StoreConfig.dispatch_process``)
on the other (``mqstore bench commitlog`` measures both; figures in the README).
Single-producer puts are unaffected: they hand nothing off.

What is offered, all opt-in (a library does not move its user's threads unasked):

* :func:`pin_process` moves every thread of this process to a set of CPUs (threads
  started later inherit the mask of the thread that starts them), as
  ``taskset -c`` does at launch; it returns what it replaced, for :func:`restore`.
* ``StoreConfig.dispatch_cpus`` puts the dispatcher child on other CPUs
  (the child applies it to itself before it starts any thread).
* ``mqstore broker --cpus LIST --dispatch-cpus LIST`` does both for the broker.

Linux only (``os.sched_setaffinity``); elsewhere :func:`supported` is False and
asking for a mask raises :class:`~mqstore.errors.ConfigError`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from mqstore.errors import ConfigError

_TASKS = Path("/proc/self/task")


def supported() -> bool:
    """True where CPU masks can be read and set (Linux)."""
    return hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """``"0,2-3"`` -> ``(0, 2, 3)``: the list syntax of ``taskset -c`` and cpusets.

    Raises:
        ConfigError: an empty list, a malformed item, a reversed range or a negative CPU.
    """
    cpus: set[int] = set()
    for item in text.split(","):
        part = item.strip()
        lo_s, sep, hi_s = part.partition("-")
        try:
            lo = int(lo_s)
            hi = int(hi_s) if sep else lo
        except ValueError:
            raise ConfigError(f"bad CPU list {text!r}: {part!r} is not a CPU or a range") from None
        if lo < 0 or hi < lo:
            raise ConfigError(f"bad CPU list {text!r}: {part!r}")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def check_cpus(cpus: Iterable[int], what: str) -> tuple[int, ...]:
    """Validate a CPU set for this machine; return it sorted.

    Raises:
        ConfigError: empty, not integers, negative, or naming a CPU this machine lacks;
            or CPU masks are not supported here.
    """
    given = tuple(cpus)
    if not given:
        raise ConfigError(f"{what}: empty CPU set")
    if any(type(c) is not int or c < 0 for c in given):
        raise ConfigError(f"{what}: CPUs are non-negative integers, got {given}")
    out = tuple(sorted(set(given)))
    if not supported():
        raise ConfigError(f"{what}: CPU affinity is not supported on this platform")
    n = os.cpu_count() or 1
    if out[-1] >= n:
        raise ConfigError(f"{what}: this machine has CPUs 0-{n - 1}, got {out}")
    return out


def current() -> frozenset[int]:
    """The calling thread's CPU mask."""
    return frozenset(os.sched_getaffinity(0))


def _thread_ids() -> list[int]:
    try:
        return [int(t) for t in os.listdir(_TASKS)]
    except OSError:  # no /proc: the calling thread is all we can reach
        return [0]


def pin_process(cpus: Iterable[int]) -> dict[int, frozenset[int]]:
    """Move every thread of this process onto ``cpus``; return each one's old mask.

    Threads started afterwards inherit the mask of the thread that starts them, so
    pinning before a store opens and producers start covers them all. A thread that
    exits meanwhile is skipped.

    Raises:
        ConfigError: ``cpus`` is not a valid set for this machine (see :func:`check_cpus`).
    """
    mask = set(check_cpus(cpus, "pin_process"))
    old: dict[int, frozenset[int]] = {}
    for tid in _thread_ids():
        try:
            old[tid] = frozenset(os.sched_getaffinity(tid))
            os.sched_setaffinity(tid, mask)
        except ProcessLookupError:
            old.pop(tid, None)
        except OSError as e:  # e.g. a cpuset that excludes these CPUs
            restore(old)
            raise ConfigError(f"cannot pin to CPUs {sorted(mask)}: {e}") from e
    return old


def restore(old: dict[int, frozenset[int]]) -> None:
    """Give the threads :func:`pin_process` moved their old masks back (gone ones skipped)."""
    for tid, mask in old.items():
        with suppress(OSError):
            os.sched_setaffinity(tid, mask)


@contextmanager
def pinned(cpus: Iterable[int]) -> Iterator[None]:
    """Run a block with this process on ``cpus``; threads it started keep the pin
    (they inherited it) unless they were already running before it."""
    old = pin_process(cpus)
    try:
        yield
    finally:
        restore(old)
