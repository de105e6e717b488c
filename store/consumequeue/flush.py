"""FlushConsumeQueueService: consume queues reach the disk in the background.

Every ``interval`` (1 s) each queue syncs if at least ``least_pages`` (2) pages were
written since its last sync; every ``thorough_interval`` (60 s) everything is synced
and then the checkpoint, whose ``logicsMsgTimestamp`` becomes the store time of the
last unit written *before* that flush started (RocketMQ snapshots it the same way),
so the checkpoint never claims units that might still be only in the page cache.
Abnormal recovery re-dispatches every message stored after that time.

A failed sync (OSError) ends the service and poisons the store (``on_error``): which
bytes reached the disk is unknown. Any other exception of a round is counted in
``failures`` (logged once per kind) and the next round runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from mqstore.checkpoint import Checkpoint
from mqstore.consumequeue.store import ConsumeQueueStore
from mqstore.failures import FailureCounter
from mqstore.service import ServiceThread

log = logging.getLogger(__name__)


class ConsumeQueueFlusher(ServiceThread):
    """Periodic consume-queue flushes and the thorough flush + checkpoint."""

    name = "cq-flush"

    def __init__(
        self,
        queues: ConsumeQueueStore,
        checkpoint: Checkpoint,
        *,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        on_error: Callable[[BaseException], None],
    ) -> None:
        super().__init__(interval_ms / 1000.0)
        self._queues = queues
        self._checkpoint = checkpoint
        self._least_pages = least_pages
        self._thorough = thorough_interval_ms / 1000.0
        self._last_thorough = time.monotonic()
        self._on_error = on_error
        self.failures = FailureCounter(log, self.name)

    def flush_once(self, *, thorough: bool = False) -> None:
        """One round; ``thorough`` forces the full flush and the checkpoint.

        Raises:
            OSError: a sync failed.
        """
        now = time.monotonic()
        least = self._least_pages
        snapshot = 0
        if thorough or now - self._last_thorough >= self._thorough:
            self._last_thorough = now
            least = 0
            snapshot = self._queues.logics_msg_timestamp
        self._queues.flush(least)
        if least == 0:
            if snapshot:
                self._checkpoint.note(logics=snapshot)
            self._checkpoint.flush()

    def run_once(self) -> None:
        try:
            self.flush_once()
        except OSError:
            raise  # the disk's verdict: the thread ends and the store is poisoned
        except Exception as e:
            self.failures.record("flush", e)

    def on_error(self, err: BaseException) -> None:
        self._on_error(err)
