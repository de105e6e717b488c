"""What a background service does with an item it cannot handle: log once, count, go on.

A service thread that dies on one bad item stops serving every good one after it (an
offset table that no longer persists, a delay queue that no longer delivers). So a
service catches the failure of one item or one task, records it here and carries on.
The first failure of each kind is logged with its traceback; later ones of the same
kind only count, so a poisoned item retried every round cannot flood the log.
:meth:`FailureCounter.counts` is what an operator (or a test) reads.

Thread-safe.
"""

from __future__ import annotations

import logging
import threading


class FailureCounter:
    """Failures of one service, counted by kind (a short, fixed label per task)."""

    def __init__(self, logger: logging.Logger, service: str) -> None:
        self._log = logger
        self.service = service
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def record(self, kind: str, err: BaseException, item: object = None) -> None:
        """Count one failure of ``kind``; log it if it is the first of its kind."""
        with self._lock:
            n = self._counts.get(kind, 0) + 1
            self._counts[kind] = n
        if n == 1:
            what = f" ({item!r})" if item is not None else ""
            self._log.error(
                "%s: %s failed%s, skipped; further failures of this kind are only counted",
                self.service, kind, what, exc_info=err,
            )  # fmt: skip

    def counts(self) -> dict[str, int]:
        """A snapshot: kind -> failures so far."""
        with self._lock:
            return dict(self._counts)

    @property
    def total(self) -> int:
        """All failures so far."""
        with self._lock:
            return sum(self._counts.values())
