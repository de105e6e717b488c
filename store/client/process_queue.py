"""ProcessQueue: the messages of one queue fetched but not yet consumed.

RocketMQ ``ProcessQueue`` (docs/client.md §2.1). Pull threads add, consume threads
remove; everything is guarded by one lock, so every method is thread-safe.

Invariants:

- **Rule 1: the commit offset never passes an unfinished message.**
  :meth:`ProcessQueue.remove_messages` returns the smallest queue offset still held
  (or ``queue_offset_max + 1`` once nothing is held), so a consumer that finished
  offsets 5 and 7 while 6 is still running commits 6, not 8. A crash then redelivers
  6 and 7 (at-least-once), never skips 6.
- **Rule 2: accounting is exact.** ``msg_count`` and ``msg_size`` (body bytes) always
  equal the held messages (taken orderly messages included); flow control reads them.

Worked example: put offsets 10..14, remove [10, 12] -> 11; remove [11] -> 13;
remove [13, 14] -> 15 (= max + 1); remove [] on the now empty queue -> ``None``.

The held map is a dict keyed by queue offset plus a min-heap of offsets with lazy
deletion, so the smallest held offset is amortised O(log n) even after many removals
from the front (iterating a dict from the start is O(deleted) in CPython).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Iterable, Sequence

from mqstore.records import StoredMessage


def now_ms() -> int:
    """Wall clock in ms (RocketMQ timestamps are wall-clock ms)."""
    return time.time_ns() // 1_000_000


class ProcessQueue:
    """Offset-ordered held messages of one queue, with RocketMQ's flags and stamps.

    ``dropped`` is set by the rebalance when the queue is no longer owned; pull and
    consume threads check it and stop. ``locked`` and ``last_lock_timestamp`` belong to
    orderly consumption (broker lock held, renewed every 20 s, trusted for 30 s).
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._msgs: dict[int, StoredMessage] = {}
        self._heap: list[int] = []
        self._consuming: dict[int, StoredMessage] = {}  # orderly: taken, not committed
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.dropped = False
        self.locked = False
        self.consuming = False  # orderly: a consume request is scheduled/running
        self.consume_lock = threading.Lock()  # orderly: one thread per queue
        self.try_unlock_times = 0
        t = now_ms()
        self.last_lock_timestamp = t
        self.last_pull_timestamp = t
        self.last_consume_timestamp = t

    # -- concurrent and common --------------------------------------------------

    def put_messages(self, msgs: Iterable[StoredMessage]) -> bool:
        """Hold ``msgs`` (already-held offsets are ignored).

        Returns True when an orderly consume request should be dispatched: something
        is held and no request is running (RocketMQ's ``dispatchToConsume``).
        """
        with self._lock:
            for m in msgs:
                off = m.queue_offset
                if off in self._msgs or off in self._consuming:
                    continue
                self._msgs[off] = m
                heapq.heappush(self._heap, off)
                self.msg_count += 1
                self.msg_size += len(m.body)
                self.queue_offset_max = max(self.queue_offset_max, off)
            dispatch = bool(self._msgs) and not self.consuming
            if dispatch:
                self.consuming = True
            return dispatch

    def _first_key(self) -> int | None:
        heap = self._heap
        while heap and heap[0] not in self._msgs:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def remove_messages(self, msgs: Sequence[StoredMessage]) -> int | None:
        """Forget consumed ``msgs``; return the offset now safe to commit.

        That is the smallest offset still held, or ``queue_offset_max + 1`` when none
        is; ``None`` if the queue was already empty (nothing to commit: RocketMQ -1).
        """
        with self._lock:
            self.last_consume_timestamp = now_ms()
            if not self._msgs:
                return None
            for m in msgs:
                held = self._msgs.pop(m.queue_offset, None)
                if held is not None:
                    self.msg_count -= 1
                    self.msg_size -= len(held.body)
            first = self._first_key()
            return self.queue_offset_max + 1 if first is None else first

    def max_span(self) -> int:
        """Last held offset minus the first (0 when empty): the concurrent span check."""
        with self._lock:
            first = self._first_key()
            if first is None:
                return 0
            return self.queue_offset_max - first

    def held(self) -> list[StoredMessage]:
        """A snapshot of the held (not taken) messages in offset order."""
        with self._lock:
            return [self._msgs[k] for k in sorted(self._msgs)]

    def clear(self) -> None:
        """Forget everything (seek, offset reset)."""
        with self._lock:
            self._msgs.clear()
            self._heap.clear()
            self._consuming.clear()
            self.msg_count = 0
            self.msg_size = 0
            self.queue_offset_max = 0

    # -- orderly -----------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[StoredMessage]:
        """Move up to ``batch_size`` lowest-offset messages to the consuming map.

        An empty result also ends the consume request (``consuming`` = False), so the
        next put dispatches a new one.
        """
        with self._lock:
            self.last_consume_timestamp = now_ms()
            out: list[StoredMessage] = []
            while len(out) < batch_size:
                first = self._first_key()
                if first is None:
                    break
                heapq.heappop(self._heap)
                m = self._msgs.pop(first)
                self._consuming[first] = m
                out.append(m)
            if not out:
                self.consuming = False
            return out

    def commit(self) -> int | None:
        """Finish the taken messages; return last taken offset + 1 (``None`` if none)."""
        with self._lock:
            if not self._consuming:
                return None
            nxt = max(self._consuming) + 1
            for m in self._consuming.values():
                self.msg_count -= 1
                self.msg_size -= len(m.body)
            self._consuming.clear()
            return nxt

    def rollback(self) -> None:
        """Give every taken message back to the held map (consumed again, in order)."""
        with self._lock:  # re-entrant: the snapshot and the move are one step
            self.make_message_to_consume_again(list(self._consuming.values()))

    def make_message_to_consume_again(self, msgs: Sequence[StoredMessage]) -> None:
        """Move these taken messages back to the held map (SUSPEND_CURRENT_QUEUE)."""
        with self._lock:
            for m in msgs:
                if self._consuming.pop(m.queue_offset, None) is not None:
                    self._msgs[m.queue_offset] = m
                    heapq.heappush(self._heap, m.queue_offset)

    def has_temp_message(self) -> bool:
        """True while anything is held or taken."""
        with self._lock:
            return bool(self._msgs) or bool(self._consuming)

    def is_lock_expired(self, max_live_ms: int) -> bool:
        """The local lock is older than ``max_live_ms`` (30 s default): do not consume."""
        return now_ms() - self.last_lock_timestamp > max_live_ms

    def is_pull_expired(self, max_idle_ms: int) -> bool:
        """No pull for ``max_idle_ms`` (120 s): the rebalance drops the queue."""
        return now_ms() - self.last_pull_timestamp > max_idle_ms
