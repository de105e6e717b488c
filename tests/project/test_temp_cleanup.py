"""A test run leaves the temp dir as it found it: everything temporary goes under one
scratch directory that ``tests/conftest.py`` removes when the run passes, whatever a
test, a library or a child process forgot to delete."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.integration

LEAKY = """
import os, subprocess, sys, tempfile

def test_leaves_files_behind(tmp_path_factory):
    d = tempfile.mkdtemp(prefix="forgotten-")
    with open(os.path.join(d, "f"), "wb") as f:
        f.write(b"x" * (4 << 20))
    (tmp_path_factory.mktemp("session") / "g").write_bytes(b"y" * (4 << 20))
    subprocess.run([sys.executable, "-c", "import tempfile; tempfile.mkdtemp()"], check=True)
    assert os.environ.get("FAIL") != "1"
"""


def _run(tmp_path: Path, *, fail: bool) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run a leaky test under the suite's conftest with TMPDIR at a fresh directory."""
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "test_leaky.py").write_text(LEAKY)
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(TMPDIR=str(temp), FAIL="1" if fail else "0")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         str(tmp_path / "probe" / "test_leaky.py")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return r, temp


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_a_passing_run_leaves_nothing_in_the_temp_dir(tmp_path: Path) -> None:
    r, temp = _run(tmp_path, fail=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert list(temp.iterdir()) == []


def test_a_failing_run_keeps_its_files_and_says_where(tmp_path: Path) -> None:
    r, temp = _run(tmp_path, fail=True)
    assert r.returncode == 1, r.stdout + r.stderr
    (scratch,) = temp.iterdir()
    assert f"temporary files of this run kept in {scratch}" in r.stderr
    assert _size(scratch) >= 8 << 20
