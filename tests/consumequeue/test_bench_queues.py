"""``mqstore bench queues --quick`` reports every figure it documents (issue 14).

The figures' values depend on the machine and are read by a person; this checks that
each scenario and its 4-queue reference ran and every queue read back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqstore.tools.bench import queues

pytestmark = pytest.mark.slow


def test_the_quick_run_reports_each_scenario_against_its_reference(tmp_path: Path) -> None:
    out = tmp_path / "queues.json"
    assert queues.main(["--quick", "--dir", str(tmp_path), "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    runs = report["scenarios"]
    assert [(r["many"]["queues"], r["many"]["per_queue"]) for r in runs] == [(500, 1), (100, 5)]
    for r in runs:
        many, ref = r["many"], r["reference"]
        assert ref["queues"] == 4 and ref["messages"] == many["messages"]
        assert many["readable_queues"] == many["queues"]
        assert many["put_rate"] > 0 and many["open_s"] > 0 and many["close_s"] > 0
        assert 0 < many["cq_disk"] <= many["queues"] * 8 * 1024
        assert 0 <= many["queues_unsynced_at_close"] <= many["queues"]
    assert [p.name for p in tmp_path.iterdir()] == ["queues.json"]  # stores removed


def test_the_quick_run_reports_the_dispatchers_cpu_per_message(tmp_path: Path) -> None:
    out = tmp_path / "queues.json"
    assert queues.main(["--quick", "--dir", str(tmp_path), "--json", str(out),
                        "--scenarios", "50x2"]) == 0  # fmt: skip
    run = json.loads(out.read_text(encoding="utf-8"))["scenarios"][0]
    for side in (run["many"], run["reference"]):
        assert side["dispatch_user_us"] >= 0 and side["dispatch_sys_us"] >= 0
