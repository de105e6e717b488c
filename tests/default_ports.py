"""RocketMQ's default ports, held by another process while the tests run.

Tests take the ports the OS gives them (port 0, or a probed free port), never a
default: a user's own broker on 10911 (the README's example), a name server on 9876
or a proxy on 8081 must not make the suite fail, and a test that listens on a default
port must fail here, on every run, rather than on the day someone else holds it.
So the suite's ``conftest`` starts :func:`hold` for the whole session.

Run as a script (``python default_ports.py PORT...``), this file is the holder: it
listens on each port it can take on 127.0.0.1 (one already taken by someone else is
held anyway), prints the ports it took on one line, and exits when its stdin closes,
so it cannot outlive the test process that started it.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator

DEFAULT_PORTS = (9876, 10911, 10912, 8081)
"""Name server, broker remoting, broker HA (remoting + 1), gRPC proxy."""


def is_taken(port: int) -> bool:
    """Whether binding 127.0.0.1:``port`` fails because something holds it."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


@contextlib.contextmanager
def hold(ports: tuple[int, ...] = DEFAULT_PORTS) -> Iterator[subprocess.Popen[str]]:
    """A child process listening on ``ports`` (those still free) until the block ends."""
    child = subprocess.Popen(
        [sys.executable, __file__, *map(str, ports)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        child.stdout.readline()  # the ports it took: listening from here on
        yield child
    finally:
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _serve(ports: list[int]) -> None:
    held = []
    for port in ports:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            s.close()
            continue
        held.append(s)
    print(" ".join(str(s.getsockname()[1]) for s in held), flush=True)
    sys.stdin.read()  # until the parent closes it (or dies)


if __name__ == "__main__":
    _serve([int(a) for a in sys.argv[1:]])
