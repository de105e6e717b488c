"""SYNC_MASTER replication waits (RocketMQ 4.9 ``GroupTransferService``), one small object.

Contract: under SYNC_MASTER a put whose message has WAIT = true returns PUT_OK only
after a slave has *reported* an offset at or past the put's end offset. A report
means the bytes are in the slave's page cache (appended, not necessarily flushed):
the message survives the master machine dying, and it survives the slave process
dying, but not both machines losing power at once (docs/protocol.md §2.2, §2.6).

The 4.9 rules, in order:

1. no slave connected, or the best slave is ``fallbehind_max`` (256 MiB) or more behind
   the put's end offset: SLAVE_NOT_AVAILABLE at once (``isSlaveOK``);
2. else wait until ``push_to_slave_max_offset`` (the highest offset any slave ever
   reported, RocketMQ ``push2SlaveMaxOffset``) reaches the end offset: PUT_OK;
3. no such report within ``timeout_ms`` (``slaveTimeout``, 3 s): FLUSH_SLAVE_TIMEOUT.

RocketMQ double-buffers request lists and polls every 10 ms; a condition variable
that every report notifies gives the same batching (one report completes every
waiter at or below it) without the poll. The 5.x ``inSyncReplicas`` counting is not
modelled: one acknowledging slave is enough, as in 4.9.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from mqstore.status import PutStatus


class GroupTransfer:
    """Producers wait here for a slave's ack; the master's readers report acks here.

    Args:
        timeout_ms: how long a put waits for a slave (``slaveTimeout``).
        fallbehind_max: how far behind the best slave may be for a put to wait at all.
        connections: returns how many slaves are connected now.
        wake_writers: called before a put waits, so idle writers push at once.

    Thread-safe.
    """

    def __init__(
        self,
        *,
        timeout_ms: int,
        fallbehind_max: int,
        connections: Callable[[], int],
        wake_writers: Callable[[], None] = lambda: None,
    ) -> None:
        if timeout_ms <= 0 or fallbehind_max <= 0:
            raise ValueError(
                f"need positive timeout_ms and fallbehind_max, got {timeout_ms}, {fallbehind_max}"
            )
        self._timeout = timeout_ms / 1000.0
        self._fallbehind_max = fallbehind_max
        self._connections = connections
        self._wake_writers = wake_writers
        self._cond = threading.Condition()
        self._acked = 0
        self.waits = 0
        self.timeouts = 0

    @property
    def push_to_slave_max_offset(self) -> int:
        """The highest offset any slave has reported (0 before the first report)."""
        return self._acked

    def notify_ack(self, offset: int) -> None:
        """A slave reported ``offset``: raise the high-water mark, release waiters under it."""
        if offset <= self._acked:
            return
        with self._cond:
            if offset > self._acked:
                self._acked = offset
                self._cond.notify_all()

    def slave_ok(self, next_offset: int) -> bool:
        """4.9 ``isSlaveOK``: a slave is connected and less than ``fallbehind_max`` behind."""
        return self._connections() > 0 and next_offset - self._acked < self._fallbehind_max

    def wait_for_replica(self, next_offset: int) -> PutStatus:
        """Block until a slave acked ``next_offset``; see the module rules for the statuses."""
        if self._acked >= next_offset:
            return PutStatus.PUT_OK
        if not self.slave_ok(next_offset):
            return PutStatus.SLAVE_NOT_AVAILABLE
        self._wake_writers()
        deadline = time.monotonic() + self._timeout
        self.waits += 1
        with self._cond:
            while self._acked < next_offset:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.timeouts += 1
                    return PutStatus.FLUSH_SLAVE_TIMEOUT
                self._cond.wait(remaining)
        return PutStatus.PUT_OK


__all__ = ["GroupTransfer"]
