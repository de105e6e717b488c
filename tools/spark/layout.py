"""Finding the files of a store directory: CommitLog segments, ConsumeQueue files, checkpoint.

Accepted inputs, in this order:

* a store root holding ``commitlog/`` (ours, or a broker's ``storePathRootDir``);
* a directory holding one ``*/commitlog/`` (RocketMQ unit tests write
  ``unit_test_store/commitlog`` under the root that holds ``checkpoint``);
* a directory of segment files itself (20-digit names).

Everything here runs on the driver and only lists directories and stats files.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mqstore import geometry as geo
from mqstore.consumequeue import format as cqfmt
from mqstore.errors import GeometryError

NAME_DIGITS = 20


class LayoutError(OSError):
    """The directory is not a store: no CommitLog segments where one was expected."""


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One CommitLog segment: its path, base (start) offset from its name, and length."""

    path: str
    base_offset: int
    length: int

    @property
    def name(self) -> str:
        """The 20-digit file name."""
        return Path(self.path).name


@dataclass(frozen=True, slots=True)
class CqFile:
    """One ConsumeQueue file of ``topic``/``queue_id``; ``base_unit`` = name // 20."""

    path: str
    rel_path: str
    topic: str
    queue_id: int
    base_unit: int
    length: int


@dataclass(frozen=True, slots=True)
class StoreLayout:
    """What a store directory holds; ``root`` is the directory given, file names in
    reports are relative to it."""

    root: Path
    commitlog_dir: Path
    segments: tuple[SegmentFile, ...]
    segment_size: int
    cq_files: tuple[CqFile, ...]
    cq_queues: frozenset[tuple[str, int]]
    checkpoint: Path | None
    index_dir: Path | None
    geometry: geo.StoreGeometry | None = None
    geometry_note: str = ""

    @property
    def cq_file_size(self) -> int:
        """Bytes of one of the store's consume-queue files (:mod:`mqstore.geometry`)."""
        if self.geometry is None:
            return cqfmt.FILE_SIZE
        return -(-self.geometry.mapped_file_size_consume_queue.value // 20) * 20

    def index_geometry(self) -> tuple[int, int] | None:
        """(slots, entries) per index file when something showed or gave them; None
        when only RocketMQ's defaults are known (the index checker then infers)."""
        g = self.geometry
        if g is None or g.max_hash_slot_num.source is geo.Source.DEFAULT:
            return None
        return g.max_hash_slot_num.value, g.max_index_num.value

    @property
    def min_offset(self) -> int:
        """Physical offset of the first byte still on disk."""
        return self.segments[0].base_offset if self.segments else 0

    @property
    def total_bytes(self) -> int:
        """Sum of the segment file lengths."""
        return sum(s.length for s in self.segments)

    def data_bytes(self) -> int:
        """Bytes the segments occupy on disk (:func:`allocated_bytes`)."""
        return allocated_bytes(self.segments)


def allocated_bytes(segments: Iterable[SegmentFile]) -> int:
    """Bytes ``segments`` occupy on disk (allocated blocks: a file's holes, such as the
    unwritten tail of a preallocated segment, do not count), at most their lengths; a
    file whose block count is unknown counts its length."""
    total = 0
    for seg in segments:
        try:
            blocks = getattr(os.stat(seg.path), "st_blocks", None)
        except OSError:
            blocks = None
        total += seg.length if blocks is None else min(seg.length, blocks * 512)
    return total


def input_bytes(store_dir: str | Path) -> int | None:
    """:func:`allocated_bytes` of the segments of ``store_dir``; None when it holds none
    or they cannot be listed (the job reports that itself)."""
    try:
        return allocated_bytes(list_segments(find_commitlog_dir(Path(store_dir))))
    except OSError:
        return None


def _is_segment_name(name: str) -> bool:
    return len(name) == NAME_DIGITS and name.isdigit()


def _has_segments(d: Path) -> bool:
    return d.is_dir() and any(_is_segment_name(p.name) and p.is_file() for p in d.iterdir())


def find_commitlog_dir(store_dir: Path) -> Path:
    """The directory holding the segment files for ``store_dir`` (see module doc).

    Raises:
        LayoutError: no segment files in any accepted place.
    """
    if not store_dir.is_dir():
        raise LayoutError(f"{store_dir}: not a directory")
    direct = store_dir / "commitlog"
    if direct.is_dir():
        return direct
    nested = sorted(p for p in store_dir.glob("*/commitlog") if _has_segments(p))
    if len(nested) == 1:
        return nested[0]
    if len(nested) > 1:
        raise LayoutError(f"{store_dir}: several commitlog dirs: {[str(p) for p in nested]}")
    if _has_segments(store_dir):
        return store_dir
    raise LayoutError(f"{store_dir}: no commitlog/ and no 20-digit segment files")


def list_segments(commitlog_dir: Path) -> list[SegmentFile]:
    """Segment files sorted by base offset (other names are ignored)."""
    out = [
        SegmentFile(str(p), int(p.name), p.stat().st_size)
        for p in commitlog_dir.iterdir()
        if _is_segment_name(p.name) and p.is_file()
    ]
    return sorted(out, key=lambda s: s.base_offset)


def infer_segment_size(segments: list[SegmentFile]) -> int:
    """The configured segment size: the distance between the first two names, else the
    length of the only file (RocketMQ names files by start offset, all the same size)."""
    if len(segments) >= 2:
        return segments[1].base_offset - segments[0].base_offset
    return segments[0].length if segments else 0


def list_cq_files(root: Path) -> tuple[list[CqFile], set[tuple[str, int]]]:
    """ConsumeQueue files under ``root/consumequeue`` and the (topic, queue) dirs present."""
    cq_root = root / "consumequeue"
    files: list[CqFile] = []
    queues: set[tuple[str, int]] = set()
    if not cq_root.is_dir():
        return files, queues
    for topic_dir in sorted(p for p in cq_root.iterdir() if p.is_dir()):
        for qdir in sorted(p for p in topic_dir.iterdir() if p.is_dir()):
            if not qdir.name.isdigit():
                continue
            queue_id = int(qdir.name)
            queues.add((topic_dir.name, queue_id))
            for f in sorted(qdir.iterdir()):
                if not (_is_segment_name(f.name) and f.is_file()):
                    continue
                files.append(
                    CqFile(
                        path=str(f),
                        rel_path=f.relative_to(root).as_posix(),
                        topic=topic_dir.name,
                        queue_id=queue_id,
                        base_unit=int(f.name) // cqfmt.UNIT_SIZE,
                        length=f.stat().st_size,
                    )
                )
    return files, queues


def discover(
    store_dir: str | Path,
    *,
    flags: dict[str, int | None] | None = None,
    broker_config: str | Path | None = None,
) -> StoreLayout:
    """Everything the jobs need to know about a store directory, its geometry included
    (files, else ``broker_config``, else ``flags``: :func:`store_geometry`).

    Raises:
        LayoutError: not a store (see :func:`find_commitlog_dir`) or no segments.
        GeometryError: the broker config or flags contradict the files or each other.
    """
    store_dir = Path(store_dir).resolve()
    cl_dir = find_commitlog_dir(store_dir)
    segments = list_segments(cl_dir)
    if not segments:
        raise LayoutError(f"{cl_dir}: no segment files")
    candidates = [store_dir, cl_dir.parent]
    checkpoint = next((c / "checkpoint" for c in candidates if (c / "checkpoint").is_file()), None)
    index_dir = next((c / "index" for c in candidates if (c / "index").is_dir()), None)
    cq_root = next((c for c in candidates if (c / "consumequeue").is_dir()), store_dir)
    cq_files, cq_queues = list_cq_files(cq_root)
    geometry, note = store_geometry(cq_root, cl_dir, flags, broker_config)
    return StoreLayout(
        root=store_dir,
        commitlog_dir=cl_dir,
        segments=tuple(segments),
        segment_size=infer_segment_size(segments),
        cq_files=tuple(cq_files),
        cq_queues=frozenset(cq_queues),
        checkpoint=checkpoint,
        index_dir=index_dir,
        geometry=geometry,
        geometry_note=note,
    )


def store_geometry(
    root: Path,
    commitlog_dir: Path,
    flags: dict[str, int | None] | None,
    broker_config: str | Path | None,
) -> tuple[geo.StoreGeometry, str]:
    """(geometry, note): from the files when they agree with each other and with the
    config and flags; when the files contradict each other (a truncated file, say),
    from the config and flags alone, and the note says why, so the checks can report
    the odd files instead of refusing the store.

    Raises:
        GeometryError: the config or flags contradict consistent files or each other.
    """
    try:
        geo.detect(root, commitlog_dir)
    except GeometryError as e:  # odd files: the checks report them
        return _without_files(root, flags, broker_config), f"files left out: {e}"
    try:
        found = geo.resolve(
            root, flags=flags, broker_config=broker_config, commitlog_dir=commitlog_dir
        )
    except GeometryError as e:
        if "give max_hash_slot_num" not in str(e):
            raise
        return _without_files(root, flags, broker_config), str(e)
    return found, ""


def _without_files(
    root: Path, flags: dict[str, int | None] | None, broker_config: str | Path | None
) -> geo.StoreGeometry:
    return geo.resolve(root, flags=flags, broker_config=broker_config, from_files=False)


def add_geometry_args(p: argparse.ArgumentParser) -> None:
    """Flags for the store's sizes where its files do not show them (mqstore.geometry)."""
    p.add_argument("--index-slots", type=int, default=None, help="hash slots per index file")
    p.add_argument("--index-num", type=int, default=None, help="entries per index file")
    p.add_argument("--cq-file-size", type=int, default=None, help="consume-queue file bytes")
    p.add_argument("--file-size", type=int, default=None, help="CommitLog segment bytes")
    p.add_argument("--broker-config", default=None, metavar="broker.conf")


def geometry_flags(args: argparse.Namespace) -> dict[str, int | None]:
    """The geometry flags of ``args`` by StoreConfig field."""
    return {
        "commitlog_file_size": args.file_size,
        "mapped_file_size_consume_queue": args.cq_file_size,
        "max_hash_slot_num": args.index_slots,
        "max_index_num": args.index_num,
    }
