"""``mqstore export DIR --parquet OUT``: every message with its metadata to Parquet.

Usage::

    mqstore export DIR --parquet OUT [--master URL] [--partition-by topic]
    python -m mqstore.tools.spark.export DIR --parquet OUT
    spark-submit tools/spark/export.py ...

One row per valid record (see :data:`EXPORT_SCHEMA`; store and born times are Parquet
timestamps), bodies decompressed; a body whose
compressed bytes cannot be inflated is exported as null with ``body_error`` set. Damaged
records are skipped (the scan resumes at the next valid record as the audit does): run
``mqstore audit`` to see them. The tasks write the Parquet files with pyarrow (the rows
never pass through the JVM) in the layout Spark's writer leaves, and the driver commits
them after the job (:mod:`mqstore.tools.spark._parquet_out`), so a retried task never
leaves a partial file; OUT must not exist.

Exit status: 0 written, 2 usage or I/O error (OUT exists, DIR is not a store).
"""

from __future__ import annotations

import argparse
import mmap
import shutil
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if not __package__:  # run as a script: spark-submit tools/spark/export.py DIR ...
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt
from mqstore.tools.spark import _export_columns as cols
from mqstore.tools.spark import _parquet_out as parquet_out
from mqstore.tools.spark._cli import run
from mqstore.tools.spark.byterange import ByteRange, range_records
from mqstore.tools.spark.layout import discover
from mqstore.tools.spark.reader import (
    balanced_split,
    open_mapped,
    plan_ranges,
)
from mqstore.tools.spark.segscan import Buffer

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

ROW_GROUP_BYTES: Final = 96 << 20
"""Parquet row groups of about 96 MiB of Arrow data (64-128 MiB suits readers that split
on them)."""
EXPORT_SCHEMA: Final = (
    "topic string, queue_id int, queue_offset long, physical_offset long, size int,"
    " file string, store_timestamp timestamp, born_timestamp timestamp, store_host string,"
    " born_host string, msg_id string, uniq_key string, tags string, keys array<string>,"
    " properties map<string,string>, sys_flag int, flag int, transaction_type string,"
    " compressed boolean, reconsume_times int, prepared_transaction_offset long,"
    " body_crc int, version int, body binary, body_error string"
)


JVM_WORK = True
"""The JVM works through the data: it converts the Arrow batches and encodes Parquet (the
session's JVM options follow it: :func:`mqstore.tools.spark.session.quick_start`)."""


REPEATING_COLUMNS: Final = frozenset(
    ("topic", "queue_id", "size", "file", "store_host", "born_host", "tags", "sys_flag",
     "flag", "transaction_type", "compressed", "reconsume_times",
     "prepared_transaction_offset", "version", "body_error")
)  # fmt: skip
"""Columns whose values repeat across messages: dictionary-encoded in the Parquet files;
the per-message ones (offsets, times, ids, keys, properties, bodies) are not."""


def spark_schema() -> StructType:
    """:data:`EXPORT_SCHEMA` as Spark's StructType, built in Python: parsing the DDL
    would be the session's first query plan (seconds on a fresh JVM)."""
    from pyspark.sql import types as T

    simple = {
        "string": T.StringType(), "int": T.IntegerType(), "long": T.LongType(),
        "timestamp": T.TimestampType(), "boolean": T.BooleanType(), "binary": T.BinaryType(),
        "array<string>": T.ArrayType(T.StringType()),
        "map<string,string>": T.MapType(T.StringType(), T.StringType()),
    }  # fmt: skip
    fields = [f.split(" ", 1) for f in EXPORT_SCHEMA.split(", ")]
    return T.StructType([T.StructField(name, simple[kind]) for name, kind in fields])


_TX_NAMES: Final = tuple(fmt.TransactionType(t).name for t in range(0, 16, 4))


