"""The real RocketMQ store files ship with the repository: a fresh clone runs the
byte-compatibility tests without anything from outside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REAL, REPO
from tests.rmq498 import FIXTURE as RMQ498


def test_the_fixtures_live_inside_the_repository() -> None:
    assert FIXTURES.resolve().is_relative_to(REPO)
    assert REAL.resolve().is_relative_to(FIXTURES.resolve())
    assert RMQ498.resolve().is_relative_to(FIXTURES.resolve())


@pytest.mark.parametrize("folder", ["rocketmq-real", "rocketmq-4.9.8-store"])
def test_each_fixture_folder_carries_the_readme_naming_its_origin(folder: str) -> None:
    readme = FIXTURES / folder / "README.md"
    assert readme.is_file()
    assert "RocketMQ" in readme.read_text(encoding="utf-8")


def test_the_fixture_segments_are_committed_to_git() -> None:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "tests/fixtures"], cwd=REPO, capture_output=True, text=True,
            check=True, timeout=30,
        ).stdout.split()  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout: {e}")
    assert "tests/fixtures/rocketmq-4.9.8-store/store/commitlog/00000000000000000000" in listed
    assert "tests/fixtures/rocketmq-real/apache-4e25b979/commitlog/00000000000000000000" in listed
    assert "tests/fixtures/rocketmq-4.9.8-store/manifest.tsv" in listed


def test_no_test_looks_for_fixtures_outside_the_repository() -> None:
    outside = re.compile(r"shared/fixtures|SHARED\s*/\s*\"fixtures\"")
    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "tests").rglob("*.py")
        if "node_modules" not in p.parts
        and p.name != Path(__file__).name
        and outside.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []
