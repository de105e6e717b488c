"""Test-side helpers for the HA socket and process tests.

* :class:`HAProcess` starts ``ha_proc.py`` with ``sys.executable`` and polls its JSON
  status file against a deadline (no sleeps as synchronisation).
* :func:`wait_until` is the deadline-poll loop used everywhere.
* :func:`log_bytes` / :func:`assert_same_log` compare two stores' CommitLogs.
* :class:`FakeSlave` / :class:`FakeMaster` speak the protocol over a raw socket with
  the sans-IO endpoints, so a test controls exactly what the other side sends.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mqstore import MessageStore, StoreConfig
from mqstore.ha.protocol import (
    NEED_DATA,
    Event,
    MasterConnection,
    ReportOffset,
    SlaveConnection,
)
from tests.helpers import until

RUNNER = Path(__file__).with_name("ha_proc.py")
REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def wait_until(
    check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.01
) -> T:
    """Poll ``check`` until it returns something truthy; fail with ``what`` at the deadline."""
    value: T = until(check, timeout, interval, what)
    return value


class HAProcess:
    """One ``ha_proc.py`` process: start, poll status, SIGTERM or SIGKILL."""

    def __init__(self, cmd: str, store: Path, workdir: Path, name: str, *args: str) -> None:
        self.name = name
        self.store = store
        self.status_path = workdir / f"{name}.status.json"
        self.status_path.unlink(missing_ok=True)
        self.stderr_path = workdir / f"{name}.stderr.txt"
        self._stderr = open(self.stderr_path, "ab")  # noqa: SIM115 - kept for the process life
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, str(RUNNER), cmd, "--store", str(store),
             "--status", str(self.status_path), *args],
            stdout=subprocess.DEVNULL, stderr=self._stderr, env=env,
        )  # fmt: skip

    def status(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.status_path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def wait_for(
        self, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str
    ) -> dict[str, Any]:
        """Poll the status file until ``pred(status)``; fail with diagnostics."""

        def check() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited {self.proc.returncode}: {self.stderr()}")
            st = self.status()
            return st if st is not None and pred(st) else None

        try:
            return wait_until(check, timeout, f"{self.name}: {what}")
        except AssertionError as e:
            raise AssertionError(f"{e}\nlast status: {self.status()}\n{self.stderr()}") from None

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]

    def terminate(self, timeout: float = 15.0) -> dict[str, Any]:
        """SIGTERM, wait for a clean exit; return the final status."""
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        self._stderr.close()
        assert rc == 0, f"{self.name} exited {rc}: {self.stderr()}"
        st = self.status()
        assert st is not None and st["closed"], st
        return st

    def kill(self) -> None:
        """SIGKILL (a crash) and reap."""
        self.proc.kill()
        self.proc.wait(10)
        self._stderr.close()

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.kill()


def open_plain(root: Path, file_size: int) -> MessageStore:
    """Open a store directory for inspection (ASYNC_MASTER: no HA service starts)."""
    return MessageStore.open(StoreConfig(root_dir=root, commitlog_file_size=file_size))


def log_bytes(store: MessageStore, start: int, end: int) -> bytes:
    """The CommitLog bytes in [start, end), read file by file."""
    out = bytearray()
    fs = store.commitlog.file_size
    offset = start
    while offset < end:
        n = min(end - offset, fs - offset % fs)
        data = store.commitlog.read(offset, n)
        assert data is not None, f"{store.root}: offset {offset} (+{n}) not held"
        out += data
        offset += n
    return bytes(out)


def assert_same_log(master_root: Path, slave_root: Path, file_size: int) -> tuple[int, int]:
    """The slave's whole log equals the master's bytes at the same offsets; return its range."""
    with open_plain(master_root, file_size) as m, open_plain(slave_root, file_size) as s:
        lo, hi = s.min_physical_offset, s.max_physical_offset
        assert hi <= m.max_physical_offset, (hi, m.max_physical_offset)
        assert lo >= m.min_physical_offset
        theirs, ours = log_bytes(s, lo, hi), log_bytes(m, lo, hi)
        if theirs != ours:
            at = next(i for i, (a, b) in enumerate(zip(theirs, ours, strict=True)) if a != b)
            raise AssertionError(
                f"slave log differs from master from offset {lo + at}: slave "
                f"{theirs[at : at + 16].hex()}, master {ours[at : at + 16].hex()}; slave "
                f"damage list {s.damage}"
            )
        return lo, hi


# ---------------------------------------------------------------- fake peers


class FakeSlave:
    """A slave the test drives by hand: a socket plus a sans-IO SlaveConnection."""

    def __init__(self, port: int, max_offset: int = 0, file_size: int | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.conn = SlaveConnection(max_offset, file_size=file_size)

    def report(self, offset: int) -> None:
        self.sock.sendall(self.conn.send(ReportOffset(offset)))

    def next_event(self, timeout: float = 5.0) -> Event:
        """The next frame from the master (fails at the deadline)."""
        deadline = time.monotonic() + timeout
        while True:
            event = self.conn.next_event()
            if event is not NEED_DATA:
                return event
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(1 << 16)
            self.conn.receive_data(data)

    def close(self) -> None:
        self.sock.close()


class FakeMaster:
    """A listening socket that accepts slaves and only reads their reports."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(5)
        self.port = self.server.getsockname()[1]

    def accept(self, timeout: float = 5.0) -> tuple[socket.socket, MasterConnection]:
        self.server.settimeout(timeout)
        sock, _ = self.server.accept()
        return sock, MasterConnection()

    def close(self) -> None:
        self.server.close()
