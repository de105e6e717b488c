"""The clean-close record: what lets an open after a clean close skip the CommitLog scan.

See docs/store.md §1.7.

RocketMQ tells a clean shutdown from a crash by the ``abort`` file alone, and after a
clean one still re-reads and CRC-checks the last three segments (``recoverNormally``):
open time grows with the store. Here a clean :meth:`~mqstore._lifecycle.StoreLifecycle.close`
also writes ``clean_close`` (the store root), and the next open trusts it instead of
scanning when everything it describes is as it was:

* the CommitLog's end offset (where the next record goes);
* every segment file's name, size, inode and modification time (``st_mtime_ns``): a
  file written, truncated, extended, replaced or deleted since differs;
* the CRC-32 of the log's last :data:`TAIL_BYTES` before the end and of the
  :data:`ZERO_BYTES` after it (which must be zeros): a flipped byte there is seen even
  when the modification time is not (the clock the kernel stamps files with ticks every
  few milliseconds);
* the checkpoint file's inode and size and its three timestamps (a deleted or
  rewritten checkpoint differs; its modification time is not compared, as opening it
  allocates its page again).

It is one small JSON file, written after everything else is synced (a temporary file,
``fdatasync``, ``rename``, directory ``fsync``), before ``abort`` is removed, and taken
(read and unlinked) at the next open before ``abort`` is written again, so a crash at
any point leaves either ``abort`` (abnormal recovery) or no record (the RocketMQ scan):
never a record of a store that was written after it.

What the record does not cover (bytes of the log older than the tail, changed without
their file's modification time changing) is what the scan would only partly have
covered anyway (three segments): :func:`verify` reads the same range with CRC checks,
in the background after a trusted open (``StoreConfig.verify_clean_open``) or when
called (``MessageStore.verify``); ``mqstore audit`` and ``check_crc_on_read`` still see
the rest.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mqstore import _platform
from mqstore.checkpoint import Checkpoint
from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt
from mqstore.commitlog.segments import Segments

log = logging.getLogger(__name__)

RECORD_FILE = "clean_close"
VERSION = 1
TAIL_BYTES = 1 << 20
"""Bytes of the log before its end whose CRC the record holds."""
ZERO_BYTES = 4096
"""Bytes after the end that must read as zeros (a segment is zeroed past its end)."""
VERIFY_SEGMENTS = 3
"""Segments :func:`verify` reads from the end: those RocketMQ's normal recovery scans."""


