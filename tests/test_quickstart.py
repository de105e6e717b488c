"""The README's main job runs end to end (Spark step skipped: tests/spark covers it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.cli import main


def test_quickstart_reads_back_every_acknowledged_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["quickstart", str(tmp_path / "qs"), "--messages", "300", "--no-spark"]) == 0
    out = capsys.readouterr().out
    assert "300/300 acknowledged messages intact, 0 duplicates" in out
    assert "RESULT: OK" in out


def test_every_subcommand_has_help(capsys: pytest.CaptureFixture[str]):
    for sub in ("quickstart", "produce", "consume", "broker", "audit", "reindex", "export", "bench"):
        with pytest.raises(SystemExit) as e:
            main([sub, "--help"])
        assert e.value.code == 0
