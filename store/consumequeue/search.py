"""Finding a queue offset by store time (RocketMQ 5.x ``getOffsetInQueueByTime``).

Store times of a queue's messages never decrease (they are stamped under the put
lock), so the queue is searched as one sorted array over [min offset, max offset):
O(log n) unit lookups, each followed by an 8-byte read of the record's store time.
RocketMQ first picks a file by its first/last store times and then bisects inside
it; the result is the same.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from mqstore.consumequeue.queue import ConsumeQueue, is_blank

StoreTimeOf = Callable[[int, int], "int | None"]
"""(physical offset, size) -> store timestamp of that record, None when not held."""


class BoundaryType(enum.Enum):
    """Which end of a run of equal store times ``offset_by_time`` returns (RocketMQ 5.x)."""

    LOWER = "lower"
    UPPER = "upper"


def offset_by_time(
    cq: ConsumeQueue,
    timestamp: int,
    store_time_of: StoreTimeOf,
    boundary: BoundaryType = BoundaryType.LOWER,
) -> int:
    """LOWER: the first offset whose message was stored at or after ``timestamp``
    (the max offset when every message is older). UPPER: the last offset stored at or
    before it (the min offset when every message is newer). An empty queue gives 0.
    Units whose message the CommitLog no longer holds count as older than everything.
    """
    low, high = cq.min_offset, cq.max_offset
    if low >= high:
        return high

    def time_at(off: int) -> int:
        u = cq.unit_at(off)
        if u is None or is_blank(*u):
            return -1
        t = store_time_of(u[0], u[1])
        return -1 if t is None else t

    upper = boundary is BoundaryType.UPPER
    lo, hi = low, high  # first offset past the boundary
    while lo < hi:
        mid = (lo + hi) // 2
        t = time_at(mid)
        if t < timestamp or (upper and t == timestamp):
            lo = mid + 1
        else:
            hi = mid
    return max(low, lo - 1) if upper else lo
