"""``mqstore export DIR --parquet OUT``: every message with its metadata to Parquet.

Usage::

    mqstore export DIR --parquet OUT [--master URL] [--partition-by topic]
    python -m mqstore.tools.spark.export DIR --parquet OUT
    spark-submit tools/spark/export.py ...

One row per valid record (see :data:`EXPORT_SCHEMA`; store and born times are Parquet
timestamps), bodies decompressed; a body whose
compressed bytes cannot be inflated is exported as null with ``body_error`` set. Damaged
records are skipped (the scan resumes at the next valid record as the audit does): run
``mqstore audit`` to see them. Parquet files are written through Spark's commit protocol,
so a retried task never leaves a partial file; OUT must not exist.

Exit status: 0 written, 2 usage or I/O error (OUT exists, DIR is not a store).
"""

from __future__ import annotations

import argparse
import mmap
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if not __package__:  # run as a script: spark-submit tools/spark/export.py DIR ...
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt
from mqstore.compression import decompress
from mqstore.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    bytes_host,
    string_to_properties,
)
from mqstore.tools.spark.layout import LayoutError, discover
from mqstore.tools.spark.reader import (
    DEFAULT_SPLIT_BYTES,
    open_mapped,
    plan_ranges,
    ranges_dataframe,
    unreadable,
)
from mqstore.tools.spark.segscan import Buffer, ByteRange, resync

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

ROW_GROUP_BYTES: Final = 96 << 20
"""Parquet row groups of about 96 MiB (64-128 MiB suits readers that split on them)."""
EXPORT_SCHEMA: Final = (
    "topic string, queue_id int, queue_offset long, physical_offset long, size int,"
    " file string, store_timestamp timestamp, born_timestamp timestamp, store_host string,"
    " born_host string, msg_id string, uniq_key string, tags string, keys array<string>,"
    " properties map<string,string>, sys_flag int, flag int, transaction_type string,"
    " compressed boolean, reconsume_times int, prepared_transaction_offset long,"
    " body_crc int, version int, body binary, body_error string"
)


_TX_NAMES: Final = tuple(fmt.TransactionType(t).name for t in range(0, 16, 4))


def _host(raw: bytes) -> str:
    ip, port = bytes_host(raw)
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def export_batch(
    buf: Buffer, rng: ByteRange, arr: bulk.RecordArrays, schema: pa.Schema
) -> pa.RecordBatch:
    """The rows of the records of ``arr`` whose body CRC is right: numbers from the bulk
    arrays; properties, hosts, ids and bodies per record (a body that cannot be
    decompressed is null with ``body_error``)."""
    import numpy as np
    import pyarrow as pa

    keep = np.flatnonzero(arr.crc_ok)
    sys_flag = arr.sys_flag[keep]
    host_at = {
        n: bulk.field_position(arr, n)[keep].tolist()
        for n in (bulk.HeaderField.BORN_HOST, bulk.HeaderField.STORE_HOST)
    }
    ints = {
        n: bulk.read_ints(buf, bulk.field_position(arr, n)[keep], w)
        for n, w in ((bulk.HeaderField.BODY_CRC, 4), (bulk.HeaderField.RECONSUME_TIMES, 4),
                     (bulk.HeaderField.PREPARED_TRANSACTION_OFFSET, 8))
    }  # fmt: skip
    hosts: dict[bytes, str] = {}
    text = _Text(hosts)
    with memoryview(buf) as view:
        for i, j in enumerate(keep.tolist()):
            v6 = int(sys_flag[i])
            born_len = fmt.IPV6_HOST_LEN if v6 & fmt.BORNHOST_V6_FLAG else fmt.IPV4_HOST_LEN
            store_len = fmt.IPV6_HOST_LEN if v6 & fmt.STOREHOST_V6_FLAG else fmt.IPV4_HOST_LEN
            b, st = host_at[bulk.HeaderField.BORN_HOST][i], host_at[bulk.HeaderField.STORE_HOST][i]
            text.add(
                view, bytes(view[b : b + born_len]), bytes(view[st : st + store_len]),
                int(arr.physical_offset[j]), int(arr.props_pos[j]), int(arr.props_len[j]),
                int(arr.body_pos[j]), int(arr.body_len[j]), v6,
            )  # fmt: skip
    m = keep.size
    topics = pa.array(arr.topics, pa.string())
    ts_type = schema.field("store_timestamp").type
    cols: dict[str, Any] = {
        "topic": topics.take(pa.array(arr.topic_id[keep])),
        "queue_id": arr.queue_id[keep], "queue_offset": arr.queue_offset[keep],
        "physical_offset": arr.physical_offset[keep], "size": arr.size[keep],
        "file": pa.array([rng.name] * m, pa.string()),
        "store_timestamp": _timestamps(arr.store_timestamp[keep], ts_type),
        "born_timestamp": _timestamps(arr.born_timestamp[keep], ts_type),
        "store_host": text.store_host, "born_host": text.born_host, "msg_id": text.msg_id,
        "uniq_key": text.uniq, "tags": text.tags, "keys": text.keys,
        "properties": text.props, "sys_flag": sys_flag, "flag": arr.flag[keep],
        "transaction_type": pa.array(_TX_NAMES, pa.string()).take(
            pa.array((sys_flag & fmt.TRANSACTION_MASK) >> 2)
        ),
        "compressed": (sys_flag & fmt.COMPRESSED_FLAG) != 0,
        "reconsume_times": ints[bulk.HeaderField.RECONSUME_TIMES],
        "prepared_transaction_offset": ints[bulk.HeaderField.PREPARED_TRANSACTION_OFFSET],
        "body_crc": ints[bulk.HeaderField.BODY_CRC], "version": arr.version[keep],
        "body": text.body, "body_error": text.error,
    }  # fmt: skip
    arrays = [pa.array(cols[f.name], f.type) if not isinstance(cols[f.name], pa.Array)
              else cols[f.name] for f in schema]  # fmt: skip
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _timestamps(ms: Any, ts_type: pa.DataType) -> pa.Array:
    """Millisecond store/born times as Spark's timestamp (microseconds since the epoch)."""
    import pyarrow as pa

    return pa.array(ms * 1000, pa.int64()).cast(ts_type)


