"""Reindex: consumequeue/ rebuilt byte for byte as the store's dispatcher wrote it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark import storegen

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def engine_store(tmp_path) -> Path:
    pytest.importorskip("mqstore.consumequeue.dispatch")
    return storegen.engine_store(tmp_path / "engine", 101, 500)


def test_reindex_matches_the_dispatcher_byte_for_byte(spark, engine_store, tmp_path):
    from mqstore.tools.spark.reindex import reindex_with

    summary = reindex_with(spark, engine_store, tmp_path / "out")
    expected = _tree(engine_store / "consumequeue")
    got = _tree(tmp_path / "out" / "consumequeue")
    assert len(expected) == 12
    assert sorted(got) == sorted(expected)
    for name, data in expected.items():
        assert got[name] == data, name
    assert summary["units"] == 400 and summary["files"] == 12
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]


def test_reindex_in_place_swaps_atomically(spark, engine_store):
    from mqstore.tools.spark.audit import run_audit
    from mqstore.tools.spark.reindex import reindex_with

    expected = _tree(engine_store / "consumequeue")
    shutil.rmtree(engine_store / "consumequeue" / "orders")
    (engine_store / "consumequeue" / "stale-topic" / "0").mkdir(parents=True)
    reindex_with(spark, engine_store)
    assert _tree(engine_store / "consumequeue") == expected
    assert not [p for p in engine_store.iterdir() if p.name.startswith(".")]
    assert run_audit(engine_store).findings == []


def test_reindex_refuses_an_open_store(spark, tmp_path):
    from mqstore import Message, MessageStore, StoreConfig
    from mqstore.tools.spark.reindex import StoreInUseError, reindex_with

    pytest.importorskip("mqstore.consumequeue.dispatch")
    cfg = StoreConfig(root_dir=str(tmp_path / "open"), commitlog_file_size=64 * 1024)
    with MessageStore.open(cfg) as store:
        store.put_message(Message(topic="t", body=b"x"))
        with pytest.raises(StoreInUseError):
            reindex_with(spark, tmp_path / "open")


@pytest.mark.integration
def test_reindex_survives_task_retries(spark, engine_store, tmp_path):
    """local[2,4] retries each task; attempt 0 of every task dies after half a file."""
    from mqstore.tools.spark.reindex import FAIL_ENV
    from mqstore.tools.spark.session import LOG_LEVEL_ENV

    out = tmp_path / "retried"
    proc = subprocess.run(
        [sys.executable, "-m", "mqstore.tools.spark.reindex", str(engine_store), "--out", str(out),
         "--master", "local[2,4]"],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=300,
        env=os.environ | {FAIL_ENV: "1", LOG_LEVEL_ENV: "warn"},  # Spark logs the lost tasks
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "injected failure" in proc.stderr
    assert _tree(out / "consumequeue") == _tree(engine_store / "consumequeue")
    assert _tree(out / "index") == _tree(engine_store / "index")
    assert len(_tree(out / "index")) == 2
    assert sorted(p.name for p in out.iterdir()) == ["consumequeue", "index"]
