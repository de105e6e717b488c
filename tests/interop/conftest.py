"""Fixtures for the interop tests: a third-party RocketMQ decoder (node ali-ons).

``ali_ons_decode(raw)`` writes ``raw`` to a file, runs ``decode_records.js`` on it and
returns one dict per message ali-ons decoded. The node dependencies come from the
committed ``package-lock.json``: ``npm ci`` runs once when ``node_modules`` is missing
(under a file lock, so parallel workers install once). Tests are skipped, with the
reason, when node/npm are absent or the install fails (e.g. no registry access).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "decode_records.js"
DECODER_MODULE = HERE / "node_modules" / "ali-ons" / "lib" / "message" / "message_decoder.js"
NPM_CI = ["ci", "--no-audit", "--no-fund"]


def _install(npm: str) -> None:
    with (Path(tempfile.gettempdir()) / "mqstore-interop-npm-ci.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if DECODER_MODULE.is_file():
            return
        try:
            proc = subprocess.run(
                [npm, *NPM_CI], cwd=HERE, capture_output=True, text=True, timeout=300, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"`npm {' '.join(NPM_CI)}` in {HERE} timed out after 300 s")
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            pytest.skip(f"`npm {' '.join(NPM_CI)}` in {HERE} failed: " + " | ".join(tail))


@pytest.fixture(scope="session")
def node() -> str:
    """Path of ``node`` with ali-ons installed next to the script; skip when impossible."""
    node_bin = shutil.which("node")
    if node_bin is None:
        pytest.skip("node is not on PATH: the ali-ons interop tests need Node.js")
    if not DECODER_MODULE.is_file():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"npm is not on PATH and {HERE / 'node_modules'} is missing")
        _install(npm)
    return node_bin


@pytest.fixture
def ali_ons_decode(node: str, tmp_path: Path) -> Callable[[bytes], list[dict]]:
    """Decode concatenated records with ali-ons; one JSON-derived dict per message."""

    def run(raw: bytes) -> list[dict]:
        path = tmp_path / "records.bin"
        path.write_bytes(raw)
        proc = subprocess.run(
            [node, str(SCRIPT), str(path)], capture_output=True, text=True, timeout=60, check=False
        )
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines()]

    return run
