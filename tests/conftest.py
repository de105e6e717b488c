"""Shared fixtures: paths to the real RocketMQ fixtures, hypothesis profiles."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MQSTORE_SHARED", REPO.parent / "shared"))
REAL = SHARED / "fixtures" / "rocketmq-real"


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    """Directory of the RocketMQ-written files; skip when shared/ is absent."""
    if not REAL.is_dir():
        pytest.skip(f"real RocketMQ fixtures not found at {REAL}")
    return REAL


@pytest.fixture
def real_store_copy(real_fixtures: Path, tmp_path: Path) -> Path:
    """A writable copy of the shaoxubao store laid out as a store root (commitlog/ at top)."""
    root = tmp_path / "real"
    src = real_fixtures / "shaoxubao-c4dcaab0"
    (root / "commitlog").mkdir(parents=True)
    shutil.copy(src / "unit_test_store" / "commitlog" / "00000000000000000000", root / "commitlog")
    shutil.copy(src / "checkpoint", root / "checkpoint")
    shutil.copytree(src / "config", root / "config")
    return root
