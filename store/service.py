"""A background thread with start / stop / wakeup (RocketMQ ``ServiceThread``).

Subclasses implement :meth:`ServiceThread.run_once`, called every ``interval``
seconds or as soon as :meth:`ServiceThread.wakeup` is called, until :meth:`stop`.
An exception other than the ones ``run_once`` handles itself ends the thread and is
kept in :attr:`ServiceThread.error` (never swallowed silently).
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class ServiceThread:
    """A daemon thread running :meth:`run_once` in a loop."""

    name = "service"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self.error: BaseException | None = None

    @property
    def running(self) -> bool:
        """True between start() and stop()."""
        return self._thread is not None and not self._stopped.is_set()

    def start(self) -> None:
        """Start the thread."""
        self._stopped.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        """Run the next iteration now instead of at the end of the interval."""
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the loop and wait for the thread; a no-op when not started."""
        self._stopped.set()
        self._wake.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
        self._thread = None

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stopped.is_set():
                break
            try:
                self.run_once()
            except BaseException as e:
                self.error = e
                log.exception("%s stopped by an error", self.name)
                self.on_error(e)
                return

    def run_once(self) -> None:  # pragma: no cover - overridden
        """One iteration of the service."""
        raise NotImplementedError

    def on_error(self, err: BaseException) -> None:
        """Called once when ``run_once`` raised (the thread then ends)."""