def export_batch(
    buf: Buffer, rng: ByteRange, arr: bulk.RecordArrays, schema: pa.Schema
) -> pa.RecordBatch:
    """The rows of the records of ``arr`` whose body CRC is right, every column built
    from the bulk arrays (:mod:`mqstore.tools.spark._export_columns`)."""
    import numpy as np
    import pyarrow as pa

    keep: Any = slice(None) if arr.crc_ok.all() else np.flatnonzero(arr.crc_ok)  # views
    sys_flag = arr.sys_flag[keep]
    ints = {
        n: bulk.read_ints(buf, bulk.field_position(arr, n)[keep], w)
        for n, w in ((bulk.HeaderField.BODY_CRC, 4), (bulk.HeaderField.RECONSUME_TIMES, 4),
                     (bulk.HeaderField.PREPARED_TRANSACTION_OFFSET, 8))
    }  # fmt: skip
    u8 = np.frombuffer(buf, np.uint8)
    try:
        born_v6 = (sys_flag & fmt.BORNHOST_V6_FLAG) != 0
        store_v6 = (sys_flag & fmt.STOREHOST_V6_FLAG) != 0
        born_at = bulk.field_position(arr, bulk.HeaderField.BORN_HOST)[keep]
        store_at = bulk.field_position(arr, bulk.HeaderField.STORE_HOST)[keep]
        phys = arr.physical_offset[keep]
        props = cols.PropertyColumns(u8, arr.props_pos[keep], arr.props_len[keep])
        body, error = cols.bodies(buf, u8, arr.body_pos[keep], arr.body_len[keep], sys_flag)
        text = {
            "store_host": cols.hosts(u8, store_at, store_v6),
            "born_host": cols.hosts(u8, born_at, born_v6),
            "msg_id": cols.msg_ids(u8, store_at, store_v6, phys),
            "uniq_key": props.uniq(), "tags": props.tags(), "keys": props.keys(),
            "properties": props.mapping(), "body": body, "body_error": error,
        }  # fmt: skip
    finally:
        del u8
    m = int(sys_flag.size)
    topics = pa.array(arr.topics, pa.string())
    ts_type = schema.field("store_timestamp").type
    columns: dict[str, Any] = {
        "topic": topics.take(pa.array(arr.topic_id[keep])),
        "queue_id": arr.queue_id[keep], "queue_offset": arr.queue_offset[keep],
        "physical_offset": phys, "size": arr.size[keep],
        "file": pa.array([rng.name] * m, pa.string()),
        "store_timestamp": _timestamps(arr.store_timestamp[keep], ts_type),
        "born_timestamp": _timestamps(arr.born_timestamp[keep], ts_type),
        **text, "sys_flag": sys_flag, "flag": arr.flag[keep],
        "transaction_type": pa.array(_TX_NAMES, pa.string()).take(
            pa.array((sys_flag & fmt.TRANSACTION_MASK) >> 2)
        ),
        "compressed": (sys_flag & fmt.COMPRESSED_FLAG) != 0,
        "reconsume_times": ints[bulk.HeaderField.RECONSUME_TIMES],
        "prepared_transaction_offset": ints[bulk.HeaderField.PREPARED_TRANSACTION_OFFSET],
        "body_crc": ints[bulk.HeaderField.BODY_CRC], "version": arr.version[keep],
    }  # fmt: skip
    arrays = [
        c if isinstance(c := columns[f.name], pa.Array) and c.type == f.type
        else (c.cast(f.type) if isinstance(c, pa.Array) else pa.array(c, f.type))
        for f in schema
    ]  # fmt: skip
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _timestamps(ms: Any, ts_type: pa.DataType) -> pa.Array:
    """Millisecond store/born times as Spark's timestamp (microseconds since the epoch)."""
    import pyarrow as pa

    return pa.array(ms * 1000, pa.int64()).cast(ts_type)


