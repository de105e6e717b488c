"""``mqstore reindex DIR``: rebuild consumequeue/ and index/ from the CommitLog, with Spark.

Usage::

    mqstore reindex DIR [--master URL] [--out DIR]
    python -m mqstore.tools.spark.reindex DIR [...]
    spark-submit tools/spark/reindex.py DIR [...]

The files are byte-identical to what the store's dispatcher writes
(``mqstore.consumequeue.dispatch`` + ``queue.ConsumeQueue.put``): units in CommitLog
order, one per dispatchable record (transaction type NOT or COMMIT), tags code from the
dispatcher's own ``tags_code_of`` (TAGS hash; deliver time for delayed records); a unit
whose queue offset is below the queue's next one is skipped (a re-dispatch); the queue's
first file is pre-filled with blank units up to its first unit and a gap is padded with
blank units; files are 6,000,000 bytes, the unwritten rest zero.

Safe under task retries and aborts:

1. records are grouped by (topic, queue) and each group's files are written by the task
   into its own attempt folder ``.reindex-<id>/attempts/<task attempt id>/`` and
   fsynced; the task returns a manifest row per file;
2. only after the one Spark action succeeded, the driver moves the files named by the
   manifest (successful attempts only) into ``.reindex-<id>/consumequeue/`` with
   ``os.replace`` and deletes the attempt folders, so a failed or speculative attempt's
   partial files never reach the result;
3. the new ``consumequeue/`` is swapped in by two renames (old one aside, new one in) and
   the old one deleted; with ``--out`` it is written under OUT and nothing is swapped.

index/ is rebuilt by the same staging + manifest + swap machinery, but not in parallel:
an index file's content depends on arrival order and on where the previous file became
full, so it is written by the store's own ``IndexService``/``IndexFile`` code in ONE task
that receives every indexable record (ROLLBACK excepted) sorted by CommitLog offset
(correctness over parallelism; the parsing is still parallel). The files are then
byte-identical to the dispatcher's. Their *names* are creation times: the existing
``index/`` file names are reused in order (so rebuilding a store's index gives the same
names), and files beyond them are named like the service names them (the clock, always
after the previous name). The geometry (slots, entries per file) is ``--index-slots``/
``--index-num``, else inferred from the existing files, else the StoreConfig defaults
(:func:`mqstore.tools.spark.indexcheck.resolve_geometry`). consumequeue/ and index/ are each
swapped in atomically, one after the other.

The store must not be open (its ``lock`` file is checked).

Exit status: 0 rebuilt, 2 usage or I/O error (not a store, store in use).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if not __package__:  # run as a script: spark-submit tools/spark/reindex.py DIR ...
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt
from mqstore.consumequeue import format as cqfmt
from mqstore.errors import ConfigError
from mqstore.tools.spark._reindex_index import (
    FAIL_ENV,
    INDEX_MANIFEST,
    INDEX_ROWS,
    _install_index,
    index_batch,
    write_index,
)
from mqstore.tools.spark.indexcheck import index_files, resolve_geometry
from mqstore.tools.spark.layout import (
    LayoutError,
    add_geometry_args,
    discover,
    geometry_flags,
)
from mqstore.tools.spark.queues import SCHEDULE_TOPIC
from mqstore.tools.spark.reader import (
    DEFAULT_SPLIT_BYTES,
    map_bulk,
    plan_ranges,
    ranges_dataframe,
    unreadable,
)
from mqstore.tools.spark.segscan import Buffer, ByteRange

if TYPE_CHECKING:
    import pyarrow as pa
    from numpy.typing import NDArray
    from pyspark.sql import DataFrame, SparkSession

UNIT_ROWS: Final = "topic string, queue_id int, queue_offset long, offset long, size int, tags long"
MANIFEST: Final = "topic string, queue_id int, name string, path string, units long"
_IN_QUEUE: Final = (fmt.TRANSACTION_NOT_TYPE, fmt.TRANSACTION_COMMIT_TYPE)


class StoreInUseError(OSError):
    """The store's lock file is held: a broker or MessageStore has it open."""


def _tags_coder() -> Any:
    """The dispatcher's own tags-code rule, bound to the default delay levels."""
    from mqstore.config import StoreConfig
    from mqstore.consumequeue.dispatch import Dispatcher
    from mqstore.schedule import DelayLevels

    levels = DelayLevels.parse(StoreConfig().message_delay_level)
    return Dispatcher(None, None, levels).tags_code_of  # type: ignore[arg-type]


