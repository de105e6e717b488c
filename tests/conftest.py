"""Shared fixtures: paths to the real RocketMQ fixtures, hypothesis profiles, RocketMQ's
default ports held for the whole run, a broker with a topic of 1,000 queues."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from tests.interop.broker_harness import BrokerProcess


def pytest_configure(config: pytest.Config) -> None:
    """Every temporary file of the run, pytest's own ``tmp_path`` base included, goes
    under one scratch directory (``TMPDIR`` for child processes, ``tempfile.tempdir``
    here), removed when the run passes: what a test, a library or a child process
    forgets in the temp dir cannot pile up run after run. A failed run keeps it (the
    failures' files are there to look at) and names it."""
    if hasattr(config, "workerinput"):  # an xdist worker shares its controller's
        return
    scratch = tempfile.mkdtemp(prefix="mqstore-tests-")
    config.stash[_SCRATCH] = scratch
    os.environ["TMPDIR"] = tempfile.tempdir = scratch


def pytest_unconfigure(config: pytest.Config) -> None:
    scratch = config.stash.get(_SCRATCH, None)
    if scratch is None:
        return
    if config.stash.get(_PASSED, False):
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"temporary files of this run kept in {scratch}", file=sys.stderr)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_PASSED] = exitstatus == 0


_SCRATCH = pytest.StashKey[str]()
_PASSED = pytest.StashKey[bool]()

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
"""Store files real RocketMQ brokers wrote (each folder's README says where from). They
ship with the repository, so every clone runs the byte-compatibility tests."""
REAL = FIXTURES / "rocketmq-real"
SHARED = Path(os.environ.get("MQSTORE_SHARED", REPO.parent / "shared"))
"""The workplace's shared folder, outside the repository: the Java oracles
(``SHARED / "oracles"``) live there, not the fixtures."""
ORACLES = SHARED / "oracles"


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    """Directory of the RocketMQ-written files (in the repository)."""
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


@pytest.fixture(scope="session", autouse=True)
def default_ports_held() -> Iterator[tuple[int, ...]]:
    """9876, 10911, 10912 and 8081 held by another process for the whole run, as a
    user's own broker would hold them: a test that listens on a default port instead of
    one the OS gives fails on every run (``tests.default_ports``)."""
    from tests import default_ports

    with default_ports.hold():
        yield default_ports.DEFAULT_PORTS


@pytest.fixture(scope="module")
def thousand_queues(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker process holding the topic of :mod:`tests.thousand_queues` (1,000 queues,
    3 messages each); one per test module, so each module's groups meet a fresh broker."""
    from tests import thousand_queues

    b = thousand_queues.start(tmp_path_factory.mktemp("thousand") / "store")
    yield b
    b.stop()
