"""The Spark jobs on stores with their own geometry: the one RocketMQ 4.9.8 wrote (1 MiB
segments, 6,000-byte consume-queue files, 500 x 2,000 index files) and one the project
writes with several consume-queue files per queue and a SCHEDULE_TOPIC_XXXX queue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqstore import Message, MessageStore, StoreConfig
from tests.rmq498 import FIXTURE, copy_store, manifest, tree

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_audit_of_the_rocketmq_store_is_clean(spark, tmp_path: Path, capsys):
    from mqstore.tools.spark.audit import main

    store = copy_store(tmp_path / "rmq")
    report = tmp_path / "report.json"
    assert main([str(store), "--report", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["findings"] == []
    assert "6000 bytes (files)" in data["checks"]["geometry"]
    assert "500 slots x 2000 entries" in capsys.readouterr().out


def test_reindex_reproduces_the_rocketmq_queues_and_index(spark, tmp_path: Path):
    from mqstore.tools.spark.reindex import reindex_with

    store = copy_store(tmp_path / "rmq")
    summary = reindex_with(spark, store, tmp_path / "out")
    assert summary["cq_file_size"] == 6000 and summary["index_geometry"] == (500, 2000)
    for part in ("consumequeue", "index"):
        assert tree(tmp_path / "out" / part) == tree(FIXTURE / "store" / part), part


def test_export_has_every_manifest_message(spark, tmp_path: Path):
    from mqstore.tools.spark.export import export_with

    store = copy_store(tmp_path / "rmq")
    result = export_with(spark, store, tmp_path / "out.parquet")
    assert result.rows == 2000
    rows = spark.read.parquet(result.path).orderBy("physical_offset").collect()
    got = [
        (r.topic, r.queue_id, r.queue_offset, r.physical_offset, r.tags, list(r.keys),
         r.uniq_key, bytes(r.body))
        for r in rows
    ]  # fmt: skip
    want = [
        (p.topic, p.queue_id, p.queue_offset, p.physical_offset, p.tag, [p.key], p.uniq_key,
         p.body)
        for p in sorted(manifest(), key=lambda p: p.physical_offset)
    ]  # fmt: skip
    assert got == want


def _project_store(root: Path) -> StoreConfig:
    """Several consume-queue files per queue (25 units each), delayed messages in
    SCHEDULE_TOPIC_XXXX, index files that roll: every kind at a small geometry."""
    cfg = StoreConfig(
        root_dir=root, commitlog_file_size=32 * 1024, mapped_file_size_consume_queue=25 * 20,
        max_hash_slot_num=53, max_index_num=150,
    )  # fmt: skip
    with MessageStore.open(cfg) as s:
        for i in range(240):
            delay = 3 if i % 8 == 0 else 0  # 10 s: still in SCHEDULE_TOPIC_XXXX at close
            m = Message(f"T{i % 2}", b"m%d " % i * 20, tags="A", keys=f"k{i}", queue_id=i % 2,
                        delay_level=delay)  # fmt: skip
            assert s.put_message(m).status.stored
        assert s.wait_dispatched(10)
    return cfg


def test_in_place_reindex_keeps_the_geometry_of_a_store_with_many_files(spark, tmp_path: Path):
    from mqstore.tools.spark.reindex import reindex_with

    cfg = _project_store(tmp_path / "s")
    root = tmp_path / "s"
    queue_files = list((root / "consumequeue" / "T0" / "0").iterdir())
    assert len(queue_files) >= 3
    assert (root / "consumequeue" / "SCHEDULE_TOPIC_XXXX").is_dir()
    before = {p: tree(root / p) for p in ("consumequeue", "index")}
    summary = reindex_with(spark, root)
    assert summary["cq_file_size"] == 500 and summary["index_geometry"] == (53, 150)
    assert {p: tree(root / p) for p in ("consumequeue", "index")} == before
    with MessageStore.open(StoreConfig(root_dir=cfg.root_dir)) as s:  # no sizes given
        assert s.cfg.mapped_file_size_consume_queue == 500
        offset, bodies = 0, []
        while offset < 120:
            got = s.get_message("g", "T1", 1, offset, 32)
            bodies += [m.body for m in got.messages]
            offset = got.next_begin_offset
        assert bodies == [b"m%d " % i * 20 for i in range(1, 240, 2)]
