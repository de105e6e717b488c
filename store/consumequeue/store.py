"""All consume queues of a store: ``consumequeue/{topic}/{queueId}/``.

Loading, recovery, truncation, minimum-offset correction, expiry and flushing are
applied to every queue; :meth:`ConsumeQueueStore.put` is what the dispatcher calls per
message. RocketMQ ``ConsumeQueueStore`` (5.x) / the CQ parts of 4.9's
``DefaultMessageStore``.

Thread-safety: queues are created under a lock; the table is read without one
(``dict`` lookups are atomic under the GIL).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from mqstore.consumequeue.queue import ConsumeQueue, UnitCheck
from mqstore.message import TOPIC_PATTERN

log = logging.getLogger(__name__)


class ConsumeQueueStore:
    """The consume queues under one directory."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.directory = directory
        self.file_size = file_size
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()
        self.logics_msg_timestamp = 0
        """Store time of the message of the last unit written (checkpoint field)."""
        self._dispatched: Callable[[], int] | None = None
        self._min_physical: Callable[[], int] = lambda: 0

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
            cq = ConsumeQueue(directory, topic, queue_id, self.file_size)
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

    def load(self) -> None:
        """Map every queue found on disk.

        Raises:
            SegmentLoadError: a queue file with a bad name or size.
        """
        if not self.directory.is_dir():
            return
        for topic in sorted(os.listdir(self.directory)):
            topic_dir = self.directory / topic
            if not topic_dir.is_dir() or not TOPIC_PATTERN.fullmatch(topic):
                continue
            for qid in sorted(os.listdir(topic_dir)):
                if not qid.isdigit() or not (topic_dir / qid).is_dir():
                    continue
                cq = ConsumeQueue(topic_dir / qid, topic, int(qid), self.file_size)
                cq.load()
                self.queues[topic, int(qid)] = cq

    def recover(self) -> None:
        """Recover every queue (see :meth:`ConsumeQueue.recover`)."""
        for cq in self.queues.values():
            cq.recover()

    # ------------------------------------------------------------------ access

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue of (topic, queue_id), or None if it has never been written."""
        cq = self.queues.get((topic, queue_id))
        if self._dispatched is None:
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
        if cq is None:
            with self._lock:
                cq = self.queues.get((topic, queue_id))
                if cq is None:
                    cq = ConsumeQueue(
                        self.directory / topic / str(queue_id), topic, queue_id, self.file_size
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
            self.logics_msg_timestamp = store_timestamp
            return True
        return False

    def all(self) -> list[ConsumeQueue]:
        """A snapshot of every queue."""
        if self._dispatched is not None:
            self._discover_all()
        return list(self.queues.values())

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
        return max((cq.max_physic_offset for cq in self.all()), default=0)

    def topic_queue_table(self) -> dict[str, int]:
        """``topic-queueId`` -> next queue offset, for every queue with units."""
        return {f"{cq.topic}-{cq.queue_id}": cq.max_offset for cq in self.all() if cq.max_offset}

    # ---------------------------------------------------------- maintenance

    def truncate_dirty(self, physical_offset: int, verify: UnitCheck | None = None) -> int | None:
        """Drop units pointing at or past ``physical_offset`` in every queue (and, with
        ``verify``, torn units just before). Returns the lowest CommitLog offset whose
        records must be dispatched again because torn units were cut, else None."""
        replay: int | None = None
        for cq in self.all():
            if verify is not None or cq.max_physic_offset > physical_offset:
                r = cq.truncate_dirty(physical_offset, verify)
                if r is not None:
                    replay = r if replay is None else min(replay, r)
        return replay

    def correct_min_offset(self, min_physical_offset: int) -> None:
        """Correct every queue's minimum against the CommitLog's first offset."""
        for cq in self.all():
            cq.correct_min_offset(min_physical_offset)

    def delete_expired(self, min_physical_offset: int) -> int:
        """Delete queue files pointing only below ``min_physical_offset``; count deleted.

        Following: delete nothing (the child does), unmap the files it deleted and
        correct each minimum; returns the files let go of.
        """
        if self._dispatched is not None:
            dropped = 0
            for cq in self.all():
                with cq._lock:
                    dropped += cq.segments.forget_before(0)
                cq.follow_min(min_physical_offset)
            return dropped
        return sum(cq.delete_expired(min_physical_offset) for cq in self.all())

    def destroy(self) -> None:
        """Delete every queue (the CommitLog has no files)."""
        for cq in self.all():
            cq.destroy()

    def flush(self, least_pages: int) -> None:
        """Flush every queue's due pages.

        Raises:
            OSError: a sync failed.
        """
        for cq in self.all():
            cq.flush(least_pages)

    def close(self) -> None:
        """Unmap every queue (and stop following)."""
        self._dispatched = None
        for cq in list(self.queues.values()):
            cq.close()
        self.queues.clear()