def _export_task(
    ranges: Iterable[ByteRange], schema: pa.Schema, attempts: str, partition_by: str | None
) -> Iterator[parquet_out.WrittenFile]:
    """Task body: mmap each range's file and write its records' Parquet files
    (:mod:`mqstore.tools.spark._parquet_out`); the manifest of the files."""

    def batches() -> Iterator[tuple[str, Iterator[pa.RecordBatch]]]:
        for rng in ranges:
            with open_mapped(rng.path) as mm:
                if isinstance(mm, mmap.mmap):
                    yield f"{rng.base_offset + rng.start:020d}", export_rows(mm, rng, schema)

    return parquet_out.write_task(
        batches(), schema, attempts, partition_by, ROW_GROUP_BYTES, REPEATING_COLUMNS
    )


def export_rows(buf: Buffer, rng: ByteRange, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Batches of the valid records of one range, read through the cursor with CRCs
    checked: a record with a bad CRC is damage, skipped as the codec's decode would,
    by resuming at the next record that names its own position."""
    for arr in range_records(buf, rng, check_crc=True, tags=False):  # TAGS: columns
        yield export_batch(buf, rng, arr, schema)


@dataclass(frozen=True, slots=True)
class ExportResult:
    """Where the Parquet went and how many messages it holds."""

    path: str
    rows: int


def export_with(
    spark: SparkSession,
    store_dir: str | Path,
    out: str | Path,
    split_bytes: int | None = None,
    *,
    partition_by: str | None = None,
) -> ExportResult:
    """Export with an existing session; ``partition_by="topic"`` writes one folder per
    topic (``topic=NAME/``). Row groups are ROW_GROUP_BYTES. ``split_bytes``: range size
    (default :func:`mqstore.tools.spark.reader.balanced_split` over the parallelism).

    Raises:
        LayoutError: ``store_dir`` is not a store.
        FileExistsError: ``out`` exists.
    """
    layout = discover(store_dir)
    target = Path(out).resolve()
    if target.exists():
        raise FileExistsError(f"{target} exists")
    from pyspark.sql.pandas.types import to_arrow_schema

    zone = spark.conf.get("spark.sql.session.timeZone")
    schema = to_arrow_schema(spark_schema(), timezone=zone)

    attempts = str(target / parquet_out.TEMPORARY)

    def task(part: Iterable[ByteRange]) -> Iterator[parquet_out.WrittenFile]:
        return _export_task(part, schema, attempts, partition_by)

    parallelism = spark.sparkContext.defaultParallelism
    ranges = plan_ranges(layout, split_bytes or balanced_split(layout, parallelism))
    target.mkdir(parents=True)
    try:
        rdd = spark.sparkContext.parallelize(ranges, max(1, len(ranges)))
        manifest = rdd.mapPartitions(task).collect()  # a plain RDD job: no query plan
        rows = parquet_out.commit(target, manifest, schema)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return ExportResult(str(target), rows)


def run_export(
    store_dir: str | Path,
    out: str | Path,
    master: str | None = None,
    *,
    progress: bool = False,
    partition_by: str | None = None,
) -> ExportResult:
    """Export ``store_dir`` to Parquet at ``out`` (reusing an active session if any)."""
    from mqstore.tools.spark.session import build_session

    layout = discover(store_dir)  # fail on a bad directory before starting Spark
    spark = build_session(
        master, "mqstore-export", progress=progress, input_bytes=layout.data_bytes()
    )
    return export_with(spark, store_dir, out, partition_by=partition_by)


def main(argv: list[str] | None = None) -> int:
    """CLI entry: 0 written, 2 usage or I/O error."""
    p = argparse.ArgumentParser(prog="mqstore export", description=__doc__.splitlines()[0])
    p.add_argument("dir", help="store root (with commitlog/) or a directory of segments")
    p.add_argument("--parquet", required=True, metavar="OUT", help="output directory")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--partition-by", choices=["topic"], default=None, help="one folder per topic")
    result = run(
        p,
        argv,
        "mqstore export",
        lambda args: run_export(
            args.dir, args.parquet, args.master, progress=True, partition_by=args.partition_by
        ),
    )
    if isinstance(result, int):
        return result
    print(f"exported {result.rows} messages to {result.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