@dataclass(frozen=True, slots=True)
class FileStamp:
    """One file as the clean close left it."""

    name: str
    size: int
    inode: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileStamp:
        st = os.stat(path)
        return cls(path.name, st.st_size, st.st_ino, st.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class CleanClose:
    """The record: the log's end, its files, the tail's CRC and the checkpoint."""

    end_offset: int
    segments: tuple[FileStamp, ...]
    tail_crc: int
    checkpoint: FileStamp
    checkpoint_fields: tuple[int, int, int]

    def to_json(self) -> str:
        def stamp(s: FileStamp) -> list[Any]:
            return [s.name, s.size, s.inode, s.mtime_ns]

        return json.dumps(
            {
                "version": VERSION,
                "end_offset": self.end_offset,
                "segments": [stamp(s) for s in self.segments],
                "tail_crc": self.tail_crc,
                "checkpoint": stamp(self.checkpoint),
                "checkpoint_fields": list(self.checkpoint_fields),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> CleanClose | None:
        """The record in ``text``; None when it is not one this version wrote."""
        try:
            d = json.loads(text)
            if d.get("version") != VERSION:
                return None
            segs = tuple(FileStamp(str(a), int(b), int(c), int(e)) for a, b, c, e in d["segments"])
            n, size, ino, mt = d["checkpoint"]
            physic, logics, index = d["checkpoint_fields"]
            return cls(
                int(d["end_offset"]),
                segs,
                int(d["tail_crc"]),
                FileStamp(str(n), int(size), int(ino), int(mt)),
                (int(physic), int(logics), int(index)),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


_CHECKPOINT_FIELDS = struct.Struct(">qqq")


def _checkpoint_fields(cp: Checkpoint) -> tuple[int, int, int]:
    return (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp)


def _checkpoint_file_fields(path: Path) -> tuple[int, int, int]:
    """The three timestamps as the checkpoint file holds them (what the next open
    loads; the object's attributes may be newer than its last flush)."""
    with open(path, "rb") as f:
        head = f.read(_CHECKPOINT_FIELDS.size)
    if len(head) < _CHECKPOINT_FIELDS.size:
        return (0, 0, 0)
    physic, logics, index = _CHECKPOINT_FIELDS.unpack(head)
    return (physic, logics, index)


def tail_crc(directory: Path, names: list[str], file_size: int, end: int) -> int:
    """CRC-32 of the log's bytes ``[end - TAIL_BYTES, end + ZERO_BYTES)`` that lie in
    the segment holding ``end`` (the one before when ``end`` starts a segment), read
    with ``pread``; 0 for no segment."""
    if not names:
        return 0
    base = (end - 1) // file_size * file_size if end else 0
    name = f"{base:020d}"
    if name not in names:
        return 0
    rel = end - base
    start = max(0, rel - TAIL_BYTES)
    stop = min(file_size, rel + ZERO_BYTES)
    fd = os.open(directory / name, os.O_RDONLY)
    try:
        data = os.pread(fd, stop - start, start)
    finally:
        os.close(fd)
    return zlib.crc32(data)


def _segment_names(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if len(n) == 20 and n.isdigit())


def write(root: Path, directory: Path, file_size: int, end: int, checkpoint: Checkpoint) -> None:
    """Record a clean close of the store at ``root`` whose log (in ``directory``) ends
    at ``end``; ``checkpoint`` is the store's, closed. Call after the segments
    and the checkpoint are synced and closed, before ``abort`` is removed.

    Raises:
        OSError: the record could not be made durable (the close is then not clean).
    """
    names = _segment_names(directory)
    record = CleanClose(
        end,
        tuple(FileStamp.of(directory / n) for n in names),
        tail_crc(directory, names, file_size, end),
        FileStamp.of(checkpoint.path),
        _checkpoint_file_fields(checkpoint.path),
    )
    tmp = root / (RECORD_FILE + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, record.to_json().encode())
        _platform.fdatasync(fd, what=str(tmp))
    finally:
        os.close(fd)
    os.replace(tmp, root / RECORD_FILE)
    _platform.fsync_dir(root)


def take(root: Path) -> CleanClose | None:
    """Read and remove the record (its removal is made durable with the ``abort``
    file that the open writes next); None when there is none or it is unreadable."""
    path = root / RECORD_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        text = ""
    path.unlink(missing_ok=True)
    (root / (RECORD_FILE + ".tmp")).unlink(missing_ok=True)
    return CleanClose.from_json(text)


def discard(root: Path) -> None:
    """Remove a record that must not be trusted any more (the open took none)."""
    (root / RECORD_FILE).unlink(missing_ok=True)


def mismatch(record: CleanClose, segments: Segments, checkpoint: Checkpoint) -> str | None:
    """Why ``record`` does not describe the loaded ``segments`` and ``checkpoint``
    (None: it does, the log ends at ``record.end_offset``)."""
    directory = segments.directory
    names = [mf.path.name for mf in segments.files]
    if segments.patched:
        return "a segment was extended at load"
    if names != [s.name for s in record.segments]:
        return "the segment files differ"
    for s in record.segments:
        if FileStamp.of(directory / s.name) != s:
            return f"segment {s.name} changed since the clean close"
    cp = FileStamp.of(checkpoint.path)
    if (cp.inode, cp.size) != (record.checkpoint.inode, record.checkpoint.size):
        return "the checkpoint file was replaced since the clean close"
    if _checkpoint_fields(checkpoint) != record.checkpoint_fields:
        return "the checkpoint's timestamps differ"
    end = record.end_offset
    if names and end < segments.files[-1].file_from_offset:
        return "the end is before the last segment"
    if names and end > segments.files[-1].file_from_offset + segments.file_size:
        return "the end is past the last segment"
    if tail_crc(directory, names, segments.file_size, end) != record.tail_crc:
        return "the log's last bytes differ"
    return None


@dataclass(frozen=True, slots=True)
class Verification:
    """What :func:`verify` found: ``problem`` is None when every record checked out."""

    start_offset: int
    end_offset: int
    records: int
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def verify(
    segments: Segments,
    end: int,
    *,
    whole: bool = False,
    fenced: Sequence[tuple[int, int]] = (),
    stopped: Callable[[], bool] = lambda: False,
) -> Verification:
    """Check, read-only, every record of the log up to ``end`` (the last
    :data:`VERIFY_SEGMENTS` segments, or all with ``whole``): lengths, structure,
    BODYCRC and PHYSICALOFFSET, as recovery's scan does; the log must hold valid
    records (and blank records closing full segments) exactly up to ``end``, apart from
    the ``fenced`` ranges (``[start, end)`` log offsets an open fenced as damaged),
    which are stepped over. Appends past ``end`` may go on meanwhile; ``stopped`` ends
    the check early (the store is closing): the result then covers what was read.
    """
    files = [mf for mf in list(segments.files) if mf.file_from_offset < end]
    if not files:
        return Verification(end, end, 0, None)
    i = 0 if whole else max(0, len(files) - VERIFY_SEGMENTS)
    start = files[i].file_from_offset
    records = 0
    pos = 0
    while i < len(files):
        mf = files[i]
        base, size, view = mf.file_from_offset, mf.file_size, mf.view
        limit = min(size, end - base)
        at = base + pos
        if stopped():
            return Verification(start, at, records, None)
        hop = next((b for a, b in fenced if a <= at < b), None)
        if hop is not None:  # a fenced range: go on after it, in whichever segment
            while i < len(files) and files[i].file_from_offset + files[i].file_size <= hop:
                i += 1
            pos = hop - files[i].file_from_offset if i < len(files) else 0
            continue
        if pos >= limit:
            i, pos = i + 1, 0
            continue
        found = bulk.scan_plain(view, pos, limit, size, check_crc=True)
        recs = found.records
        unfit = ~recs.crc_ok | recs.torn | (recs.physical_offset != base + recs.position)
        k = int(np.argmax(unfit)) if len(recs) and unfit.any() else len(recs)
        records += k
        if k < len(recs):
            pos = int(recs.position[k])
        elif isinstance(found.stop, fmt.EndOfSegment) and base + size <= end:
            i, pos = i + 1, 0
            continue
        elif found.stop is None and found.end > pos:
            pos = found.end
            continue
        else:
            pos = found.end
        at = base + pos
        if any(a <= at < b for a, b in fenced):
            continue
        if pos >= limit:
            i, pos = i + 1, 0
            continue
        why = f"bad record at {at}" if k < len(recs) else f"the records stop at {at}"
        if found.stop is not None and k == len(recs):
            why = f"{found.stop} at {at}"
        return Verification(start, at, records, why)
    return Verification(start, end, records, None)


__all__ = [
    "RECORD_FILE",
    "CleanClose",
    "FileStamp",
    "Verification",
    "discard",
    "mismatch",
    "take",
    "verify",
    "write",
]
