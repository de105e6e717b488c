"""Node.js dependencies of a test folder: ``npm ci`` from its committed lock file.

``node_with(folder, marker)`` returns the ``node`` executable once ``marker`` (a file of
the dependency the tests need, under ``folder/node_modules``) exists, running ``npm ci``
in ``folder`` once if it does not (under a file lock, so parallel workers install once).
The test is skipped, with the reason, when node/npm are absent or the install fails
(e.g. no registry access).
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

NPM_CI = ["ci", "--no-audit", "--no-fund"]


def _install(npm: str, folder: Path, marker: Path) -> None:
    lock_name = "mqstore-npm-ci-" + folder.name + ".lock"
    with (Path(tempfile.gettempdir()) / lock_name).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file():
            return
        try:
            proc = subprocess.run(
                [npm, *NPM_CI], cwd=folder, capture_output=True, text=True, timeout=300,
                check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            pytest.skip(f"`npm {' '.join(NPM_CI)}` in {folder} timed out after 300 s")
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            pytest.skip(f"`npm {' '.join(NPM_CI)}` in {folder} failed: " + " | ".join(tail))


def node_with(folder: Path, marker: Path, what: str) -> str:
    """Path of ``node`` with ``folder``'s dependencies installed; skip when impossible
    (``what`` names the tests in the skip reason)."""
    node_bin = shutil.which("node")
    if node_bin is None:
        pytest.skip(f"node is not on PATH: {what} need Node.js")
    if not marker.is_file():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"npm is not on PATH and {folder / 'node_modules'} is missing")
        _install(npm, folder, marker)
    return node_bin
