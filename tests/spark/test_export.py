"""Parquet export: one row per message, metadata columns, bodies decompressed."""

from __future__ import annotations

import shutil

import pytest

from tests.spark import storegen
from tests.spark.storegen import build_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_export_generated_store(spark, tmp_path):
    from mqstore.tools.spark.export import export_with

    gen = build_store(tmp_path / "s", 300)
    result = export_with(spark, gen.root, tmp_path / "out.parquet")
    assert result.rows == 300
    df = spark.read.parquet(result.path)
    for col in (
        "topic",
        "queue_id",
        "queue_offset",
        "physical_offset",
        "store_timestamp",
        "tags",
        "keys",
        "properties",
        "msg_id",
        "uniq_key",
        "compressed",
        "body",
    ):
        assert col in df.columns
    w = next(r for r in gen.records if r.compressed)
    row = df.where(f"physical_offset = {w.physical_offset}").collect()[0]
    assert row.compressed is True
    assert bytes(row.body) == w.body
    assert (row.topic, row.queue_id, row.queue_offset) == (w.topic, w.queue_id, w.queue_offset)
    assert row.body_error is None
    assert row.uniq_key.startswith("U") and row.keys[0].startswith("key-")
    assert not list(tmp_path.glob("out.parquet/.*.crc"))


def test_export_real_rocketmq_records(spark, real_fixtures, tmp_path):
    from mqstore.tools.spark.export import main

    shutil.copytree(real_fixtures / "apache-4e25b979" / "commitlog", tmp_path / "s" / "commitlog")
    out = tmp_path / "real.parquet"
    assert main([str(tmp_path / "s"), "--parquet", str(out)]) == 0
    rows = spark.read.parquet(str(out)).orderBy("queue_offset").collect()
    assert len(rows) == 47
    assert bytes(rows[0].body) == b"Once, there was a chance for me!"
    assert rows[46].physical_offset == 46 * 172
    assert rows[0].tags == "TAG1" and rows[0].properties["0"] == "imagoodperson0"
    assert main([str(tmp_path / "s"), "--parquet", str(out)]) == 2  # exists


def test_export_partitions_by_topic_with_timestamp_columns(spark, tmp_path):
    from pyspark.sql.types import TimestampType

    from mqstore.tools.spark.export import export_with

    gen = build_store(tmp_path / "s", 120)
    result = export_with(spark, gen.root, tmp_path / "out.parquet", partition_by="topic")
    assert result.rows == 120
    topics = {w.topic for w in gen.records}
    assert {p.name for p in (tmp_path / "out.parquet").glob("topic=*")} == {
        f"topic={t}" for t in topics
    }
    df = spark.read.parquet(result.path)
    assert isinstance(df.schema["store_timestamp"].dataType, TimestampType)
    w = gen.records[7]
    row = df.where(f"physical_offset = {w.physical_offset}").collect()[0]
    assert round(row.store_timestamp.timestamp() * 1000) == storegen.BASE_TS + 7 * 10


def test_export_partition_folders_give_back_escaped_topic_names(spark, tmp_path):
    """Topics with characters Spark escapes in folder names (%) read back unchanged."""
    from mqstore import Message, MessageStore, StoreConfig
    from mqstore.tools.spark.export import export_with

    topics = ("%RETRY%group-a", "%DLQ%group-a", "plain")
    cfg = StoreConfig(root_dir=str(tmp_path / "s"), commitlog_file_size=64 * 1024)
    with MessageStore.open(cfg) as store:
        for i in range(30):
            message = Message(topic=topics[i % 3], body=b"x" * (i + 1))
            assert store.put_message(message).status.stored
    result = export_with(spark, tmp_path / "s", tmp_path / "out.parquet", partition_by="topic")
    assert result.rows == 30
    assert (tmp_path / "out.parquet" / "topic=%25RETRY%25group-a").is_dir()
    assert (tmp_path / "out.parquet" / "_SUCCESS").is_file()
    df = spark.read.parquet(result.path)
    assert {r.topic: r.n for r in df.groupBy("topic").count().withColumnRenamed("count", "n")
            .collect()} == dict.fromkeys(topics, 10)  # fmt: skip


def test_schema_built_in_python_is_the_ddl_schema(spark):
    from mqstore.tools.spark.export import EXPORT_SCHEMA, spark_schema

    assert spark_schema() == spark.createDataFrame([], EXPORT_SCHEMA).schema
