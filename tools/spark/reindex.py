"""``mqstore reindex DIR``: rebuild consumequeue/ and index/ from the CommitLog, with Spark.

Usage::

    mqstore reindex DIR [--master URL] [--out DIR]
    python -m mqstore.tools.spark.reindex DIR [...]
    spark-submit tools/spark/reindex.py DIR [...]

The files are byte-identical to what the store's dispatcher writes
(``mqstore.consumequeue.dispatch`` + ``queue.ConsumeQueue.put``): units in CommitLog
order, one per record that gets one and with the tags code that
:mod:`mqstore.commitlog.dispatch_rule` gives (TAGS hash; deliver time for delayed
records); a unit
whose queue offset is below the queue's next one is skipped (a re-dispatch); the queue's
first file is pre-filled with blank units up to its first unit and a gap is padded with
blank units; files are 6,000,000 bytes, the unwritten rest zero.

Safe under task retries and aborts:

1. each range is scanned once in a task (:mod:`mqstore.commitlog.bulk`, index keys hashed
   in the same scan); the task saves the range's units and index keys as arrays (one
   ``.npy`` file each) in its own attempt folder
   ``.reindex-<id>/attempts/<task attempt id>/<range>/`` and returns their path;
2. only after the one Spark action succeeded, the driver reads the files the job's result
   names (successful attempts only: a failed or speculative attempt's partial files are
   never read) and writes ``.reindex-<id>/consumequeue/`` and ``.reindex-<id>/index/``
   with numpy, each file fsynced (:mod:`mqstore.tools.spark._reindex_index`);
3. the new ``consumequeue/`` and ``index/`` are each swapped in by two renames (old one
   aside, new one in) and the old one deleted; with ``--out`` they are written under OUT
   and nothing is swapped.

index/ is byte-identical to what the dispatcher's ``IndexService`` writes when it indexes
the same messages in CommitLog order (every type but ROLLBACK; UNIQ_KEY then each KEYS
token): an index file's content depends on arrival order and on where the previous file
became full, which the driver reproduces from the keys sorted by CommitLog offset. The
files' *names* are creation times: the existing ``index/`` file names are reused in order
(so rebuilding a store's index gives the same names), and files beyond them are named
like the service names them (the clock, always after the previous name). The geometry
(slots, entries per file) is ``--index-slots``/``--index-num``, else inferred from the
existing files, else the StoreConfig defaults
(:func:`mqstore.tools.spark.indexcheck.resolve_geometry`).

The store must not be open (its ``lock`` file is checked).

Exit status: 0 rebuilt, 2 usage or I/O error (not a store, store in use).
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

if not __package__:  # run as a script: spark-submit tools/spark/reindex.py DIR ...
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mqstore.commitlog import dispatch_rule as rule
from mqstore.errors import StoreLockedError
from mqstore.tools.spark._cli import run
from mqstore.tools.spark._reindex_index import (
    FAIL_ENV,
    FileWriter,
    WriterPool,
    is_sorted,
    write_file,
    write_index_files,
    write_queue_files,
)
from mqstore.tools.spark.byterange import ByteRange
from mqstore.tools.spark.indexcheck import index_files, resolve_geometry
from mqstore.tools.spark.layout import (
    add_geometry_args,
    discover,
    geometry_flags,
)
from mqstore.tools.spark.reader import (
    balanced_split,
    bulk_records,
    open_mapped,
    plan_ranges,
    queue_order,
)
from mqstore.tools.spark.segscan import Buffer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqstore.schedule import DelayLevels


JVM_WORK = False
"""The JVM does not work through the data: units and index entries are built in the
Python tasks and written by the driver, the JVM schedules the tasks and moves small
results (the session's JVM options follow it:
:func:`mqstore.tools.spark.session.quick_start`)."""


class StoreInUseError(StoreLockedError, OSError):
    """The store's lock file is held: a broker or MessageStore has it open (busy: exit 3)."""


def _default_levels() -> DelayLevels:
    """The delay levels of a store with the default ``message_delay_level``."""
    from mqstore.config import StoreConfig
    from mqstore.schedule import DelayLevels

    return DelayLevels.parse(StoreConfig().message_delay_level)