def unit_batch(buf: Buffer, rng: ByteRange, arr: bulk.RecordArrays) -> pa.RecordBatch:
    """UNIT_ROWS of the records of ``arr`` the dispatcher would give a unit (transaction
    type NOT or COMMIT): tag codes from the bulk scan, except for delayed records
    (SCHEDULE_TOPIC_XXXX), whose code the dispatcher's own ``tags_code_of`` computes."""
    import numpy as np
    import pyarrow as pa

    from mqstore.message import string_to_properties

    tx = arr.sys_flag & fmt.TRANSACTION_MASK
    keep = np.flatnonzero((tx == fmt.TRANSACTION_NOT_TYPE) | (tx == fmt.TRANSACTION_COMMIT_TYPE))
    tags = arr.tags_code[keep]
    topic_id = arr.topic_id[keep]
    if SCHEDULE_TOPIC in arr.topics:
        code_of = _tags_coder()
        for i in np.flatnonzero(topic_id == arr.topics.index(SCHEDULE_TOPIC)).tolist():
            j = int(keep[i])
            a, n = int(arr.props_pos[j]), int(arr.props_len[j])
            props = string_to_properties(bytes(buf[a : a + n]).decode())
            tags[i] = code_of(SCHEDULE_TOPIC, props, int(arr.store_timestamp[j]))
    topics = pa.array(arr.topics, pa.string())
    names = [c.split()[0] for c in UNIT_ROWS.split(",")]
    return pa.RecordBatch.from_arrays(
        [topics.take(pa.array(topic_id)), pa.array(arr.queue_id[keep], pa.int32()),
         pa.array(arr.queue_offset[keep], pa.int64()),
         pa.array(arr.physical_offset[keep], pa.int64()), pa.array(arr.size[keep], pa.int32()),
         pa.array(tags, pa.int64())],
        names=names,
    )  # fmt: skip


