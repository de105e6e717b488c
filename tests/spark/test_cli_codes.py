"""The Spark commands through ``mqstore``'s own entry point (in-process, on the shared
session): the options the README shows are accepted, and a busy store is exit 3 as
``mqstore --help`` documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore import Message, MessageStore, StoreConfig
from mqstore.tools.cli import Exit, main


def _store(root: Path, topics: tuple[str, ...]) -> StoreConfig:
    cfg = StoreConfig(root_dir=str(root), commitlog_file_size=64 * 1024)
    with MessageStore.open(cfg) as store:
        for topic in topics:
            store.put_message(Message(topic=topic, body=b"x"))
        store.wait_dispatched(timeout=30)
    return cfg


def test_reindex_of_a_store_open_in_another_process_exits_busy(spark, tmp_path, capsys):
    pytest.importorskip("mqstore.consumequeue.dispatch")
    cfg = _store(tmp_path / "s", ("t",))
    with MessageStore.open(cfg):
        rc = main(["reindex", str(tmp_path / "s")])
    assert rc == Exit.BUSY
    assert "is open (lock file" in capsys.readouterr().err


def test_export_partition_by_topic_from_the_readme_writes_a_folder_per_topic(spark, tmp_path):
    _store(tmp_path / "s", ("alpha", "beta"))
    out = tmp_path / "out"
    assert (
        main(["export", str(tmp_path / "s"), "--parquet", str(out), "--partition-by", "topic"]) == 0
    )
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["topic=alpha", "topic=beta"]
