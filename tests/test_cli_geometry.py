"""The quickstart's store (small segments and index, not RocketMQ's defaults) opens with
``mqstore consume`` and ``mqstore broker`` with no size flags: the sizes come from its
files."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "mqstore.tools.cli"]


@pytest.fixture(scope="module")
def quickstart_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("qs") / "store"
    done = subprocess.run(
        [*CLI, "quickstart", str(root), "--no-spark", "--messages", "120"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def test_consume_reads_the_quickstart_store_with_no_size_flags(quickstart_store: Path):
    done = subprocess.run(
        [*CLI, "consume", "--store", str(quickstart_store), "--topic", "orders", "--limit", "3"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3


def test_broker_serves_the_quickstart_store_with_no_size_flags(quickstart_store: Path):
    proc = subprocess.Popen(
        [*CLI, "broker", "--store", str(quickstart_store), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "remoting on" in line:
                break
        assert any("remoting on" in x for x in lines), (lines, proc.stderr.read())
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    segment = next((quickstart_store / "commitlog").iterdir()).stat().st_size
    assert segment != 1 << 30
    assert f"CommitLog segments {segment} bytes (files)" in err
    assert "index files 50000 slots x 200000 entries (files)" in err
