"""Client background threads: a wakeable periodic service and a delayed-task scheduler.

RocketMQ clients run ``RebalanceService`` (a ``ServiceThread``: wait the interval or
until woken) and a ``ScheduledExecutorService`` for heartbeats, offset persistence,
orderly re-locks and delayed re-submits. These two classes are those, small.

:class:`PeriodicTask` is not the store's :class:`mqstore.service.ServiceThread`: a
store service ends on an unexpected error and keeps it for its owner to report (a
flusher that failed must poison the store), while a client task logs it and runs on.

Tasks must not raise for expected failures; an unexpected exception is logged and the
thread keeps running (a dead heartbeat thread would silently evict the consumer).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class PeriodicTask:
    """Runs ``task`` at start, then every ``interval_ms`` or at once when woken.

    Several wakeups during a run coalesce into one more run (RocketMQ's ``hasNotified``).
    A task returning False ("not balanced yet") runs again after ``retry_ms`` instead
    of the full interval (RocketMQ 5.2+ re-runs an unbalanced rebalance after 1 s).
    """

    def __init__(
        self, name: str, interval_ms: int, task: Callable[[], bool], retry_ms: int = 1000
    ) -> None:
        self._name = name
        self._interval = interval_ms / 1000
        self._retry = min(interval_ms, retry_ms) / 1000
        self._task = task
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopped.is_set():
            done = True
            try:
                done = self._task()
            except Exception:
                log.exception("%s: task failed", self._name)
            self._wake.wait(self._interval if done else self._retry)
            self._wake.clear()


class Scheduler:
    """One thread running delayed and periodic callables, due-time order.

    ``schedule`` is thread-safe. Tasks run on the scheduler thread, so they must be
    short or hand work to a pool. After :meth:`stop` nothing more runs.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def schedule(self, delay_ms: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` once after ``delay_ms``."""
        with self._cond:
            if self._stopped:
                return
            heapq.heappush(self._heap, (time.monotonic() + delay_ms / 1000, next(self._seq), fn))
            self._cond.notify()

    def every(self, initial_ms: float, interval_ms: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` after ``initial_ms``, then every ``interval_ms`` (fixed delay)."""

        def tick() -> None:
            try:
                fn()
            finally:
                self.schedule(interval_ms, tick)

        self.schedule(initial_ms, tick)

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(wait)
                if self._stopped:
                    return
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:
                log.exception("%s: task failed", self._name)
