"""The README's main job runs end to end (Spark step skipped: tests/spark covers it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.tools.cli import main


def test_quickstart_reads_back_every_acknowledged_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert main(["quickstart", str(tmp_path / "qs"), "--messages", "300", "--no-spark"]) == 0
    out = capsys.readouterr().out
    assert "300/300 acknowledged messages consumed intact" in out
    assert "RESULT: OK" in out


def test_quickstart_group_rebalances_when_a_member_leaves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert main(["quickstart", str(tmp_path / "qs"), "--messages", "400", "--no-spark"]) == 0
    out = capsys.readouterr().out
    before = next(line for line in out.splitlines() if "group of 3 over TCP" in line)
    after = next(line for line in out.splitlines() if "carol left half-way" in line)
    assert "alice=" in before and "bob=" in before and "carol=" in before
    assert "carol" not in after.split(":", 1)[1]


def test_every_subcommand_has_help(capsys: pytest.CaptureFixture[str]):
    for sub in (
        "quickstart",
        "produce",
        "consume",
        "broker",
        "audit",
        "reindex",
        "export",
        "bench",
    ):
        with pytest.raises(SystemExit) as e:
            main([sub, "--help"])
        assert e.value.code == 0


def test_produce_then_consume_with_a_tag_filter(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    store = ["--store", str(tmp_path / "s"), "--file-size", str(1 << 20)]
    assert main(["produce", *store, "--topic", "demo", "--count", "2", "--tags", "TagA"]) == 0
    assert (
        main(
            [
                "produce",
                *store,
                "--topic",
                "demo",
                "--count",
                "1",
                "--tags",
                "TagB",
                "--queue-id",
                "1",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert (
        main(["consume", "--store", str(tmp_path / "s"), "--topic", "demo", "--tags", "TagB"]) == 0
    )
    assert capsys.readouterr().out.splitlines() == ["q1@0 tags=TagB hello from mqstore #0"]
