"""The consume queues' state at a clean close, in one file, so an open need not read
every queue.

A store with 100,000 queues needs, at open, only a few facts of each: the next queue
offset (the CommitLog's topic-queue table), where its units end in the CommitLog
(where the reput starts) and where its readable units begin (whether expiry or a
CommitLog cut concerns it). :func:`write` records them when the store closes cleanly;
:func:`take` reads them at the next open, so each queue's files are read when the
queue is first used instead of all at once.

The file is trusted only for the state it describes:

* it is removed durably as it is read (:func:`take`), before anything can change the
  queues, so it never outlives the run that follows the close that wrote it;
* it names the consume-queue file size, the identity (inode) of the consume-queue
  directory, so a directory swapped in by an offline tool (a reindex) invalidates it,
  and the CommitLog end at close, which the caller compares with the recovered end;
* a CRC covers its bytes; a file that fails any check is ignored (the queues are then
  read the usual way).

It is only written after a clean close (the queues flushed, dispatch complete); the
caller removes ``abort`` after it, so a crash in between leaves it unused.

Layout (little-endian): magic, version, file size, directory inode, CommitLog end,
topic count, queue count; each topic as a 2-byte length and UTF-8 name; each queue as
:data:`_ENTRY` (topic index, queue id, then the :class:`QueueSummary` fields); a CRC32
of everything before it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mqstore import _platform
from mqstore.consumequeue.format import UNIT_SIZE

log = logging.getLogger(__name__)

MAGIC = b"MQCQSUM\x00"
VERSION = 1
_HEADER = struct.Struct("<8sIqqqII")
_ENTRY = struct.Struct("<Iiqqqqq")
_TOPIC_LEN = struct.Struct("<H")
_CRC = struct.Struct("<I")


@dataclass(frozen=True, slots=True)
class QueueSummary:
    """One queue as a clean close left it (offsets in units, physical in bytes)."""

    max_offset: int
    """The queue offset the next unit gets."""
    min_offset: int
    """The first readable queue offset."""
    max_physic_offset: int
    """End (offset + size) of the last real unit's record, 0 without one."""
    first_file: int
    """Logical byte offset where the queue's first file starts."""
    min_physical: int
    """CommitLog offset of unit ``min_offset``; -1 when nothing is readable."""

    def concerned_by(self, log_start: int, file_size: int) -> bool:
        """Whether expiry at CommitLog offset ``log_start`` may change this queue: its
        first readable unit points below it, or a whole file lies before that unit (a
        file expiry may delete)."""
        if 0 <= self.min_physical < log_start:
            return True
        return self.first_file + file_size <= self.min_offset * UNIT_SIZE


@dataclass(frozen=True, slots=True)
class Summary:
    """What :func:`take` read: the CommitLog end at close and every queue's state."""

    log_end: int
    queues: dict[tuple[str, int], QueueSummary]


def path_for(directory: Path) -> Path:
    """Where the summary of the queues under ``directory`` lives: next to it (the
    directory's own tree holds queue files only)."""
    return directory.with_name(directory.name + ".summary")


def write(
    directory: Path,
    file_size: int,
    log_end: int,
    queues: Iterable[tuple[tuple[str, int], QueueSummary]],
) -> None:
    """Write the summary durably (temporary file, sync, rename, directory sync).

    Raises:
        OSError: writing failed (no summary is left behind).
    """
    target = path_for(directory)
    topics: dict[str, int] = {}
    body = bytearray()
    count = 0
    for (topic, qid), s in queues:
        t = topics.setdefault(topic, len(topics))
        body += _ENTRY.pack(
            t, qid, s.max_offset, s.min_offset, s.max_physic_offset, s.first_file, s.min_physical
        )
        count += 1
    names = bytearray()
    for topic in topics:
        raw = topic.encode()
        names += _TOPIC_LEN.pack(len(raw)) + raw
    inode = os.stat(directory).st_ino if directory.is_dir() else 0
    data = (
        _HEADER.pack(MAGIC, VERSION, file_size, inode, log_end, len(topics), count) + names + body
    )
    data += _CRC.pack(zlib.crc32(data))
    tmp = target.with_name(target.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            _platform.fdatasync(fd, what=str(tmp))
        finally:
            os.close(fd)
        os.replace(tmp, target)
        _platform.fsync_dir(target.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def take(directory: Path, file_size: int, *, use: bool) -> Summary | None:
    """Remove the summary of the queues under ``directory``, durably, and return it if
    ``use`` (the store was closed cleanly) and it describes these queues; None
    otherwise (no file, or one that fails a check: logged).

    Raises:
        OSError: the file exists but cannot be removed (its state could outlive the run).
    """
    target = path_for(directory)
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        return None
    target.unlink()
    _platform.fsync_dir(target.parent)
    if not use:
        return None
    try:
        return _parse(data, directory, file_size)
    except (ValueError, IndexError, struct.error) as e:
        log.warning("%s: not used (%s); every queue is read at open", target, e)
        return None


def _parse(data: bytes, directory: Path, file_size: int) -> Summary:
    if len(data) < _HEADER.size + _CRC.size:
        raise ValueError("too short")
    (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
    if zlib.crc32(memoryview(data)[: len(data) - _CRC.size]) != crc:
        raise ValueError("CRC mismatch")
    magic, version, size, inode, log_end, n_topics, count = _HEADER.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION:
        raise ValueError(f"unknown format {magic!r} v{version}")
    if size != file_size:
        raise ValueError(f"written for queue files of {size} bytes, not {file_size}")
    current = os.stat(directory).st_ino if directory.is_dir() else 0
    if inode != current:
        raise ValueError("the consume-queue directory was replaced since")
    pos = _HEADER.size
    topics = []
    for _ in range(n_topics):
        (n,) = _TOPIC_LEN.unpack_from(data, pos)
        pos += _TOPIC_LEN.size
        topics.append(data[pos : pos + n].decode())
        pos += n
    end = pos + count * _ENTRY.size
    if end != len(data) - _CRC.size:
        raise ValueError("length does not match its queue count")
    queues = {
        (topics[t], qid): QueueSummary(mx, mn, phys, first, min_phys)
        for t, qid, mx, mn, phys, first, min_phys in _ENTRY.iter_unpack(data[pos:end])
    }
    return Summary(log_end, queues)


__all__ = ["QueueSummary", "Summary", "path_for", "take", "write"]
