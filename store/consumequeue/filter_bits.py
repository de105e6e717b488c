"""SQL92 verdicts computed once at dispatch: the filter-bits side file of a consume queue.

A SQL92 subscription registered for a topic (:meth:`FilterBits.register`: the broker does
it from heartbeats, an embedded consumer when it subscribes) gets a *slot* of that topic,
0 to :data:`MAX_SLOTS` - 1. From then on, dispatching a message of the topic evaluates
every registered expression of the topic on the message's properties once and writes the
verdicts next to the consume-queue unit; a filtered read of the queue then tests one bit
per unit with numpy instead of reading and evaluating the message. Units dispatched
before the expression was registered have no verdict for it and are read the old way.
Topics without a registered expression pay one dictionary lookup per record at dispatch.

On disk (``{store}/filterbits/``, mqstore's own layout; RocketMQ's ``ConsumeQueueExt`` is
not written, see docs/sql92.md §5):

* ``slots.json``: ``{"version": 1, "topics": {topic: [expression, ...]}}``, slot ``i`` the
  ``i``-th expression. Replaced whole (temporary file, fsync, rename) before any verdict of
  a new slot is written; a slot is never reassigned. A file that cannot be read drops every
  verdict file (the units are then read the old way), so a verdict is only ever read under
  the expression it was computed for.
* ``{topic}/{queueId}/{first queue offset, 20 digits}``: :data:`SEGMENT_UNITS` entries of
  8 bytes, entry ``q - first`` for queue offset ``q``: the low 32 bits of the unit's
  physical offset (``<u4``), the slots evaluated (``<u2``) and the slots whose expression
  was TRUE (``<u2``), little-endian. Created sparse at full size, so a read-only mapping
  of it never outgrows it. A unit whose physical offset ends in 32 zero bits gets no
  verdict (a blank unit's is 0).

A verdict is used only when its entry names the unit's physical offset and its slot's
evaluated bit is set, so a missing, short, zeroed (torn) or stale entry is "no verdict",
never a wrong answer. The entry is written before the consume-queue unit, so a reader
that sees a unit normally sees its verdict too. After a crash the entries beyond each
queue's recovered end are cut (:meth:`FilterBits.cut`), so a verdict left by a message the
recovery dropped cannot stand for the one later written at the same place.

Each slot's TRUE units are also listed per queue (:class:`MatchLists`, written with the
verdicts), so a read can go from match to match (``mqstore.consumequeue.match_list``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import mmap
import os
import shutil
import struct
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from mqstore import _platform
from mqstore.consumequeue.filter import SQL92, Subscription, parse_subscription
from mqstore.consumequeue.format import UNIT_SIZE
from mqstore.consumequeue.match_list import MatchLists, MatchReader, cut_queue
from mqstore.sql92 import SqlParseError

log = logging.getLogger(__name__)

ENTRY: Final = np.dtype([("check", "<u4"), ("seen", "<u2"), ("hit", "<u2")])
"""One unit's entry: physical offset's low 32 bits, slots evaluated, slots TRUE."""
ENTRY_SIZE: Final = ENTRY.itemsize
MAX_SLOTS: Final = 16
"""Expressions per topic that get verdicts (more are read the old way)."""
SEGMENT_UNITS: Final = 1 << 18
"""Entries per file (2 MiB)."""
SLOTS_FILE: Final = "slots.json"
VERSION: Final = 1

Verdicts = tuple[NDArray[np.bool_], NDArray[np.bool_]]
"""(has a verdict, verdict TRUE) per unit of a range."""
VerdictReader = Callable[[int, NDArray[np.uint32]], Verdicts | None]
"""Given the first queue offset of a range and the low 32 bits of its units' physical
offsets (:func:`phys_low32`), their verdicts for one expression (None: none of them has
one)."""
PropertiesAt = Callable[[int, int], str | None]
"""The serialized properties of the record at (physical offset, size), or None."""


class FilterBits:
    """The registered SQL92 expressions of each topic and their per-unit verdicts.

    Thread-safe: registration, dispatch (one thread) and reads (any thread) may overlap.

    Args:
        directory: ``{store}/filterbits``.
        properties_at: reads a dispatched record's properties (the batch dispatch, which
            has no decoded properties, asks it).
        min_offset: the first queue offset a queue still holds; verdict files wholly
            below it are deleted when a queue starts a new one.
    """

    def __init__(
        self,
        directory: Path,
        properties_at: PropertiesAt,
        min_offset: Callable[[str, int], int],
    ) -> None:
        self.directory = directory
        self._properties_at = properties_at
        self._min_offset = min_offset
        self._lock = threading.Lock()
        """Guards registration and the file descriptors (a read never meets a closed
        or reused descriptor)."""
        self._maps: dict[tuple[str, int, int], mmap.mmap] = {}
        """(topic, queue id, first offset) -> read-only mapping of a full-size file."""
        self._fds: dict[tuple[str, int, int, bool], int] = {}
        """(topic, queue id, first offset, writable) -> open descriptor."""
        self.lists = MatchLists(directory, SEGMENT_UNITS)
        """Each slot's match list (``mqstore.consumequeue.match_list``), written with
        the verdicts."""
        self.topics: Mapping[str, tuple[Subscription, ...]] = self._load()
        """Topic -> its registered expressions, slot order; replaced whole on change,
        so the dispatcher reads it without the lock."""

    # ----------------------------------------------------------------- slots

    def _load(self) -> dict[str, tuple[Subscription, ...]]:
        path = self.directory / SLOTS_FILE
        try:
            doc = json.loads(path.read_bytes())
            if doc.get("version") != VERSION:
                raise ValueError(f"version {doc.get('version')!r}")
            return {
                str(topic): tuple(parse_subscription(str(e), SQL92) for e in exprs[:MAX_SLOTS])
                for topic, exprs in doc["topics"].items()
            }
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError, SqlParseError) as e:
            log.warning("%s unreadable (%s): SQL92 verdicts dropped", path, e)
        self._drop_files()
        return {}

    def _drop_files(self) -> None:
        """Delete every verdict file (and the slots file): no verdict without its slot."""
        if self.directory.exists():
            shutil.rmtree(self.directory, ignore_errors=True)

    def register(self, topic: str, expression: str) -> int | None:
        """Give ``expression`` a slot of ``topic`` (its existing one if it has one):
        messages of the topic dispatched from now on carry its verdict. Returns the
        slot, or None when the topic's :data:`MAX_SLOTS` are taken.

        Raises:
            SqlParseError: the expression does not compile.
            OSError: the slots file could not be written (nothing changed).
        """
        sub = parse_subscription(expression, SQL92)
        with self._lock:
            current = self.topics.get(topic, ())
            for i, s in enumerate(current):
                if s.expression == sub.expression:
                    return i
            if len(current) >= MAX_SLOTS:
                return None
            topics = {**self.topics, topic: (*current, sub)}
            self._save(topics)  # durable before any verdict of the slot is written
            self.topics = topics
            return len(current)

    def _save(self, topics: Mapping[str, tuple[Subscription, ...]]) -> None:
        doc = {"version": VERSION, "topics": {t: [s.expression for s in subs]
                                              for t, subs in topics.items()}}  # fmt: skip
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / SLOTS_FILE
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, json.dumps(doc).encode())
            _platform.fdatasync(fd, what=str(tmp))
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _platform.fsync_dir(self.directory)

    def slot_of(self, topic: str, sub: Subscription) -> int | None:
        """The slot of ``sub``'s SQL92 expression in ``topic``, or None."""
        if sub.sql is None:
            return None
        for i, s in enumerate(self.topics.get(topic, ())):
            if s.expression == sub.expression:
                return i
        return None

    # --------------------------------------------------------------- dispatch

    def record(self, topic: str, queue_id: int, queue_offset: int, phys: int, props: str) -> None:
        """Write the verdicts of one dispatched message (a topic with slots).

        Raises:
            OSError: the verdict file could not be written.
        """
        subs = self.topics.get(topic)
        if subs:
            hit = _hits(subs, phys, props)
            self._write(topic, queue_id, queue_offset, _pack_entry(subs, phys, hit))
            self.lists.note(topic, queue_id, queue_offset, phys, len(subs), hit)
            self.lists.flush()

    def record_rows(
        self,
        topics: tuple[str, ...],
        topic_id: NDArray[np.int64],
        queue_id: NDArray[np.int64],
        queue_offset: NDArray[np.int64],
        physical_offset: NDArray[np.int64],
        size: NDArray[np.int64],
        rows: NDArray[np.int64],
    ) -> None:
        """Write the verdicts of the records ``rows`` of a dispatched batch (one array
        element per record), those of topics with slots; runs of consecutive queue
        offsets go in one write.

        Raises:
            OSError: a verdict file could not be written.
        """
        by_topic = [self.topics.get(t) for t in topics]
        if not any(by_topic):
            return
        wanted = np.array([bool(s) for s in by_topic])[topic_id[rows]]
        rows = rows[wanted]
        order = np.lexsort((queue_offset[rows], queue_id[rows], topic_id[rows]))
        rows = rows[order]
        run: list[bytes] = []
        key: tuple[int, int] | None = None
        start = prev = 0
        for i in rows.tolist():
            tid, qid, qoff = int(topic_id[i]), int(queue_id[i]), int(queue_offset[i])
            if (tid, qid) != key or qoff != prev + 1:
                if key is not None:
                    self._write(topics[key[0]], key[1], start, b"".join(run))
                key, start, run = (tid, qid), qoff, []
            prev = qoff
            phys = int(physical_offset[i])
            subs = by_topic[tid]
            assert subs is not None
            props = self._properties_at(phys, int(size[i]))
            hit = _hits(subs, phys, props) if props is not None else -1
            run.append(_pack_entry(subs, phys, hit))
            self.lists.note(topics[tid], qid, qoff, phys, len(subs), hit)
        if key is not None:
            self._write(topics[key[0]], key[1], start, b"".join(run))
        self.lists.flush()

    def _write(self, topic: str, queue_id: int, queue_offset: int, data: bytes) -> None:
        while data:
            base = queue_offset - queue_offset % SEGMENT_UNITS
            room = (base + SEGMENT_UNITS - queue_offset) * ENTRY_SIZE
            part, data = data[:room], data[room:]
            with self._lock:
                fd = self._fd(topic, queue_id, base, create=True)
                assert fd is not None
                os.pwrite(fd, part, (queue_offset - base) * ENTRY_SIZE)
            queue_offset += len(part) // ENTRY_SIZE

    def _fd(self, topic: str, queue_id: int, base: int, *, create: bool) -> int | None:
        """The cached descriptor of a verdict file (under the lock): a writable one with
        ``create`` (the file created if needed), else any (None: no such file)."""
        writable = self._fds.get((topic, queue_id, base, True))
        if writable is not None:
            return writable
        key = (topic, queue_id, base, create)
        fd = self._fds.get(key)
        if fd is not None:
            return fd
        folder = self.directory / topic / str(queue_id)
        path = folder / f"{base:020d}"
        if not create:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                return None
            self._fds[key] = fd
            return fd
        fresh = not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        if fresh:
            _platform.fsync_dir(folder.parent)
        else:
            self._trim_expired(topic, queue_id, folder)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(fd).st_size < _segment_bytes():  # full size (sparse) before any mapping
            os.ftruncate(fd, _segment_bytes())
        self._fds[key] = fd
        return fd

    def _trim_expired(self, topic: str, queue_id: int, folder: Path) -> None:
        """Delete the queue's verdict files wholly below its first readable offset."""
        low = self._min_offset(topic, queue_id)
        for f in folder.iterdir():
            if f.name.isdigit() and int(f.name) + SEGMENT_UNITS <= low:
                self._drop_map((topic, queue_id, int(f.name)))
                for writable in (False, True):
                    fd = self._fds.pop((topic, queue_id, int(f.name), writable), None)
                    if fd is not None:
                        os.close(fd)
                f.unlink(missing_ok=True)
                self.lists.forget(topic, queue_id, int(f.name))

    def _drop_map(self, key: tuple[str, int, int]) -> None:
        """Forget a mapping; a read holding a view of it keeps it alive until done."""
        mm = self._maps.pop(key, None)
        if mm is not None:
            with contextlib.suppress(BufferError):
                mm.close()

    # ------------------------------------------------------------------ read

    def reader(self, topic: str, queue_id: int, sub: Subscription) -> VerdictReader | None:
        """The verdict reader of ``sub`` on (topic, queue_id), or None when the
        expression has no slot (every unit is then read the old way)."""
        slot = self.slot_of(topic, sub)
        if slot is None:
            return None
        mask = np.uint64((1 << (32 + slot)) | (1 << (48 + slot)))  # evaluated, TRUE

        def verdicts(q0: int, low: NDArray[np.uint32]) -> Verdicts | None:
            w = self._entries(topic, queue_id, q0, len(low))
            if w is None:
                return None
            # contiguous native arrays throughout: numpy's strided paths cost 10x more
            same = w.astype(np.uint32) == low.astype(np.uint32)
            flags = w & mask
            return (flags != 0) & same, (flags == mask) & same

        return verdicts

    def match_reader(self, topic: str, queue_id: int, sub: Subscription) -> MatchReader | None:
        """The match-list reader of ``sub`` on (topic, queue_id)
        (``mqstore.consumequeue.match_list``), or None when the expression has no slot."""
        slot = self.slot_of(topic, sub)
        return None if slot is None else self.lists.reader(topic, queue_id, slot)

    def _entries(self, topic: str, queue_id: int, q0: int, n: int) -> NDArray[np.uint64] | None:
        """The entries of queue offsets ``[q0, q0 + n)`` as little-endian words (check in
        the low 32 bits, evaluated slots in bits 32-47, TRUE slots in bits 48-63), zero
        where there is none; None when there is none at all."""
        parts: list[NDArray[np.uint64]] = []
        got = False
        q, end = q0, q0 + n
        while q < end:
            base = q - q % SEGMENT_UNITS
            count = min(end, base + SEGMENT_UNITS) - q
            mm = self._map(topic, queue_id, base)
            if mm is not None:  # a whole file: a view of its mapping
                parts.append(np.frombuffer(mm, "<u8", count, (q - base) * ENTRY_SIZE))
                got = True
            else:
                with self._lock:
                    fd = self._fd(topic, queue_id, base, create=False)
                    data = os.pread(fd, count * ENTRY_SIZE, (q - base) * ENTRY_SIZE) if fd else b""
                got = got or bool(data)
                parts.append(np.frombuffer(data.ljust(count * ENTRY_SIZE, b"\0"), "<u8"))
            q += count
        if not got:
            return None
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _map(self, topic: str, queue_id: int, base: int) -> mmap.mmap | None:
        """A read-only mapping of a verdict file that has its full size (every file is
        given it when first written, so a mapping never outgrows its file); None for a
        missing or shorter file (read with ``pread``)."""
        key = (topic, queue_id, base)
        mm = self._maps.get(key)
        if mm is not None:
            return mm
        with self._lock:
            fd = self._fd(topic, queue_id, base, create=False)
            if fd is None or os.fstat(fd).st_size < _segment_bytes():
                return None
            mm = self._maps[key] = mmap.mmap(fd, _segment_bytes(), access=mmap.ACCESS_READ)
        return mm

    # -------------------------------------------------------------- recovery

    def cut(self, max_offset: Callable[[str, int], int | None]) -> None:
        """Cut every queue's entries at its recovered end (``max_offset``; None: the
        queue is gone, so are its entries), durably: entries of units a recovery
        dropped must not stand for the units later written in their place.

        Raises:
            OSError: a verdict file could not be cut.
        """
        if not self.directory.is_dir():
            return
        with self._lock:
            self._close_all()
            for topic_dir in self.directory.iterdir():
                if not topic_dir.is_dir():
                    continue
                for queue_dir in topic_dir.iterdir():
                    if queue_dir.name.lstrip("-").isdigit():
                        end = max_offset(topic_dir.name, int(queue_dir.name))
                        _cut_queue(queue_dir, 0 if end is None else end)

    def close(self) -> None:
        """Close every verdict file and match list."""
        with self._lock:
            self._close_all()

    def _close_all(self) -> None:
        self.lists.close()
        for key in list(self._maps):
            self._drop_map(key)
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _segment_bytes() -> int:
    """A verdict file's size: created sparse at full size, entries written in place."""
    return SEGMENT_UNITS * ENTRY_SIZE


