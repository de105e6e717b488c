"""``mqstore bench brokers`` (quick): a name server and two broker processes, sends over
a one-broker and a two-broker route in the same run, both rates and the ratio reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqstore.tools.bench import brokers

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_quick_run_reports_both_routes_and_every_brokers_cpu(tmp_path: Path, capsys) -> None:
    out = tmp_path / "brokers.json"
    argv = ["--quick", "--seconds", "0.5", "--procs", "1", "--dir", str(tmp_path),
            "--json", str(out)]  # fmt: skip
    assert brokers.main(argv) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    for topic in ("one", "two"):
        (run,) = report["runs"][topic]
        assert run["sends"] > 0
        assert set(run["broker_cpu_s"]) == {"broker-a", "broker-b"}
    assert "two brokers / one broker:" in capsys.readouterr().out
