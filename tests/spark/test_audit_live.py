"""An audit beside a running broker (``mqstore broker`` subprocess, a paced producer in a
process of its own sending over TCP for the whole audit): no error finding, the in-flight
tail named in the report, and the load the test claims checked from the producer's own
acknowledgement times (:mod:`tests.spark.live_producer`)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import cli_process, until

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.integration]

RATE = 5000
"""Messages per second the producer is paced at (batches of BATCH)."""
BATCH = 50
PARTS = 4
"""The audit's window is cut in up to this many equal parts of at least 1 s each (a warm
Spark session audits this store in about a second); every part must hold acknowledged
sends: the broker wrote during the whole audit, not only at its start. Neither a rate nor
a count is asserted: on a loaded machine the broker and the audit slow down together
(measured at load 9-15: 46,050 messages in a 92 s audit, ~500 msg/s), and a fast audit
leaves little time to count in (1,400 messages in a 1.0 s audit at the paced rate)."""


class Acks:
    """The producer's acknowledgement lines, read on a thread: (monotonic ns, total)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[tuple[int, int]] = []
        self._proc = proc
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            t, n = line.split()
            self.lines.append((int(t), int(n)))

    def total(self) -> int:
        return self.lines[-1][1] if self.lines else 0

    def total_at(self, t_ns: int) -> int:
        """Messages acknowledged at or before ``t_ns``."""
        return max((n for t, n in self.lines if t <= t_ns), default=0)

    def after(self, t_ns: int) -> bool:
        return bool(self.lines) and self.lines[-1][0] > t_ns

    def join(self) -> None:
        self._thread.join(60)


def _producer(address: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "tests.spark.live_producer", address, str(RATE), str(BATCH)]
    return subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_audit_of_a_store_its_broker_is_writing_has_no_error_and_names_the_tail(
    spark, tmp_path: Path
):
    from mqstore.tools.spark.audit import run_audit

    root = tmp_path / "store"
    flags = ["--file-size", "1M", "--index-slots", "1000", "--index-num", "40000"]
    with cli_process(["broker", "--store", str(root), "--port", "0", *flags]) as broker:
        proc = _producer(broker.address)
        acks = Acks(proc)
        try:
            until(lambda: acks.total() >= 2000 or proc.poll() is not None, 120, 0.05)
            assert proc.poll() is None, "the producer ended before the audit"
            start = time.monotonic_ns()
            report = run_audit(root)
            end = time.monotonic_ns()
            until(lambda: acks.after(end) or proc.poll() is not None, 60, 0.05)
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            code = proc.wait(60)
            acks.join()
    assert code == 0, "the producer failed"
    window = (end - start) / 1e9
    during = acks.total_at(end) - acks.total_at(start)
    parts = max(1, min(PARTS, int(window)))
    cuts = [start + (end - start) * k // parts for k in range(parts + 1)]
    idle = [k for k in range(parts)
            if not any(cuts[k] < t <= cuts[k + 1] for t, _ in acks.lines)]  # fmt: skip
    load = f"{during} messages acknowledged in the audit's {window:.1f} s (paced at {RATE}/s)"
    assert acks.after(end), f"the producer stopped before the audit ended ({load})"
    assert idle == [], f"no send acknowledged in parts {idle} of {parts} ({load})"
    assert report.errors == [], report.summary(60)
    assert report.cut is not None, report.summary()
    assert report.cut.log_end > 0 and "in-flight tail left out" in report.checks["cut"]
    assert report.cut.tail_file.startswith("commitlog/")
