"""Test harness for store-level tests, after bbolt's ``btesting``.

* :func:`make_store` / :func:`reopen` open a store under ``tmp_path`` with small,
  test-friendly segments;
* :func:`scan_log` and :func:`check_consistency` live in ``tools/logcheck.py``
  (re-exported here; its docstring lists the checks). Crash tests call
  ``check_consistency`` after every reopen: an empty list means the log is one the
  store could have written.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from mqstore import GetStatus, MessageStore, StoreConfig
from mqstore.consumequeue.results import StoredMessage
from mqstore.tools.logcheck import (  # noqa: F401  moved there; re-exported for the tests
    CHECKS,
    MAX_PROBLEMS_PER_CHECK,
    Check,
    LogScan,
    _first_nonzero,
    _segment_files,
    check_consistency,
    check_queue_offsets,
    queue_next_offsets,
    scan_log,
)

DEFAULT_FILE_SIZE = 64 * 1024
"""Segment size for harness stores: small enough that tests roll often."""

TEST_DEFAULTS: dict[str, Any] = {
    "commitlog_file_size": DEFAULT_FILE_SIZE,
    "mapped_file_size_consume_queue": 1024 * 20,  # 1024 units
    "max_hash_slot_num": 1024,  # index files of ~100 KiB, not 420 MB sparse
    "max_index_num": 4096,
}
"""Config for harness stores: every file small (RocketMQ's defaults are GiB-sized)."""


def store_config(tmp_path: Path, **cfg: Any) -> StoreConfig:
    """A StoreConfig rooted at ``tmp_path / "store"`` (unless ``root_dir`` is given),
    with :data:`TEST_DEFAULTS` for what ``cfg`` does not set."""
    cfg.setdefault("root_dir", Path(tmp_path) / "store")
    return StoreConfig(**{**TEST_DEFAULTS, **cfg})


def make_store(tmp_path: Path, **cfg: Any) -> MessageStore:
    """Open (creating) a store under ``tmp_path``; keyword arguments are StoreConfig fields."""
    return MessageStore.open(store_config(tmp_path, **cfg))


def tree(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` by relative path: two trees compare byte for byte."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def pull_all(
    s: MessageStore, topic: str, qid: int, sub: str = "*", batch: int = 32
) -> list[StoredMessage]:
    """Every message the store serves from queue ``qid``, from offset 0 on, ``batch`` per
    pull: follows ``next_begin_offset`` past what a pull skips (a hole, messages ``sub``
    filters out) and stops where it no longer moves."""
    out: list[StoredMessage] = []
    off = 0
    while True:
        g = s.get_message("g", topic, qid, off, batch, sub)
        if g.status is not GetStatus.FOUND and g.next_begin_offset == off:
            return out
        out += g.messages
        off = g.next_begin_offset


def reopen(store_or_cfg: MessageStore | StoreConfig, **changes: Any) -> MessageStore:
    """Open the same directory again, closing ``store`` first if it is still open.

    A store that was abandoned (a simulated crash) is not closed again: reopening it
    runs abnormal recovery, which is the point. ``changes`` override config fields.
    """
    if isinstance(store_or_cfg, MessageStore):
        cfg = store_or_cfg.cfg
        store_or_cfg.close()  # no-op when already closed or abandoned
    else:
        cfg = store_or_cfg
    return MessageStore.open(cfg.with_(**changes) if changes else cfg)


@contextmanager
def mounted_tmpfs(tmp_path: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` (e.g. ``"2m"``) mounted under ``tmp_path`` for a test
    that must fill a disk; skips (with the reason) where mounting is refused."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def until(
    cond: Callable[[], Any], timeout: float = 60.0, step: float = 0.01, what: str = ""
) -> Any:
    """Poll ``cond`` until it is truthy (returned) or the deadline passes (AssertionError,
    naming ``what`` when given)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout} s waiting for {what}"
                if what
                else "condition not met before the deadline"
            )
        time.sleep(step)


def past_this_millisecond() -> int:
    """Wait until the wall clock's millisecond moves on and return the new one: everything
    stored before the call has a store time below it (RocketMQ stamps in milliseconds)."""
    start = int(time.time() * 1000)
    return int(until(lambda: (now := int(time.time() * 1000)) > start and now, step=0.0005))


def a_millisecond_between() -> int:
    """A millisecond after every store time so far and before every later one: for
    by-time lookups that must fall between two sends."""
    middle = past_this_millisecond()
    until(lambda: int(time.time() * 1000) > middle, step=0.0005)
    return middle


class FailsFirst:
    """A stand-in for ``real`` (to monkeypatch in) whose first call raises
    ``RuntimeError(message)``, a bug in one round; later calls go to ``real``.
    ``calls`` counts every call."""

    def __init__(self, real: Callable[..., Any], message: str) -> None:
        self.real = real
        self.message = message
        self.calls = 0

    def __call__(self, *args: Any, **kw: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError(self.message)
        return self.real(*args, **kw)


def run_threads(target: Callable[..., object], args: list[tuple[Any, ...]], timeout: float) -> None:
    """Run ``target(*a)`` for each ``a`` in ``args`` on its own thread, all started
    together, and join them (each within ``timeout`` seconds)."""
    threads = [threading.Thread(target=target, args=a) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)


CLI = [sys.executable, "-m", "mqstore.tools.cli"]
"""The ``mqstore`` command, run by this interpreter."""

SMALL_STORE_FLAGS = ["--file-size", "64K", "--cq-file-size", "4000", "--index-slots", "100"]
SMALL_STORE_FLAGS += ["--index-num", "400"]
"""CLI flags for a store of small files (64 KiB CommitLog segments, tiny queues and index)."""


class Started(NamedTuple):
    """A CLI process that printed its ready line: the address at the end of that line,
    and its stdout lines up to and with it."""

    proc: subprocess.Popen[str]
    address: str
    lines: list[str]


@contextmanager
def cli_process(args: list[str], ready: str = "remoting on") -> Iterator[Started]:
    """``mqstore *args`` (stderr discarded) until a stdout line contains ``ready``;
    SIGTERMed (after a SIGCONT, for a stopped one) and reaped at exit.

    Raises:
        AssertionError: the process ended before printing ``ready``.
    """
    p = subprocess.Popen(
        [*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert p.stdout is not None
    try:
        lines: list[str] = []
        for line in p.stdout:
            lines.append(line.rstrip())
            if ready in line:
                break
        assert lines and ready in lines[-1], (args[0], "did not start", lines)
        yield Started(p, lines[-1].rsplit(" ", 1)[1].strip(), lines)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
