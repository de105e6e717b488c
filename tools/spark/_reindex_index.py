"""The index half of :mod:`mqstore.tools.spark.reindex`: read the keys, write index/ in one task.

An index file's content depends on arrival order, so the rows are sorted by log offset
into one partition and written by the store's own ``IndexService`` (see reindex.py).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt
from mqstore.tools.spark.segscan import Buffer, ByteRange

if TYPE_CHECKING:
    import pyarrow as pa

INDEX_ROWS: Final = "offset long, store_ts long, topic string, uniq string, keys string"
INDEX_MANIFEST: Final = "name string, path string, entries long"
FAIL_ENV: Final = "MQSTORE_REINDEX_FAIL_FIRST_ATTEMPT"
"""Test hook: when set, attempt 0 of every task fails after writing half a file."""


def index_batch(buf: Buffer, rng: ByteRange, arr: bulk.RecordArrays) -> pa.RecordBatch:
    """INDEX_ROWS (offset, store timestamp, topic, UNIQ_KEY, KEYS) of the records of
    ``arr`` the dispatcher indexes (every type but ROLLBACK): the numbers from the bulk
    scan, the two key strings read from each record's properties."""
    import numpy as np
    import pyarrow as pa

    from mqstore.message import PROPERTY_KEYS, property_of, uniq_key_of

    tx = arr.sys_flag & fmt.TRANSACTION_MASK
    keep = np.flatnonzero(tx != fmt.TRANSACTION_ROLLBACK_TYPE)
    uniq: list[str | None] = []
    keys: list[str | None] = []
    with memoryview(buf) as view:
        for a, n in zip(arr.props_pos[keep].tolist(), arr.props_len[keep].tolist(), strict=True):
            props = str(view[a : a + n], "utf-8")
            uniq.append(uniq_key_of(props))
            keys.append(property_of(props, PROPERTY_KEYS))
    topics = pa.array(arr.topics, pa.string())
    names = [c.split()[0] for c in INDEX_ROWS.split(",")]
    return pa.RecordBatch.from_arrays(
        [pa.array(arr.physical_offset[keep], pa.int64()),
         pa.array(arr.store_timestamp[keep], pa.int64()),
         topics.take(pa.array(arr.topic_id[keep])), pa.array(uniq, pa.string()),
         pa.array(keys, pa.string())],
        names=names,
    )  # fmt: skip


def _index_batch(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    import pyarrow as pa

    types = [pa.int64(), pa.int64(), pa.string(), pa.string(), pa.string()]
    names = [c.split()[0] for c in INDEX_ROWS.split(",")]
    cols = list(zip(*rows, strict=True))
    return pa.RecordBatch.from_arrays(
        [pa.array(c, ty) for c, ty in zip(cols, types, strict=True)], names=names
    )


def write_index(
    batches: Iterator[pa.RecordBatch], attempts: str, names: list[str], slots: int, num: int
) -> Iterator[pa.RecordBatch]:
    """The single index-writing task: records in CommitLog order through IndexService."""
    import pyarrow as pa
    from pyspark import TaskContext

    from mqstore.index import IndexService
    from mqstore.index import format as ifmt

    ctx = TaskContext.get()
    attempt = ctx.taskAttemptId() if ctx is not None else 0
    fail = bool(os.environ.get(FAIL_ENV)) and ctx is not None and ctx.attemptNumber() == 0
    folder = Path(attempts) / str(attempt) / "index"
    planned = iter([ifmt.name_to_millis(n) for n in names])

    def clock() -> int:
        return next(planned, time.time_ns() // 1_000_000)

    service = IndexService(folder, slots, num, clock=clock)
    service.load(last_exit_ok=True, index_msg_timestamp=0)
    try:
        for batch in batches:
            for off, ts, topic, uniq, keys in zip(
                *(batch.column(i).to_pylist() for i in range(5)), strict=True
            ):
                service.build(topic, off, ts, uniq, keys.split(" ") if keys else ())
            if fail and service.files:
                raise RuntimeError(f"injected failure ({FAIL_ENV}) while writing {folder}")
        service.flush()
        rows = [(f.path.name, str(f.path), f.index_count - 1) for f in service.files]
    finally:
        service.close()
    if fail:
        raise RuntimeError(f"injected failure ({FAIL_ENV}) after writing {folder}")
    cols = list(zip(*rows, strict=True)) if rows else [(), (), ()]
    types = [pa.string(), pa.string(), pa.int64()]
    yield pa.RecordBatch.from_arrays(
        [pa.array(c, t) for c, t in zip(cols, types, strict=True)],
        names=["name", "path", "entries"],
    )


def _install_index(manifest: list[Any], staging: Path) -> int:
    """Move the index manifest's files into ``staging/index``; return the file count."""
    final = staging / "index"
    final.mkdir(parents=True, exist_ok=True)
    names = [r.name for r in manifest]
    if len(set(names)) != len(names):
        raise RuntimeError(f"duplicate index files in the manifest: {names}")
    for r in manifest:
        os.replace(r.path, final / r.name)
    shutil.rmtree(staging / "attempts", ignore_errors=True)
    return len(names)