def _scan_range(buf: Buffer, rng: ByteRange) -> dict[str, Any]:
    """One range's consume-queue units and index keys as arrays (one bulk scan).

    Units and keys as :mod:`mqstore.commitlog.dispatch_rule` says: units of the records
    that get one, tag codes from the scan except for delayed records, whose deliver time
    the rule computes; every key hash of the records whose keys are indexed, with its
    record's offset, store time and log position (which numbers the messages)."""
    import numpy as np

    from mqstore.message import string_to_properties

    topics: dict[str, int] = {}
    parts: dict[str, list[Any]] = {k: [] for k in _COLUMNS}
    levels: DelayLevels | None = None
    for arr in bulk_records(buf, rng, keys=True):
        keep = np.flatnonzero(rule.units_mask(arr.sys_flag))
        ids = np.array([topics.setdefault(t, len(topics)) for t in arr.topics], np.int64)
        tags = arr.tags_code[keep]
        delayed = rule.needs_delayed_code(arr.topic_id[keep], arr.topics)
        if delayed.any():
            levels = levels or _default_levels()
            for i in np.flatnonzero(delayed).tolist():
                j = int(keep[i])
                a, n = int(arr.props_pos[j]), int(arr.props_len[j])
                props = string_to_properties(bytes(buf[a : a + n]).decode())
                tags[i] = rule.delayed_tags_code(props, int(arr.store_timestamp[j]), levels)
        parts["u_topic"].append(ids[arr.topic_id[keep]])
        parts["u_queue"].append(arr.queue_id[keep])
        parts["u_qoff"].append(arr.queue_offset[keep])
        parts["u_phys"].append(arr.physical_offset[keep])
        parts["u_size"].append(arr.size[keep])
        parts["u_tags"].append(tags)
        indexed = rule.keys_mask(arr.sys_flag)[arr.key_record]
        rec, hashes = arr.key_record[indexed], arr.key_hash[indexed]
        parts["k_phys"].append(arr.physical_offset[rec])
        parts["k_pos"].append(arr.position[rec] + rng.base_offset)
        parts["k_ts"].append(arr.store_timestamp[rec])
        parts["k_hash"].append(hashes.astype(np.int64))
    out: dict[str, Any] = {
        k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in parts.items()
    }
    out["topics"] = np.array(list(topics), dtype=str)
    return out


_COLUMNS: Final = (
    "u_topic", "u_queue", "u_qoff", "u_phys", "u_size", "u_tags",
    "k_phys", "k_pos", "k_ts", "k_hash",
)  # fmt: skip


class ManifestRow(NamedTuple):
    """What a task returns per range: where its arrays are and how many of each."""

    range_key: int
    path: str
    units: int
    keys: int


