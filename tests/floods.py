"""Helpers of the flood tests: a server process's memory, and bounded hostile clients.

Every flood here is bounded in count, bytes and time and targets 127.0.0.1 only.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

MIB = 1 << 20
RSS_BUDGET = 128 * MIB
"""How much a flood may add to a server's peak resident memory (issue 39)."""
ANSWER_S = 1.0
"""How fast a well-behaved client must be answered while a flood runs."""


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def rss(pid: int) -> int:
    """Resident bytes of ``pid`` now (VmRSS)."""
    return _status_kib(pid, "VmRSS") * 1024


def peak_rss(pid: int) -> int:
    """The highest resident bytes ``pid`` ever had (VmHWM)."""
    return _status_kib(pid, "VmHWM") * 1024


def timed(call: Callable[[], object]) -> float:
    """Seconds ``call()`` took."""
    t0 = time.monotonic()
    call()
    return time.monotonic() - t0


def connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def half_frame(sock: socket.socket, frame_bytes: int, stop: threading.Event) -> None:
    """Announce a remoting frame of ``frame_bytes`` and send all of it but the last
    byte, then hold the connection until ``stop`` (or until the server closes it)."""
    try:
        sock.sendall(struct.pack(">iI", frame_bytes - 4, 16))
        chunk = bytes(MIB)
        left = frame_bytes - 8 - 1
        while left > 0 and not stop.is_set():
            n = min(left, len(chunk))
            sock.sendall(chunk[:n])
            left -= n
        stop.wait(30)
    except OSError:
        return  # closed by the server: what a bounded server does


@contextmanager
def threads(targets: list[Callable[[], None]], stop: threading.Event) -> Iterator[None]:
    """Run every target in its own daemon thread for the block's duration; ``stop`` is
    set when the block ends, then the threads are joined."""
    ts = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in ts:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in ts:
            t.join(30)