def phys_low32(units: memoryview | bytes, n: int) -> NDArray[np.uint32]:
    """The low 32 bits of the physical offsets of the first ``n`` consume-queue units of
    ``units``: a view (big-endian, strided), no copy."""
    return np.ndarray((n,), ">u4", buffer=units, offset=4, strides=(UNIT_SIZE,))


def _hits(subs: tuple[Subscription, ...], phys: int, props: str) -> int:
    """The slots TRUE for a message at ``phys`` with properties ``props`` as bits; -1
    when it gets no verdict (a blank unit's physical offset is 0: one whose low 32 bits
    are 0 gets none)."""
    if not phys & 0xFFFFFFFF:
        return -1
    hit = 0
    for i, s in enumerate(subs):
        if s.matches_properties(props):
            hit |= 1 << i
    return hit


def _pack_entry(subs: tuple[Subscription, ...], phys: int, hit: int) -> bytes:
    """The entry of a message at ``phys`` whose TRUE slots are ``hit`` (-1: none)."""
    if hit < 0:
        return _UNKNOWN
    return _PACK(phys & 0xFFFFFFFF, (1 << len(subs)) - 1, hit)


_PACK: Final = struct.Struct("<IHH").pack
"""An entry's bytes (:data:`ENTRY`)."""
_UNKNOWN: Final = bytes(ENTRY_SIZE)
"""The entry of a unit without verdicts (its record could not be read)."""


def _cut_queue(folder: Path, end: int) -> None:
    """Remove the entries of queue offsets ``end`` and above from one queue's files
    (match lists included)."""
    cut_queue(folder, end)
    for f in sorted(folder.iterdir()):
        if not f.name.isdigit():
            continue
        base = int(f.name)
        if base >= end:
            f.unlink()
            continue
        keep = (end - base) * ENTRY_SIZE
        if f.stat().st_size > keep:
            fd = os.open(f, os.O_RDWR)
            try:  # cut, then zeros (holes) to the full size again
                os.ftruncate(fd, keep)
                os.ftruncate(fd, max(keep, _segment_bytes()))
                _platform.fdatasync(fd, what=str(f))
            finally:
                os.close(fd)
    _platform.fsync_dir(folder)
