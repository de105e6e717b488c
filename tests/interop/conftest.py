"""Fixtures for the interop tests: a third-party RocketMQ decoder (node ali-ons).

``ali_ons_decode(raw)`` writes ``raw`` to a file, runs ``decode_records.js`` on it and
returns one dict per message ali-ons decoded. The node dependencies come from the
committed ``package-lock.json``: ``npm ci`` runs once when ``node_modules`` is missing
(under a file lock, so parallel workers install once). Tests are skipped, with the
reason, when node/npm are absent or the install fails (e.g. no registry access).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.npm_deps import node_with

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "decode_records.js"
DECODER_MODULE = HERE / "node_modules" / "ali-ons" / "lib" / "message" / "message_decoder.js"


@pytest.fixture(scope="session")
def node() -> str:
    """Path of ``node`` with ali-ons installed next to the script; skip when impossible."""
    return node_with(HERE, DECODER_MODULE, "the ali-ons interop tests")


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
