"""Run a producer process, SIGKILL it after some acknowledgements, keep what it printed.

A producer prints one line per acknowledged put. A line cut short by the kill was
not acknowledged to us, so only complete lines count.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def acks_until_killed(
    argv: list[str],
    *,
    ready: bytes,
    acks: int,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
) -> list[list[bytes]]:
    """Start ``argv`` in the repository, check that its first line is ``ready``, read
    lines until ``acks`` of them came (or ``timeout_s`` passed), SIGKILL it, and return
    the whitespace-split fields of every complete line it printed, the ones still in
    the pipe at the kill included.

    Raises:
        AssertionError: the first line was not ``ready`` (with the process's stderr), or
            fewer than ``acks`` lines came before the process ended or stalled.
    """
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env)
    assert proc.stdout is not None
    lines: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        first = proc.stdout.readline()
        assert first == ready, (first, proc.stderr.read() if proc.stderr else "")
        while len(lines) < acks and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        # From the buffered reader: communicate() reads the raw pipe and would skip
        # what readline() already buffered, leaving a line's tail as the first line.
        rest = proc.stdout.read()
        proc.communicate(timeout=30)
    assert len(lines) >= acks, "the producer died or stalled"
    return [
        line.split() for line in [*lines, *rest.splitlines(keepends=True)] if line.endswith(b"\n")
    ]
