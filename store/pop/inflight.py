"""The in-memory table of unacknowledged checkpoints (non-FIFO pops).

Rebuilt after a restart from the revive topic (``mqstore.pop.service``); here it is
only a table. Each entry is a :class:`~mqstore.pop.records.PopCheckPoint`, the set of
its offsets acknowledged so far and the revive-queue offset of its checkpoint record
(the revive scan may not move past a checkpoint still pending). An entry leaves the
table when every offset is acknowledged or when the revive service takes it
(:meth:`InFlight.take_due`); an ack that arrives after that finds nothing.

Thread-safe: one lock guards the table; every method holds it briefly.
"""

from __future__ import annotations

import heapq
import threading
from dataclasses import dataclass, field

from mqstore.pop.records import CkKey, PopCheckPoint


@dataclass(slots=True)
class Pending:
    """One checkpoint in flight: ``acked`` grows; ``ck_offset`` is its revive-queue
    offset, or the queue's max offset read before its record was written (a lower
    bound) while the write is in progress."""

    ck: PopCheckPoint
    revive_qid: int
    ck_offset: int
    acked: set[int] = field(default_factory=set)

    @property
    def unacked(self) -> list[int]:
        """Offsets of the batch not yet acknowledged, in pop order."""
        return [o for o in self.ck.offsets if o not in self.acked]


class InFlight:
    """Checkpoints by merge key, with a heap of revive times."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._table: dict[CkKey, Pending] = {}
        self._heap: list[tuple[int, CkKey]] = []

    def add(self, pending: Pending) -> None:
        """Register a checkpoint (again, for a re-registered key: replaces it)."""
        with self._lock:
            self._table[pending.ck.key] = pending
            heapq.heappush(self._heap, (pending.ck.revive_time, pending.ck.key))

    def set_ck_offset(self, key: CkKey, ck_offset: int) -> None:
        """Record the revive-queue offset the checkpoint record got."""
        with self._lock:
            p = self._table.get(key)
            if p is not None:
                p.ck_offset = ck_offset

    def discard(self, key: CkKey) -> None:
        """Forget a checkpoint whose record could not be written."""
        with self._lock:
            self._table.pop(key, None)

    def ack(self, key: CkKey, offsets: list[int]) -> list[int]:
        """Mark ``offsets`` acknowledged; return those that were in flight and unacked.

        The entry leaves the table once all its offsets are acknowledged.
        """
        with self._lock:
            p = self._table.get(key)
            if p is None:
                return []
            batch = set(p.ck.offsets)
            newly = [o for o in offsets if o in batch and o not in p.acked]
            p.acked.update(newly)
            if len(p.acked) == len(batch):
                del self._table[key]
            return newly

    def unacked_of(self, group: str, topics: frozenset[str]) -> int:
        """How many messages of ``group`` popped from ``topics`` wait for their ack."""
        with self._lock:
            return sum(
                len(p.unacked)
                for p in self._table.values()
                if p.ck.group == group and p.ck.topic in topics
            )

    def get(self, key: CkKey) -> Pending | None:
        """The entry of ``key`` if in flight (shared: read it, do not change it)."""
        with self._lock:
            return self._table.get(key)

    def take_due(self, now_ms: int) -> list[Pending]:
        """Remove and return the entries whose revive time has come."""
        out: list[Pending] = []
        with self._lock:
            while self._heap and self._heap[0][0] <= now_ms:
                rt, key = heapq.heappop(self._heap)
                p = self._table.get(key)
                if p is not None and p.ck.revive_time == rt:
                    del self._table[key]
                    out.append(p)
        return out

    def next_revive_time(self) -> int | None:
        """The earliest revive time pending (ms), or None."""
        with self._lock:
            while self._heap and self._heap[0][1] not in self._table:
                heapq.heappop(self._heap)
            return self._heap[0][0] if self._heap else None

    def low_water(self) -> dict[int, int]:
        """Per revive queue, the smallest checkpoint offset still pending."""
        out: dict[int, int] = {}
        with self._lock:
            for p in self._table.values():
                cur = out.get(p.revive_qid)
                if cur is None or p.ck_offset < cur:
                    out[p.revive_qid] = p.ck_offset
        return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._table)