def scan_task(ranges: Iterable[ByteRange], attempts: str) -> Iterator[ManifestRow]:
    """Task body: scan each range and save its arrays (one ``.npy`` per column, in a
    folder per range) in this attempt's folder; one :class:`ManifestRow` per range. A
    failed or speculative attempt's files are never read: the driver reads only the
    paths the job's result names."""
    import numpy as np
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = ctx.taskAttemptId() if ctx is not None else 0
    fail = bool(os.environ.get(FAIL_ENV)) and ctx is not None and ctx.attemptNumber() == 0
    for rng in ranges:
        with open_mapped(rng.path) as mm:
            if not isinstance(mm, mmap.mmap):
                continue
            arrays = _scan_range(mm, rng)
        key = rng.base_offset + rng.start
        folder = Path(attempts) / str(attempt) / f"{key:020d}"
        folder.mkdir(parents=True, exist_ok=True)
        for name, values in arrays.items():
            with open(folder / f"{name}.npy", "wb") as f:
                np.save(f, values, allow_pickle=False)
                if fail:
                    f.truncate(f.tell() // 2)
                    raise RuntimeError(f"injected failure ({FAIL_ENV}) after half of {f.name}")
        yield ManifestRow(key, str(folder), int(arrays["u_phys"].size), int(arrays["k_phys"].size))


def _load(manifest: list[ManifestRow]) -> dict[str, Any]:
    """The ranges' arrays (in log order) concatenated, topic ids made global (the files
    are mapped, so each value is copied once, into the result)."""
    import numpy as np

    parts: dict[str, list[Any]] = {k: [] for k in _COLUMNS}
    topics: dict[str, int] = {}
    for r in sorted(manifest, key=lambda r: r.range_key):
        folder = Path(r.path)
        names = np.load(folder / "topics.npy", allow_pickle=False).tolist()
        local = np.array([topics.setdefault(t, len(topics)) for t in names], np.int64)
        for k in _COLUMNS:
            v = np.load(folder / f"{k}.npy", mmap_mode="r", allow_pickle=False)
            parts[k].append(local[v] if k == "u_topic" and v.size else v)
    out: dict[str, Any] = {
        k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in parts.items()
    }
    out["topics"] = list(topics)
    return out


def write_queues(
    arrays: dict[str, Any], folder: Path, file_size: int, writer: FileWriter = write_file
) -> tuple[int, int, int]:
    """Write every queue's files under ``folder`` with ``writer``; (queues, files, units)."""
    import numpy as np

    topic, queue = arrays["u_topic"], arrays["u_queue"]
    if topic.size == 0:
        return 0, 0, 0
    order, key = queue_order(topic, queue)
    bounds = np.r_[0, np.flatnonzero(key[1:] != key[:-1]) + 1, key.size]
    files = units = 0
    names = arrays["topics"]
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        rows = order[a:b]
        t, q = names[int(topic[rows[0]])], int(queue[rows[0]])
        written = write_queue_files(
            folder / t / str(q), arrays["u_qoff"][rows], arrays["u_phys"][rows],
            arrays["u_size"][rows], arrays["u_tags"][rows], file_size, writer,
        )  # fmt: skip
        files += len(written)
        units += sum(n for _, n in written)
    return bounds.size - 1, files, units


def write_index(
    arrays: dict[str, Any], folder: Path, names: list[str], slots: int, num: int,
    writer: FileWriter = write_file,
) -> tuple[int, int]:  # fmt: skip
    """Write index/ under ``folder`` with ``writer``; (files, entries)."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    cols = [arrays[k] for k in ("k_phys", "k_pos", "k_ts", "k_hash")]
    if not is_sorted(cols[0]):  # a healthy log's keys come in offset order already
        order = np.argsort(cols[0], kind="stable")
        cols = [c[order] for c in cols]
    phys, pos, ts, hashes = cols
    written = write_index_files(folder, names, slots, num, phys, pos, ts, hashes, writer=writer)
    return len(written), sum(n for _, n in written)


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
    split_bytes: int | None = None,
    *,
    index_slots: int | None = None,
    index_num: int | None = None,
    geometry_flags: dict[str, int | None] | None = None,
    broker_config: str | None = None,
) -> dict[str, Any]:
    """Rebuild consumequeue/ and index/ of ``store_dir`` (into ``out`` if given); a summary.

    The files get the store's geometry: what its existing files show, else
    ``broker_config``, else the flags (``mqstore.geometry``), so an in-place rebuild
    keeps it; the summary says which. ``split_bytes``: range size (default
    :func:`mqstore.tools.spark.reader.balanced_split` over the session's parallelism).

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
    parallelism = spark.sparkContext.defaultParallelism
    ranges = plan_ranges(layout, split_bytes or balanced_split(layout, parallelism))
    old_index = index_files(layout.index_dir)
    geo = resolve_geometry(old_index, *(layout.index_geometry() or (index_slots, index_num)))
    try:
        manifest = _scan_ranges(spark, ranges, attempts)
        arrays = _load(manifest)
        names = [p.name for p in old_index]
        with WriterPool() as writer:
            queues, files, units = write_queues(
                arrays, staging / "consumequeue", layout.cq_file_size, writer
            )
            (staging / "consumequeue").mkdir(parents=True, exist_ok=True)
            ifiles, entries = write_index(
                arrays, staging / "index", names, geo.slots, geo.num, writer
            )
        shutil.rmtree(attempts, ignore_errors=True)
        _swap(staging, target, "consumequeue")
        _swap(staging, target, "index")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {
        "store": str(layout.root),
        "target": str(target / "consumequeue"),
        "queues": queues,
        "files": files,
        "units": units,
        "index_target": str(target / "index"),
        "index_files": ifiles,
        "index_entries": entries,
        "index_geometry": (geo.slots, geo.num),
        "cq_file_size": layout.cq_file_size,
        "geometry": layout.geometry.report() if layout.geometry is not None else {},
        "elapsed_s": time.perf_counter() - t0,
    }


def _scan_ranges(spark: SparkSession, ranges: list[ByteRange], attempts: str) -> list[ManifestRow]:
    """Scan every range in a task (one Spark action, a plain RDD job: no query plan);
    the manifest of their array files."""

    def task(part: Iterable[ByteRange]) -> Iterator[ManifestRow]:
        return scan_task(part, attempts)

    rdd = spark.sparkContext.parallelize(ranges, max(1, len(ranges)))
    return rdd.mapPartitions(task).collect()


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

    layout = discover(store_dir, flags=geometry_flags, broker_config=broker_config)
    spark = build_session(
        master,
        "mqstore-reindex",
        progress=progress,
        input_bytes=layout.data_bytes(),
        jvm_work=JVM_WORK,
    )
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
    summary = run(
        p,
        argv,
        "mqstore reindex",
        lambda args: run_reindex(
            args.dir,
            args.master,
            args.out,
            progress=True,
            index_slots=args.index_slots,
            index_num=args.index_num,
            geometry_flags=geometry_flags(args),
            broker_config=args.broker_config,
        ),
    )
    if isinstance(summary, int):
        return summary
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
