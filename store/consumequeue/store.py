"""All consume queues of a store: ``consumequeue/{topic}/{queueId}/``.

Loading, recovery, truncation, minimum-offset correction, expiry and flushing are
applied to every queue; :meth:`ConsumeQueueStore.put` is what the dispatcher calls per
message. RocketMQ ``ConsumeQueueStore`` (5.x) / the CQ parts of 4.9's
``DefaultMessageStore``.

Cost: proportional to what is used, not to the number of queues. The queues share
one :class:`MappingPool` (at most ``max_mapped_files`` files mapped; an idle queue
holds no mapping and no descriptor), :meth:`ConsumeQueueStore.flush` visits only the
queues written since their last complete flush, and :meth:`ConsumeQueueStore.close`
unmaps only what is mapped.

Open after a clean close reads one file, not every queue: :meth:`ConsumeQueueStore.save_summary`
records each queue's state at the close (``mqstore.consumequeue.summary``), and
:meth:`ConsumeQueueStore.load` takes it back, so a queue's files are read (loaded and
recovered) when it is first used: found, written, or concerned by a whole-store
operation (a CommitLog cut or expiry below its units). Whole-store questions (the
topic-queue table, the largest CommitLog offset a unit points at) are answered from
the summary for queues not read yet. After a crash, or without a usable summary,
every queue is read at open as before.

Thread-safety: queues are created under a lock; the table is read without one
(``dict`` lookups are atomic under the GIL). The dirty set is changed by the writer
(adds after writing) and the flusher (removes before flushing, adds back what is
left), each a single atomic set operation.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import threading
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mqstore import faults
from mqstore.consumequeue import summary
from mqstore.consumequeue.format import UNIT_SIZE
from mqstore.consumequeue.mappings import DEFAULT_CAPACITY, MappingPool
from mqstore.consumequeue.queue import ConsumeQueue, UnitCheck
from mqstore.consumequeue.summary import QueueSummary
from mqstore.message import TOPIC_PATTERN

log = logging.getLogger(__name__)

SYNCFS_FROM = 32
"""A complete flush of this many queues or more syncs their filesystem at once."""

SYNCFS_BACKLOG = 1024
"""A periodic flush that finds this many queues waiting syncs them all at once: queues
with a unit or two never reach ``least_pages`` and would otherwise all wait for the
complete flush (or the close), however many there are."""

_libc = ctypes.CDLL(None, use_errno=True)


def _syncfs_works() -> bool:
    return hasattr(_libc, "syncfs")


def syncfs(directory: Path) -> None:
    """``syncfs(2)``: write back and wait for every dirty page of the filesystem
    holding ``directory`` (Linux reports writeback errors of the filesystem since 5.8).

    Raises:
        OSError: the sync failed.
    """
    faults.point("before_fdatasync", what=f"syncfs {directory}")
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _libc.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(directory))
    finally:
        os.close(fd)


class ConsumeQueueStore:
    """The consume queues under one directory."""

    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        max_mapped_files: int = DEFAULT_CAPACITY,
        log_start: Callable[[], int] = lambda: 0,
    ) -> None:
        """``log_start()``: the CommitLog's first offset now (a queue read after open
        corrects its minimum against it)."""
        self.directory = directory
        self.file_size = file_size
        self.pool = MappingPool(max_mapped_files)
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._dirty: set[ConsumeQueue] = set()
        """Queues with units (or a cut) not yet flushed: what :meth:`flush` visits."""
        self._touched: set[ConsumeQueue] = set()
        """Queues written since the last periodic flush: the only ones that can have
        reached ``least_pages`` since (a queue below it stays below until written)."""
        self._lock = threading.Lock()
        self.logics_msg_timestamp = 0
        """Store time of the message of the last unit written (checkpoint field)."""
        self._dispatched: Callable[[], int] | None = None
        self._min_physical: Callable[[], int] = lambda: 0
        self._log_start = log_start
        self._closed: dict[tuple[str, int], QueueSummary] = {}
        """Queues not read since open, as the clean close's summary describes them."""
        self._log_end = -1
        """The CommitLog end the summary was written at (-1: no summary taken)."""

    # -------------------------------------------------------------- following

    def follow(self, dispatched: Callable[[], int], min_physical: Callable[[], int]) -> None:
        """Become a reader of queues another process writes (``dispatch_process``).

        From now on :meth:`find` and :meth:`all` catch each queue up with
        ``dispatched()`` (the child's published progress) before returning it, and
        discover queues the child created; :meth:`delete_expired` only lets go of
        files the child deleted. ``min_physical()`` is the CommitLog's first offset
        (a discovered queue's minimum is corrected against it).
        """
        self._dispatched = dispatched
        self._min_physical = min_physical
        # The child writes the queues: a queue is discovered on disk on first use.
        self._closed.clear()

    @property
    def following(self) -> bool:
        """True when another process writes these queues."""
        return self._dispatched is not None

    def _discover(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """Map a queue the child created since we last looked (None: not on disk)."""
        if queue_id < 0 or not TOPIC_PATTERN.fullmatch(topic):
            return None
        directory = self.directory / topic / str(queue_id)
        if not directory.is_dir():
            return None
        with self._lock:
            cq = self.queues.get((topic, queue_id))
            if cq is not None:
                return cq
            cq = ConsumeQueue(directory, topic, queue_id, self.file_size, self.pool)
            # The first file only: follow() finds where its units end and maps the
            # next files one by one (whether their units are dispatched yet).
            cq.segments.map_new_files(position=0, max_files=1)
            cq.min_logic_offset = cq.segments.min_offset
            self.queues[topic, queue_id] = cq
        return cq

    def _caught_up(self, cq: ConsumeQueue, dispatched: int) -> ConsumeQueue:
        if dispatched > cq.followed:  # progress only moves forward
            cq.follow(dispatched)
        # Skips pre-fill blanks and units below the CommitLog's start; recomputed
        # only when the start, the files held or (nothing readable) the units moved.
        cq.follow_min(self._min_physical())
        return cq

    # ----------------------------------------------------------------- loading

    def load(self, *, clean: bool = False) -> None:
        """Take the clean close's summary if ``clean`` (the store was closed cleanly)
        and it describes these queues: each queue is then read on first use. Else
        load every queue found on disk. The summary file is removed either way.

        Raises:
            SegmentLoadError: a queue file with a bad name or size.
            OSError: the summary file could not be removed.
        """
        taken = summary.take(self.directory, self.file_size, use=clean)
        if taken is not None:
            self._closed = taken.queues
            self._log_end = taken.log_end
            return
        self._load_all()

    def _load_all(self) -> None:
        if not self.directory.is_dir():
            return
        # scandir: whether an entry is a directory comes with the listing, no stat each.
        topics = sorted(e.name for e in os.scandir(self.directory) if e.is_dir())
        for topic in topics:
            if not TOPIC_PATTERN.fullmatch(topic):
                continue
            topic_dir = self.directory / topic
            qids = sorted(e.name for e in os.scandir(topic_dir) if e.is_dir())
            for qid in qids:
                if not qid.isdigit():
                    continue
                cq = ConsumeQueue(topic_dir / qid, topic, int(qid), self.file_size, self.pool)
                cq.load()
                self.queues[topic, int(qid)] = cq

    def recover(self, *, clean: bool = False) -> None:
        """Recover every queue read at open (see :meth:`ConsumeQueue.recover`;
        ``clean``: the store was closed cleanly)."""
        for cq in list(self.queues.values()):
            cq.recover(clean=clean)
            if not cq.flushed_all:
                self._dirty.add(cq)

    def check_log_end(self, end: int) -> None:
        """Read every queue now unless the CommitLog ends at ``end`` where the summary
        says it ended at the close (else the log changed since, and the summary with
        it may not describe the queues)."""
        if self._closed and end != self._log_end:
            log.warning(
                "CommitLog ends at %d, the queue summary was written at %d: reading "
                "every queue", end, self._log_end,
            )  # fmt: skip
            self._open_closed(list(self._closed))

    def _open_closed(self, keys: list[tuple[str, int]]) -> None:
        for key in keys:
            self._open_one(key)

    def _open_one(self, key: tuple[str, int]) -> ConsumeQueue | None:
        """Read a queue the summary describes: list its files, take its end from the
        summary (recover it if the end is not in its last file) and correct its minimum
        if the CommitLog start concerns it; None if it is not one (any more).

        Raises:
            SegmentLoadError: a queue file with a bad name or size.
        """
        with self._lock:
            cq = self.queues.get(key)
            if cq is not None:
                return cq
            s = self._closed.get(key)
            if s is None:
                return None
            topic, queue_id = key
            cq = ConsumeQueue(
                self.directory / topic / str(queue_id), topic, queue_id, self.file_size, self.pool
            )
            cq.load()
            end = s.max_offset * UNIT_SIZE
            if not cq.resume(end, s.max_physic_offset):
                end = cq.recover(clean=True)
            cq.min_logic_offset = min(max(cq.min_logic_offset, s.min_offset * UNIT_SIZE), end)
            if s.min_physical >= 0:
                cq.known_min_unit(s.min_offset * UNIT_SIZE, s.min_physical)
            log_start = self._log_start()
            if s.concerned_by(log_start, self.file_size):
                cq.correct_min_offset(log_start)
            self.queues[key] = cq
            del self._closed[key]
        return cq

    # ------------------------------------------------------------------ access

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue of (topic, queue_id), or None if it has never been written."""
        cq = self.queues.get((topic, queue_id))
        if self._dispatched is None:
            if cq is None and self._closed:
                return self._open_one((topic, queue_id))
            return cq
        if cq is None:
            cq = self._discover(topic, queue_id)
            if cq is None:
                return None
            return self._caught_up(cq, self._dispatched())
        return self._caught_up(cq, self._dispatched())

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue of (topic, queue_id), created (without files) if needed."""
        cq = self.queues.get((topic, queue_id))
        if cq is None and self._closed:
            cq = self._open_one((topic, queue_id))
        if cq is None:
            with self._lock:
                cq = self.queues.get((topic, queue_id))
                if cq is None:
                    cq = ConsumeQueue(
                        self.directory / topic / str(queue_id),
                        topic,
                        queue_id,
                        self.file_size,
                        self.pool,
                    )
                    self.queues[topic, queue_id] = cq
        return cq

    def put(
        self,
        topic: str,
        queue_id: int,
        physical_offset: int,
        size: int,
        tags_code: int,
        queue_offset: int,
        store_timestamp: int,
    ) -> bool:
        """Write one unit (see :meth:`ConsumeQueue.put`); False when already present.

        Raises:
            OSError: a queue file could not be created.
        """
        cq = self.queues.get((topic, queue_id)) or self.find_or_create(topic, queue_id)
        if cq.put(physical_offset, size, tags_code, queue_offset):
            self._dirty.add(cq)
            self._touched.add(cq)
            self.logics_msg_timestamp = store_timestamp
            return True
        return False

    def put_units(
        self, topic: str, queue_id: int, units: NDArray[Any], queue_offsets: NDArray[np.int64]
    ) -> NDArray[np.bool_]:
        """Write many units of one queue (see :meth:`ConsumeQueue.put_units`); which were
        written. The caller sets :attr:`logics_msg_timestamp` (that of the last unit
        written, in log order, over all its queues).

        Raises:
            OSError: a queue file could not be created or written.
        """
        cq = self.queues.get((topic, queue_id)) or self.find_or_create(topic, queue_id)
        written = cq.put_units(units, queue_offsets)
        if written.any():
            self._dirty.add(cq)
            self._touched.add(cq)
        return written

    def all(self) -> list[ConsumeQueue]:
        """A snapshot of every queue (each read now if it was not yet)."""
        if self._dispatched is not None:
            self._discover_all()
        if self._closed:
            self._open_closed(list(self._closed))
        return list(self.queues.values())

    def queue_keys(self) -> list[tuple[str, int]]:
        """(topic, queue id) of every queue, without reading any."""
        if self._dispatched is not None:
            self._discover_all()
        return [*self.queues, *self._closed]

    def queue_ids(self, topic: str) -> list[int]:
        """The topic's queue ids, sorted, without reading any queue."""
        return sorted(qid for t, qid in self.queue_keys() if t == topic)

    def _discover_all(self) -> None:
        """Following: map queues created since, and catch every queue up."""
        try:
            topics = os.listdir(self.directory)
        except FileNotFoundError:
            topics = []
        for topic in topics:
            try:
                qids = os.listdir(self.directory / topic)
            except (NotADirectoryError, FileNotFoundError):
                continue
            for qid in qids:
                if qid.isdigit() and (topic, int(qid)) not in self.queues:
                    self.find(topic, int(qid))
        assert self._dispatched is not None
        dispatched = self._dispatched()
        for cq in list(self.queues.values()):
            self._caught_up(cq, dispatched)

    @property
    def max_physic_offset(self) -> int:
        """The largest CommitLog end any queue points at (0 with no units)."""
        if self._dispatched is not None:
            self._discover_all()
        closed = max((s.max_physic_offset for s in list(self._closed.values())), default=0)
        return max(max((cq.max_physic_offset for cq in list(self.queues.values())), default=0),
                   closed)  # fmt: skip

    def topic_queue_table(self) -> dict[str, int]:
        """``topic-queueId`` -> next queue offset, for every queue with units."""
        if self._dispatched is not None:
            self._discover_all()
        table = {
            f"{t}-{q}": s.max_offset for (t, q), s in list(self._closed.items()) if s.max_offset
        }
        for cq in list(self.queues.values()):
            if cq.max_offset:
                table[f"{cq.topic}-{cq.queue_id}"] = cq.max_offset
        return table

    # ---------------------------------------------------------- maintenance

    def truncate_dirty(self, physical_offset: int, verify: UnitCheck | None = None) -> int | None:
        """Drop units pointing at or past ``physical_offset`` in every queue (and, with
        ``verify``, torn units just before). Returns the lowest CommitLog offset whose
        records must be dispatched again because torn units were cut, else None."""
        if verify is not None:
            self.all()
        else:  # only queues pointing past the cut are concerned
            self._open_closed(
                [k for k, s in list(self._closed.items()) if s.max_physic_offset > physical_offset]
            )
        replay: int | None = None
        for cq in self._snapshot():
            if verify is not None or cq.max_physic_offset > physical_offset:
                r = cq.truncate_dirty(physical_offset, verify)
                self._dirty.add(cq)
                if r is not None:
                    replay = r if replay is None else min(replay, r)
        return replay

    def correct_min_offset(self, min_physical_offset: int) -> None:
        """Correct every queue's minimum against the CommitLog's first offset (a queue
        not read yet is read if the offset concerns it)."""
        self._open_concerned(min_physical_offset)
        for cq in self._snapshot():
            cq.correct_min_offset(min_physical_offset)

    def _open_concerned(self, log_start: int) -> None:
        size = self.file_size
        self._open_closed(
            [k for k, s in list(self._closed.items()) if s.concerned_by(log_start, size)]
        )

    def _snapshot(self) -> list[ConsumeQueue]:
        if self._dispatched is not None:
            self._discover_all()
        return list(self.queues.values())

    def delete_expired(self, min_physical_offset: int) -> int:
        """Delete queue files pointing only below ``min_physical_offset``; count deleted.

        Following: delete nothing (the child does), unmap the files it deleted and
        correct each minimum; returns the files let go of.
        """
        if self._dispatched is not None:
            dropped = 0
            for cq in self.all():
                dropped += cq.forget_deleted_files()
                cq.follow_min(min_physical_offset)
            return dropped
        self._open_concerned(min_physical_offset)
        return sum(cq.delete_expired(min_physical_offset) for cq in self._snapshot())

    def drop_topic(self, topic: str) -> int:
        """Forget the topic's queues and delete their files (the topic was deleted);
        returns how many queues went. A reader holding one finishes on its mappings."""
        dropped = self._drop(lambda key: key[0] == topic)
        shutil.rmtree(self.directory / topic, ignore_errors=True)
        return dropped

    def drop_expired_queues(self, min_physical_offset: int, keep: Container[str] = ()) -> int:
        """Forget and delete every queue whose last unit ends at or below
        ``min_physical_offset`` (all its messages are gone from the CommitLog), but the
        queues of ``keep`` topics and empty queues; returns how many went (RocketMQ
        ``cleanExpiredConsumerQueue``). Following a dispatch child: none (it owns them)."""
        if self._dispatched is not None:
            return 0

        def expired(key: tuple[str, int]) -> bool:
            cq = self.queues.get(key)
            last = cq.last_unit() if cq is not None and key[0] not in keep else None
            return last is not None and last[0] + last[1] <= min_physical_offset

        self._open_closed(list(self._closed))
        return self._drop(expired)

    def _drop(self, doomed_key: Callable[[tuple[str, int]], bool]) -> int:
        with self._lock:
            for key in [k for k in self._closed if doomed_key(k)]:
                del self._closed[key]
            doomed = [cq for key, cq in self.queues.items() if doomed_key(key)]
            for cq in doomed:
                del self.queues[cq.topic, cq.queue_id]
                self._dirty.discard(cq)
                self._touched.discard(cq)
        for cq in doomed:
            cq.destroy()
        return len(doomed)

    def destroy(self) -> None:
        """Delete every queue (the CommitLog has no files)."""
        for cq in self.all():
            cq.destroy()

    def flush(self, least_pages: int) -> None:
        """Flush the due pages of the queues written since their last complete flush
        (every such queue to its end when ``least_pages`` is 0). With ``least_pages``,
        only the queues written since the previous such round are looked at: a round
        costs what was written, not the number of queues waiting for a complete flush;
        once :data:`SYNCFS_BACKLOG` queues wait, they are synced at once, and a round
        that finds none written since the previous one syncs every queue waiting (so
        a store closed after its writes paused has nothing left to sync).

        Raises:
            OSError: a sync failed (the queue stays to be flushed).
        """
        dirty = self._dirty
        if least_pages == 0 or (dirty and not self._touched):
            # A complete flush, or a round after one that found the queues written
            # since: writes paused, so what waits is synced now rather than by the
            # next complete flush (a close would otherwise sync every queue a burst
            # left below ``least_pages``, however long ago the burst ended).
            least_pages = 0
            self._touched = set()
            if len(dirty) >= SYNCFS_FROM and _syncfs_works():
                self._flush_by_syncfs()
                return
            candidates = list(dirty)
        elif len(dirty) >= SYNCFS_BACKLOG and _syncfs_works():
            self._touched = set()
            self._flush_by_syncfs()
            return
        else:
            # Swapped, then copied: a unit written meanwhile lands in one of the two
            # sets; one missed here is flushed by the next complete flush.
            touched, self._touched = self._touched, set()
            candidates = [cq for cq in list(touched) if cq in dirty]
        for cq in candidates:
            # Removed before the flush: a unit written meanwhile adds the queue back.
            dirty.discard(cq)
            try:
                cq.flush(least_pages)
            finally:
                if not cq.flushed_all:
                    dirty.add(cq)

    def _flush_by_syncfs(self) -> None:
        """Flush many queues at once: one ``syncfs`` of the queues' filesystem costs
        one journal commit, where a ``fdatasync`` per file costs one each. Each
        queue's end is read before the sync, so a unit written during it stays to
        be flushed.

        Raises:
            OSError: the sync failed (every queue stays to be flushed).
        """
        dirty = self._dirty
        ends = []
        for cq in list(dirty):
            dirty.discard(cq)
            ends.append((cq, cq.segments.max_offset))
        try:
            syncfs(self.directory)
        except BaseException:
            dirty.update(cq for cq, _end in ends)
            raise
        for cq, end in ends:
            cq.flushed_to(end)
            if not cq.flushed_all:
                dirty.add(cq)

    @property
    def dirty_count(self) -> int:
        """Queues with units not flushed yet."""
        return len(self._dirty)

    @property
    def touched_count(self) -> int:
        """Queues written since the last periodic flush (what the next one looks at)."""
        return len(self._touched)

    def save_summary(self, log_end: int) -> None:
        """Write the clean-close summary of every queue (``log_end``: the CommitLog's
        end, which the next open compares with its recovered end). Call it after a
        complete flush, once no unit can be written.

        Raises:
            OSError: writing failed (nothing is left behind; the next open reads every
                queue).
        """
        entries = [((cq.topic, cq.queue_id), cq.summary()) for cq in list(self.queues.values())]
        entries += list(self._closed.items())
        summary.write(self.directory, self.file_size, log_end, entries)

    def close(self) -> None:
        """Unmap every queue (and stop following)."""
        self._dispatched = None
        self._closed.clear()
        self.pool.unmap_all()
        for cq in list(self.queues.values()):
            cq.close()
        self.queues.clear()
        self._dirty.clear()
        self._touched.clear()
