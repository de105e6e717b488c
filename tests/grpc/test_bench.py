"""``mqstore bench grpc`` reports every phase (the figures themselves are read by a person)."""

from __future__ import annotations

import json
from pathlib import Path

from mqstore.tools.bench import grpc as bench


def test_bench_reports_grpc_and_remoting_phases(tmp_path: Path) -> None:
    out = tmp_path / "grpc.json"
    argv = ["--messages", "40", "--repeat", "1", "--dir", str(tmp_path), "--json", str(out)]
    assert bench.main(argv) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert set(report["per_second"]) == {"send_grpc", "send_remoting", "receive_ack_grpc",
                                         "receive_ack_remoting_pop", "pull_remoting"}  # fmt: skip
    assert all(v > 0 for v in report["per_second"].values())
