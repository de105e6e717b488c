"""``mqstore export DIR --parquet OUT``: every message with its metadata to Parquet.

Usage::

    mqstore export DIR --parquet OUT [--master URL]
    python -m mqstore.tools.spark.export DIR --parquet OUT
    spark-submit tools/spark/export.py ...

One row per valid record (see :data:`EXPORT_SCHEMA`), bodies decompressed; a body whose
compressed bytes cannot be inflated is exported as null with ``body_error`` set. Damaged
records are skipped (the scan resumes at the next valid record as the audit does): run
``mqstore audit`` to see them. Parquet files are written through Spark's commit protocol,
so a retried task never leaves a partial file; OUT must not exist.

Exit status: 0 written, 2 usage or I/O error (OUT exists, DIR is not a store).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if not __package__:  # run as a script: spark-submit tools/spark/export.py DIR ...
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mqstore.commitlog import format as fmt
from mqstore.tools.spark.layout import LayoutError, discover
from mqstore.tools.spark.reader import (
    DEFAULT_SPLIT_BYTES,
    map_ranges,
    plan_ranges,
    ranges_dataframe,
)
from mqstore.tools.spark.segscan import Buffer, ByteRange, resync

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

EXPORT_SCHEMA: Final = (
    "topic string, queue_id int, queue_offset long, physical_offset long, size int,"
    " file string, store_timestamp long, born_timestamp long, store_host string,"
    " born_host string, msg_id string, uniq_key string, tags string, keys array<string>,"
    " properties map<string,string>, sys_flag int, flag int, transaction_type string,"
    " compressed boolean, reconsume_times int, prepared_transaction_offset long,"
    " body_crc int, version int, body binary, body_error string"
)


def _host(h: tuple[str, int]) -> str:
    ip, port = h
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _row(rec: fmt.MessageRecord, size: int, name: str) -> tuple[Any, ...]:
    body: bytes | None
    try:
        body, error = rec.decompressed_body(), None
    except ValueError as e:
        body, error = None, str(e)
    props = rec.properties
    return (
        rec.topic, rec.queue_id, rec.queue_offset, rec.physical_offset, size, name,
        rec.store_timestamp, rec.born_timestamp, _host(rec.store_host), _host(rec.born_host),
        rec.msg_id, rec.uniq_key, rec.tags, rec.keys, list(props.items()), rec.sys_flag,
        rec.flag, rec.transaction_type.name, bool(rec.sys_flag & fmt.COMPRESSED_FLAG),
        rec.reconsume_times, rec.prepared_transaction_offset, rec.body_crc, rec.version,
        body, error,
    )  # fmt: skip


def export_rows(buf: Buffer, rng: ByteRange) -> Iterator[tuple[Any, ...]]:
    """Rows for the valid records of one range, skipping damage."""
    with memoryview(buf) as view:  # fmt.decode takes a view; resync's find() needs buf
        yield from _export_rows(buf, view, rng)


def _export_rows(buf: Buffer, view: memoryview, rng: ByteRange) -> Iterator[tuple[Any, ...]]:
    pos = rng.start
    end = len(buf)
    while pos < rng.end:
        r = fmt.decode(view, pos, end)
        if isinstance(r, fmt.Record):
            yield _row(r.record, r.size, rng.name)
            pos += r.size
        elif isinstance(r, fmt.EndOfSegment):
            return
        else:
            pos = resync(buf, rng.base_offset, pos + 1, end)
            if pos < 0:
                return


def _batcher(schema: pa.Schema) -> Callable[[list[tuple[Any, ...]]], pa.RecordBatch]:
    def to_batch(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
        import pyarrow as pa

        cols = list(zip(*rows, strict=True))
        arrays = [pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    return to_batch


@dataclass(frozen=True, slots=True)
class ExportResult:
    """Where the Parquet went and how many messages it holds."""

    path: str
    rows: int


def export_with(
    spark: SparkSession,
    store_dir: str | Path,
    out: str | Path,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
) -> ExportResult:
    """Export with an existing session.

    Raises:
        LayoutError: ``store_dir`` is not a store.
        FileExistsError: ``out`` exists.
    """
    layout = discover(store_dir)
    target = Path(out).resolve()
    if target.exists():
        raise FileExistsError(f"{target} exists")
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    ddl = spark.createDataFrame([], EXPORT_SCHEMA).schema
    assert isinstance(ddl, StructType)
    to_batch = _batcher(to_arrow_schema(ddl))

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return map_ranges(batches, export_rows, to_batch)

    ranges = plan_ranges(layout, split_bytes)
    ranges_dataframe(spark, ranges).mapInArrow(task, EXPORT_SCHEMA).write.parquet(str(target))
    rows = spark.read.parquet(str(target)).count()
    return ExportResult(str(target), rows)


def run_export(
    store_dir: str | Path, out: str | Path, master: str | None = None, *, progress: bool = False
) -> ExportResult:
    """Export ``store_dir`` to Parquet at ``out`` (reusing an active session if any)."""
    from mqstore.tools.spark.session import build_session

    discover(store_dir)  # fail on a bad directory before starting Spark
    spark = build_session(master, "mqstore-export", progress=progress)
    return export_with(spark, store_dir, out)


def main(argv: list[str] | None = None) -> int:
    """CLI entry: 0 written, 2 usage or I/O error."""
    p = argparse.ArgumentParser(prog="mqstore export", description=__doc__.splitlines()[0])
    p.add_argument("dir", help="store root (with commitlog/) or a directory of segments")
    p.add_argument("--parquet", required=True, metavar="OUT", help="output directory")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    try:
        result = run_export(args.dir, args.parquet, args.master, progress=True)
    except (LayoutError, OSError) as e:
        print(f"mqstore export: {e}", file=sys.stderr)
        return 2
    print(f"exported {result.rows} messages to {result.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