def _export_task(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Task body: mmap each range's file and export its records."""
    for batch in batches:
        for d in batch.to_pylist():
            rng = ByteRange(**d)
            with open_mapped(rng.path) as mm:
                if isinstance(mm, mmap.mmap):
                    yield from export_rows(mm, rng, schema)


class _Text:
    """The per-record columns of an export batch (strings, maps, bodies)."""

    def __init__(self, hosts: dict[bytes, str]) -> None:
        self.hosts = hosts
        self.store_host: list[str] = []
        self.born_host: list[str] = []
        self.msg_id: list[str] = []
        self.uniq: list[str | None] = []
        self.tags: list[str | None] = []
        self.keys: list[list[str]] = []
        self.props: list[list[tuple[str, str]]] = []
        self.body: list[bytes | None] = []
        self.error: list[str | None] = []

    def _host(self, raw: bytes) -> str:
        h = self.hosts.get(raw)
        if h is None:
            h = self.hosts[raw] = _host(raw)
        return h

    def add(
        self, view: memoryview, born: bytes, store: bytes, phys: int, props_pos: int,
        props_len: int, body_pos: int, body_len: int, sys_flag: int,
    ) -> None:  # fmt: skip
        self.born_host.append(self._host(born))
        self.store_host.append(self._host(store))
        self.msg_id.append(store.hex().upper() + f"{phys & 0xFFFFFFFFFFFFFFFF:016X}")
        props = string_to_properties(str(view[props_pos : props_pos + props_len], "utf-8"))
        self.props.append(list(props.items()))
        self.uniq.append(props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
        self.tags.append(props.get(PROPERTY_TAGS))
        self.keys.append([k for k in props.get(PROPERTY_KEYS, "").split(" ") if k])
        body = bytes(view[body_pos : body_pos + body_len])
        try:
            self.body.append(decompress(body, sys_flag))
            self.error.append(None)
        except ValueError as e:
            self.body.append(None)
            self.error.append(str(e))


def export_rows(buf: Buffer, rng: ByteRange, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Batches of the valid records of one range (CRC checked), skipping damage: a
    record with a bad CRC is skipped as the codec's decode would, by resuming at the
    next record that names its own position."""
    import numpy as np

    end = len(buf)
    pos = rng.start
    while pos < rng.end:
        b = bulk.scan(buf, pos, rng.end, end, check_crc=True)
        arr = b.records
        bad = np.flatnonzero(~arr.crc_ok)
        if bad.size:
            first = int(bad[0])
            part = _take(arr, first)
            if len(part):
                yield export_batch(buf, rng, part, schema)
            pos = resync(buf, rng.base_offset, int(arr.position[first]) + 1, end, rng.path)
            if pos < 0:
                return
            continue
        if len(arr):
            yield export_batch(buf, rng, arr, schema)
        pos = b.end
        if b.stop is None:
            continue
        if isinstance(b.stop, fmt.EndOfSegment):
            return
        pos = resync(buf, rng.base_offset, pos + 1, end, rng.path)
        if pos < 0:
            return


def _take(arr: bulk.RecordArrays, n: int) -> bulk.RecordArrays:
    """The first ``n`` records of ``arr`` (topic ids and keys are kept as they are)."""
    import dataclasses

    cut = {
        f.name: getattr(arr, f.name)[:n]
        for f in dataclasses.fields(arr)
        if f.name not in ("topics", "key_record", "key_hash")
    }
    return dataclasses.replace(arr, **cut)


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
    *,
    partition_by: str | None = None,
) -> ExportResult:
    """Export with an existing session; ``partition_by="topic"`` writes one folder per
    topic (``topic=NAME/``). Row groups are ROW_GROUP_BYTES.

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
    schema = to_arrow_schema(ddl, timezone=spark.conf.get("spark.sql.session.timeZone"))

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _export_task(batches, schema)

    ranges = plan_ranges(layout, split_bytes)
    frame = ranges_dataframe(spark, ranges).mapInArrow(task, EXPORT_SCHEMA)
    writer = frame.write.option("parquet.block.size", ROW_GROUP_BYTES)
    if partition_by is not None:
        writer = writer.partitionBy(partition_by)
    writer.parquet(str(target))
    rows = spark.read.parquet(str(target)).count()
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
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    try:
        result = run_export(
            args.dir, args.parquet, args.master, progress=True, partition_by=args.partition_by
        )
    except (LayoutError, OSError) as e:
        print(f"mqstore export: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a Spark job failure: a task's unreadable file is exit 2
        msg = unreadable(e)
        if msg is None:
            raise
        print(f"mqstore export: {msg}", file=sys.stderr)
        return 2
    print(f"exported {result.rows} messages to {result.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
