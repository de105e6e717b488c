"""Parquet files of :mod:`mqstore.tools.spark.export`, written by the tasks with pyarrow.

The batches never travel through the JVM: each task writes its ranges' rows with
pyarrow's Parquet writer (snappy, as Spark writes by default; row groups of about
``row_group_bytes``) and returns one manifest entry per file. The layout is what Spark's
own writer leaves, so ``spark.read.parquet(OUT)`` and other readers see the same table:

* ``part-<first log offset of the range>.parquet`` files, or with ``partition_by="topic"``
  one folder per topic, ``topic=<name>/`` (Spark's path escaping), the column left out
  of the files;
* an empty ``_SUCCESS`` file once every file is in place.

Commit protocol: a task writes under ``OUT/_temporary/<task attempt id>/``; after the
one Spark action succeeded, the driver moves the files the job's result names (the
successful attempt of each task only) to their place and deletes ``_temporary``, so a
failed or speculative attempt's partial file never reaches OUT (readers skip names
starting with ``_`` meanwhile).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

TEMPORARY: Final = "_temporary"
_ESCAPED: Final = frozenset([*map(chr, range(1, 32)), *"\"#%'*/:=?\\\x7f{[]^"])
"""Characters Spark escapes as ``%XX`` in a partition folder's name."""


def partition_dir(column: str, value: str) -> str:
    """``column=value`` with Spark's escaping of the value (``escapePathName``)."""
    if value == "":
        value = "__HIVE_DEFAULT_PARTITION__"
    escaped = "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)
    return f"{column}={escaped}"


class _File:
    """One Parquet file being written: batches buffered into row groups."""

    def __init__(
        self, path: Path, schema: pa.Schema, row_group_bytes: int, dictionary: frozenset[str]
    ) -> None:
        import pyarrow.parquet as pq

        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.writer: pq.ParquetWriter = pq.ParquetWriter(
            path, schema, compression="snappy",
            use_dictionary=[n for n in schema.names if n in dictionary],
        )  # fmt: skip
        self.pending: list[pa.RecordBatch] = []
        self.pending_bytes = 0
        self.rows = 0
        self.limit = row_group_bytes

    def add(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.pending_bytes += batch.nbytes
        self.rows += batch.num_rows
        if self.pending_bytes >= self.limit:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if self.pending:
            table = pa.Table.from_batches(self.pending)
            self.writer.write_table(table, row_group_size=max(1, table.num_rows))
            self.pending, self.pending_bytes = [], 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


class WrittenFile(NamedTuple):
    """A file a task wrote: its path relative to the output, where it is, its rows."""

    rel: str
    path: str
    rows: int


def write_task(
    ranges: Iterable[tuple[str, Iterator[pa.RecordBatch]]],
    schema: pa.Schema,
    attempts: str,
    partition_by: str | None,
    row_group_bytes: int,
    dictionary: frozenset[str] = frozenset(),
) -> Iterator[WrittenFile]:
    """Task body: write each (file stem, batches) pair's rows into this attempt's folder;
    the manifest: one :class:`WrittenFile` per file written. Only the ``dictionary``
    columns are dictionary-encoded (values that repeat; hashing unique values such as
    message bodies and ids costs time and saves nothing)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    folder = Path(attempts) / str(ctx.taskAttemptId() if ctx is not None else 0)
    file_schema = schema
    if partition_by is not None:
        file_schema = schema.remove(schema.get_field_index(partition_by))
    for stem, batches in ranges:
        files: dict[str, _File] = {}
        try:
            for batch in batches:
                for rel, part in _split(batch, partition_by, stem):
                    f = files.get(rel)
                    if f is None:
                        f = _File(folder / rel, file_schema, row_group_bytes, dictionary)
                        files[rel] = f
                    f.add(part)
        finally:
            for f in files.values():
                f.close()
        for rel, f in files.items():
            yield WrittenFile(rel, str(f.path), f.rows)


def _split(
    batch: pa.RecordBatch, partition_by: str | None, stem: str
) -> Iterator[tuple[str, pa.RecordBatch]]:
    """(relative file path, rows) of a batch: all of it, or one part per partition value."""
    import pyarrow.compute as pc

    name = f"part-{stem}.parquet"
    if partition_by is None:
        yield name, batch
        return
    column = batch.column(partition_by)
    rest = batch.drop_columns([partition_by])
    for value in pc.unique(column).to_pylist():
        part = rest.filter(pc.equal(column, value))
        yield f"{partition_dir(partition_by, value)}/{name}", part


def commit(target: Path, manifest: list[WrittenFile], schema: pa.Schema) -> int:
    """Move the manifest's files into ``target``, write ``_SUCCESS``, drop the attempts;
    the row count. With no row at all, one empty file holds the schema."""
    import pyarrow.parquet as pq

    seen: set[str] = set()
    for r in manifest:
        if r.rel in seen:
            raise RuntimeError(f"two manifest entries for {r.rel}")
        seen.add(r.rel)
        dest = target / r.rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(r.path, dest)
    total = sum(int(r.rows) for r in manifest)
    if not seen:
        pq.write_table(schema.empty_table(), target / "part-empty.parquet")
    shutil.rmtree(target / TEMPORARY, ignore_errors=True)
    (target / "_SUCCESS").touch()
    return total