def queue_files(
    qoff: NDArray[Any], phys: NDArray[Any], size: NDArray[Any], tags: NDArray[Any],
    file_size: int = cqfmt.FILE_SIZE,
) -> dict[str, tuple[bytes, int]]:  # fmt: skip
    """The files of one queue as the dispatcher writes them: name -> (bytes, units that
    point at a message)."""
    import numpy as np

    if qoff.size == 0:
        return {}
    order = np.argsort(phys, kind="stable")
    q, p, s, t = qoff[order], phys[order], size[order], tags[order]
    before = np.r_[-1, np.maximum.accumulate(q)[:-1]]
    keep = q > before  # a unit below the queue's next offset is a re-dispatch: skipped
    q, p, s, t = q[keep], p[keep], s[keep], t[keep]
    per_file = file_size // cqfmt.UNIT_SIZE
    first = int(q[0]) // per_file * per_file
    span = int(q[-1]) - first + 1
    data = bytearray(cqfmt.BLANK_UNIT * span)
    for qo, po, so, to in zip(q.tolist(), p.tolist(), s.tolist(), t.tolist(), strict=True):
        at = (qo - first) * cqfmt.UNIT_SIZE
        data[at : at + cqfmt.UNIT_SIZE] = cqfmt.encode_unit(po, so, to)
    real = np.bincount((q - first) // per_file)
    files: dict[str, tuple[bytes, int]] = {}
    for i, start in enumerate(range(0, len(data), file_size)):
        chunk = bytes(data[start : start + file_size])
        name = f"{first * cqfmt.UNIT_SIZE + start:020d}"
        files[name] = (chunk + bytes(file_size - len(chunk)), int(real[i]) if i < real.size else 0)
    return files


def _write(path: Path, data: bytes, fail_half: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        if fail_half:
            f.write(data[: len(data) // 2])
            f.flush()
            raise RuntimeError(f"injected failure ({FAIL_ENV}) after half of {path}")
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_group(
    key: tuple[Any, ...], table: pa.Table, attempts: str, file_size: int = cqfmt.FILE_SIZE
) -> pa.Table:
    """applyInArrow body: build one queue's files (of ``file_size`` bytes, the store's)
    into this attempt's folder."""
    import numpy as np
    import pyarrow as pa
    from pyspark import TaskContext

    topic, queue_id = (k.as_py() if hasattr(k, "as_py") else k for k in key)
    cols = {
        c: np.asarray(table[c].to_numpy(), dtype=np.int64)
        for c in ("queue_offset", "offset", "size", "tags")
    }
    files = queue_files(cols["queue_offset"], cols["offset"], cols["size"], cols["tags"], file_size)
    ctx = TaskContext.get()
    attempt = ctx.taskAttemptId() if ctx is not None else 0
    fail = bool(os.environ.get(FAIL_ENV)) and ctx is not None and ctx.attemptNumber() == 0
    folder = Path(attempts) / str(attempt) / topic / str(queue_id)
    rows = []
    for name, (data, units) in files.items():
        _write(folder / name, data, fail)
        rows.append((topic, queue_id, name, str(folder / name), units))
    names = [c.split()[0] for c in MANIFEST.split(",")]
    types = [pa.string(), pa.int32(), pa.string(), pa.string(), pa.int64()]
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in types]
    return pa.table([pa.array(c, ty) for c, ty in zip(columns, types, strict=True)], names=names)


def _check_not_open(root: Path) -> None:
    from mqstore import _platform

    lock = root / "lock"
    if not lock.exists():
        return
    fd = os.open(lock, os.O_RDWR)
    try:
        if not _platform.try_lock(fd):
            raise StoreInUseError(f"{root} is open (lock file {lock} is held)")
        _platform.unlock(fd)
    finally:
        os.close(fd)


def _install(manifest: list[Any], staging: Path) -> int:
    """Move the manifest's files into ``staging/consumequeue``; return the file count."""
    final = staging / "consumequeue"
    seen: set[tuple[str, int, str]] = set()
    for r in manifest:
        key = (r.topic, r.queue_id, r.name)
        if key in seen:
            raise RuntimeError(f"two manifest entries for {key}")
        seen.add(key)
        dest = final / r.topic / str(r.queue_id) / r.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(r.path, dest)
    final.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(staging / "attempts", ignore_errors=True)
    return len(seen)


def _swap(staging: Path, target_root: Path, name: str = "consumequeue") -> None:
    """Put ``staging/name`` at ``target_root/name``, the old one aside first."""
    current = target_root / name
    aside = target_root / f".{name}.old-{uuid.uuid4().hex[:8]}"
    if current.exists():
        os.rename(current, aside)
    os.rename(staging / name, current)
    shutil.rmtree(aside, ignore_errors=True)


def reindex_with(
    spark: SparkSession,
    store_dir: str | Path,
    out: str | Path | None = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    *,
    index_slots: int | None = None,
    index_num: int | None = None,
    geometry_flags: dict[str, int | None] | None = None,
    broker_config: str | None = None,
) -> dict[str, Any]:
    """Rebuild consumequeue/ and index/ of ``store_dir`` (into ``out`` if given); a summary.

    The files get the store's geometry: what its existing files show, else
    ``broker_config``, else the flags (``mqstore.geometry``), so an in-place rebuild
    keeps it; the summary says which.

    Raises:
        LayoutError: not a store.
        StoreInUseError: the store is open.
        GeometryError: the broker config or flags contradict the files.
    """
    flags = {**(geometry_flags or {}), "max_hash_slot_num": index_slots, "max_index_num": index_num}
    layout = discover(store_dir, flags=flags, broker_config=broker_config)
    _check_not_open(layout.root)
    target = Path(out).resolve() if out is not None else layout.root
    target.mkdir(parents=True, exist_ok=True)
    staging = target / f".reindex-{uuid.uuid4().hex[:12]}"
    attempts = str(staging / "attempts")
    t0 = time.perf_counter()
    ranges = plan_ranges(layout, split_bytes)
    units = _units_frame(spark, ranges)
    old_index = index_files(layout.index_dir)
    geo = resolve_geometry(old_index, *(layout.index_geometry() or (index_slots, index_num)))
    names = [p.name for p in old_index]
    one_task = _index_frame(spark, ranges)
    try:
        manifest = _write_queues(units, attempts, layout.cq_file_size)
        files = _install(manifest, staging)
        imanifest = _write_index(one_task, attempts, names, geo.slots, geo.num)
        ifiles = _install_index(imanifest, staging)
        _swap(staging, target, "consumequeue")
        _swap(staging, target, "index")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {
        "store": str(layout.root),
        "target": str(target / "consumequeue"),
        "queues": len({(r.topic, r.queue_id) for r in manifest}),
        "files": files,
        "units": sum(r.units for r in manifest),
        "index_target": str(target / "index"),
        "index_files": ifiles,
        "index_entries": sum(r.entries for r in imanifest),
        "index_geometry": (geo.slots, geo.num),
        "cq_file_size": layout.cq_file_size,
        "geometry": layout.geometry.report() if layout.geometry is not None else {},
        "elapsed_s": time.perf_counter() - t0,
    }


def _units_frame(spark: SparkSession, ranges: list[ByteRange]) -> DataFrame:
    """The consume-queue units (UNIT_ROWS) of the records in ``ranges`` (lazy)."""

    def scan(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return map_bulk(batches, unit_batch)

    return ranges_dataframe(spark, ranges).mapInArrow(scan, UNIT_ROWS)


def _index_frame(spark: SparkSession, ranges: list[ByteRange]) -> DataFrame:
    """The index rows (INDEX_ROWS) of ``ranges`` in one partition, in log order (lazy)."""

    def scan_index(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return map_bulk(batches, index_batch)

    keyed = ranges_dataframe(spark, ranges).mapInArrow(scan_index, INDEX_ROWS)
    return keyed.repartition(1).sortWithinPartitions("offset")


def _write_queues(units: DataFrame, attempts: str, file_size: int) -> list[Any]:
    """Write each topic-queue's files under ``attempts`` (one Spark action); the manifest."""

    def write(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        return write_group(key, table, attempts, file_size)

    return units.groupBy("topic", "queue_id").applyInArrow(write, MANIFEST).collect()


def _write_index(
    one_task: DataFrame, attempts: str, names: list[str], slots: int, num: int
) -> list[Any]:
    """Write the index files under ``attempts`` in one task (one Spark action); the manifest."""

    def write_idx(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return write_index(batches, attempts, names, slots, num)

    return one_task.mapInArrow(write_idx, INDEX_MANIFEST).collect()


def run_reindex(
    store_dir: str | Path,
    master: str | None = None,
    out: str | Path | None = None,
    *,
    progress: bool = False,
    index_slots: int | None = None,
    index_num: int | None = None,
    geometry_flags: dict[str, int | None] | None = None,
    broker_config: str | None = None,
) -> dict[str, Any]:
    """Reindex with a session for ``master`` (or the active one)."""
    from mqstore.tools.spark.session import build_session

    discover(store_dir, flags=geometry_flags, broker_config=broker_config)
    spark = build_session(master, "mqstore-reindex", progress=progress)
    return reindex_with(
        spark, store_dir, out, index_slots=index_slots, index_num=index_num,
        geometry_flags=geometry_flags, broker_config=broker_config,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """CLI entry: 0 rebuilt, 2 usage or I/O error."""
    p = argparse.ArgumentParser(prog="mqstore reindex", description=__doc__.splitlines()[0])
    p.add_argument("dir", help="store root (with commitlog/)")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--out", default=None, help="write OUT/consumequeue instead of swapping")
    add_geometry_args(p)
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    try:
        summary = run_reindex(
            args.dir,
            args.master,
            args.out,
            progress=True,
            index_slots=args.index_slots,
            index_num=args.index_num,
            geometry_flags=geometry_flags(args),
            broker_config=args.broker_config,
        )
    except (LayoutError, OSError, ConfigError) as e:
        print(f"mqstore reindex: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a Spark job failure: a task's unreadable file is exit 2
        msg = unreadable(e)
        if msg is None:
            raise
        print(f"mqstore reindex: {msg}", file=sys.stderr)
        return 2
    if summary["geometry"]:
        print(f"geometry: {layout_geometry_line(summary['geometry'])}")
        guessed = [k for k, v in summary["geometry"].items() if v["source"] == "default"]
        if guessed:
            print(
                f"mqstore reindex: note: {', '.join(guessed)} = RocketMQ's defaults: no files,"
                " --broker-config or flag gave them; a broker configured otherwise needs them",
                file=sys.stderr,
            )
    print(
        f"rebuilt {summary['files']} ConsumeQueue files ({summary['units']} units, "
        f"{summary['queues']} queues) in {summary['target']} and {summary['index_files']}"
        f" index files ({summary['index_entries']} entries) in {summary['index_target']}"
        f" in {summary['elapsed_s']:.1f} s"
    )
    return 0


def layout_geometry_line(report: dict[str, dict[str, object]]) -> str:
    """``field value (source), ...`` of a geometry report."""
    return ", ".join(f"{k} {v['value']} ({v['source']})" for k, v in report.items())


if __name__ == "__main__":
    sys.exit(main())
