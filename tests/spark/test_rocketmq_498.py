"""The Spark jobs on stores with their own geometry: the one RocketMQ 4.9.8 wrote (1 MiB
segments, 6,000-byte consume-queue files, 500 x 2,000 index files) and one the project
writes with several consume-queue files per queue and a SCHEDULE_TOPIC_XXXX queue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqstore import Message, MessageStore, StoreConfig
from tests.helpers import tree
from tests.rmq498 import FIXTURE, copy_store, manifest

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
    """A store the project writes at the 4.9.8 store's geometry with more in it: queue
    T0/0 spans 3 consume-queue files (300 units each), SCHEDULE_TOPIC_XXXX's queue 2
    (level 3) spans 2, the CommitLog 2 segments and the index 2 files."""
    cfg = StoreConfig(
        root_dir=root, commitlog_file_size=1 << 20, mapped_file_size_consume_queue=6000,
        max_hash_slot_num=500, max_index_num=2000,
    )  # fmt: skip
    with MessageStore.open(cfg) as s:
        for i in range(1100):
            delay = 3 if i % 3 == 2 else 0  # 10 s: still in SCHEDULE_TOPIC_XXXX at close
            m = Message(f"T{i % 3 // 2}", b"m%d " % i * 250, tags="A", keys=f"k{i}",
                        queue_id=0, delay_level=delay)  # fmt: skip
            assert s.put_message(m).status.stored
        assert s.wait_dispatched(60)
    return cfg


def test_in_place_reindex_keeps_the_geometry_of_a_store_with_many_files(spark, tmp_path: Path):
    from mqstore.tools.spark.reindex import reindex_with

    root = tmp_path / "s"
    _project_store(root)
    assert len(list((root / "consumequeue" / "T0" / "0").iterdir())) == 3
    assert len(list((root / "consumequeue" / "SCHEDULE_TOPIC_XXXX" / "2").iterdir())) == 2
    assert len(list((root / "index").iterdir())) == 2
    assert len(list((root / "commitlog").iterdir())) >= 2
    before = {p: tree(root / p) for p in ("consumequeue", "index")}
    summary = reindex_with(spark, root)
    assert summary["cq_file_size"] == 6000 and summary["index_geometry"] == (500, 2000)
    assert {p: tree(root / p) for p in ("consumequeue", "index")} == before
    with MessageStore.open(StoreConfig(root_dir=root)) as s:  # no sizes given
        assert s.cfg.mapped_file_size_consume_queue == 6000
        offset, bodies = 0, []
        while offset < 734:
            got = s.get_message("g", "T0", 0, offset, 32)
            bodies += [m.body for m in got.messages]
            offset = got.next_begin_offset
        assert bodies == [b"m%d " % i * 250 for i in range(1100) if i % 3 != 2]
