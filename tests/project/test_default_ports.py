"""The suite runs with RocketMQ's default ports held by another process
(``tests.default_ports``), so no test can pass only because 9876, 10911, 10912 or 8081
happened to be free."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.default_ports import DEFAULT_PORTS, is_taken


def test_every_default_port_is_taken_while_the_tests_run(
    default_ports_held: tuple[int, ...],
) -> None:
    assert set(default_ports_held) == set(DEFAULT_PORTS) == {9876, 10911, 10912, 8081}
    assert [p for p in DEFAULT_PORTS if not is_taken(p)] == []


def test_a_broker_left_on_its_default_port_says_the_port_is_in_use(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(tmp_path / "s"),
         "--file-size", str(1 << 20)],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert r.returncode == 3, r.stderr
    assert "127.0.0.1:10911: the port is in use" in r.stderr
