"""Flush services: when appended bytes reach the disk, and what an ack promises.

**SYNC_FLUSH, :class:`GroupCommitter`.** A put returns PUT_OK only after an
``fdatasync`` that started after its bytes were in the mapping has returned. The
flusher thread takes every waiting request at once (the lists are swapped, as in
RocketMQ's ``GroupCommitService``), syncs the log up to its current end, which
covers every producer that appended meanwhile, and completes all of them: one sync,
many acks. The acks are a relay: the flusher wakes the first producer of the batch,
and each producer wakes the next one as soon as it runs (:class:`FlushRequest`). A
request still waiting after ``sync_flush_timeout`` returns FLUSH_DISK_TIMEOUT (the
record is stored, its durability unknown) and drops out of the relay. Contract: after
PUT_OK the message survives a crash or power loss of this machine (as far as the
device honours fdatasync).

**ASYNC_FLUSH, :class:`AsyncFlusher`.** A put returns PUT_OK once its bytes are in
the shared mapping: they survive the process dying (the kernel owns the page cache)
but not a power loss. Every 500 ms the flusher syncs if at least 4 pages were
written since the last sync; every 10 s it syncs whatever is there. Contract: a
power loss loses at most the messages appended since the last completed sync
(~500 ms under load, up to 10 s when idle-ish).

**Failure.** If ``fdatasync`` raises, nobody can tell which of the unflushed bytes
reached the disk. The service calls ``on_error`` (the store poisons itself: later
puts fail with SERVICE_NOT_AVAILABLE until reopened, when recovery re-validates the
tail), and every waiter gets FLUSH_DISK_TIMEOUT. Any other exception (a bug, an
``on_flushed`` callback that raises) is not the kernel's verdict on the bytes: it is
counted in ``failures`` (logged once per kind), the waiters of that round get
FLUSH_DISK_TIMEOUT, the flushed offset has not moved, and the next round syncs again,
so PUT_OK still only follows a sync that returned. The thread goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mqstore.commitlog.segments import Segments
from mqstore.failures import FailureCounter
from mqstore.status import PutStatus

ErrorHandler = Callable[[BaseException], None]

log = logging.getLogger(__name__)


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass(slots=True)
class FlushRequest:
    """A producer waiting for the log to be durable up to ``next_offset``.

    ``done`` is a lock created held: whoever wakes the producer releases it, and the
    producer's ``acquire(timeout)`` returns. A raw lock hand-off is much cheaper than a
    ``threading.Event`` (create, set, wait).

    Why a relay (``successor``) rather than the flusher waking the whole batch: only
    one thread at a time can run Python, so waking 20-60 producers at once makes them
    all runnable, and all but one go back to sleep waiting for the GIL, then are woken
    again for it. Woken one by one, each producer finds the GIL free when its
    predecessor blocks. ``mqstore bench commitlog`` compares both with 64 SYNC_FLUSH
    producers (figures in the README).
    """

    next_offset: int
    done: threading.Lock = field(default_factory=_held_lock)
    status: PutStatus = PutStatus.FLUSH_DISK_TIMEOUT
    successor: FlushRequest | None = None
    """The next producer of the same batch, woken by this one once it runs."""
    gone: bool = False
    """The producer timed out and left: whoever would wake it wakes its successor."""

    def complete(self, status: PutStatus) -> None:
        """Hand ``status`` to the waiting producer (once), outside any relay."""
        self.status = status
        self.done.release()


class _Service:
    """A thread with start/stop/wakeup (RocketMQ ``ServiceThread``)."""

    name = "service"

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self.failures = FailureCounter(log, self.name)
        """Unexpected (non-OSError) failures of a round, by kind: ``flush``, ``on_flushed``."""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        self._wake.set()

    def halt(self) -> None:
        """Ask the thread to stop after its current round, without waiting for it: no
        flush starts after this returns but the one under way (a simulated crash takes
        its image of what is durable next, then joins with :meth:`stop`)."""
        self._stopped.set()
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        self.halt()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class GroupCommitter(_Service):
    """SYNC_FLUSH: batches every waiting producer behind one ``fdatasync``."""

    name = "group-commit"
    waits = True
    """:meth:`wait_for` blocks until a sync covers the offset."""

    def __init__(
        self,
        segments: Segments,
        *,
        timeout_ms: int,
        on_error: ErrorHandler,
        on_flushed: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self._segments = segments
        self._timeout = timeout_ms / 1000.0
        self._on_error = on_error
        self._on_flushed = on_flushed
        self._lock = threading.Lock()
        self._relay = threading.Lock()
        self._requests: list[FlushRequest] = []
        self._failed = False
        self.syncs = 0
        self.acked = 0

    @property
    def flushed_offset(self) -> int:
        """Log offset known durable."""
        return self._segments.flushed_where

    def wait_for(self, next_offset: int) -> PutStatus:
        """Block until the log is durable up to ``next_offset`` or the timeout passes."""
        if self._segments.flushed_where >= next_offset:
            return PutStatus.PUT_OK
        if self._failed:
            return PutStatus.FLUSH_DISK_TIMEOUT
        req = FlushRequest(next_offset)
        with self._lock:
            self._requests.append(req)
        self._wake.set()
        woke = False
        try:
            woke = req.done.acquire(timeout=self._timeout) or self._leave(req)
            return req.status if woke else PutStatus.FLUSH_DISK_TIMEOUT
        finally:
            if not woke:  # timed out (already gone), or a signal's exception in the wait
                woke = self._leave(req)
            if woke and req.successor is not None:
                self._wake_next(req.successor)

    def _leave(self, req: FlushRequest) -> bool:
        """The producer of ``req`` stops waiting. True if it was woken after all (the
        ack is its own, and it passes the relay on); else it is marked gone and the
        relay passes it over. Idempotent."""
        with self._relay:
            if req.gone:
                return False
            if req.done.acquire(blocking=False):
                return True
            req.gone = True
            return False

    def _wake_next(self, req: FlushRequest | None) -> None:
        """Wake ``req``'s producer or, if it left, the first of its successors still
        waiting. Under ``_relay``, so a producer timing out either sees itself woken or
        is skipped: never woken after it left with nobody to wake the rest."""
        with self._relay:
            while req is not None and req.gone:
                req = req.successor
            if req is not None:
                req.done.release()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(0.01)
            self._wake.clear()
            with self._lock:
                batch, self._requests = self._requests, []
            if not batch:
                # RocketMQ flushes even without requests: WAIT=false puts must reach the
                # disk too, and under SYNC_FLUSH consumers only see flushed messages.
                seg = self._segments
                if not self._failed and seg.flushed_where < seg.max_offset:
                    self._commit(batch)
                continue
            self._commit(batch)
        with self._lock:
            batch, self._requests = self._requests, []
        if batch:
            self._commit(batch)

    def _commit(self, batch: list[FlushRequest]) -> None:
        target = max((r.next_offset for r in batch), default=self._segments.max_offset)
        try:
            seg = self._segments
            # Flush everything written so far: producers that appended after these
            # requests were taken are covered by the same sync.
            while seg.flushed_where < target and seg.flush(0):
                pass
            self.syncs += 1
        except OSError as e:
            self._failed = True
            # Poison first, then wake the waiters: a woken producer's next put must
            # already see the store refusing writes.
            self._on_error(e)
            for r in batch:
                r.complete(PutStatus.FLUSH_DISK_TIMEOUT)
            return
        except Exception as e:  # not the disk's verdict: durability unknown, retry next round
            self.failures.record("flush", e)
            for r in batch:
                r.complete(PutStatus.FLUSH_DISK_TIMEOUT)
            return
        flushed = self._segments.flushed_where
        ok = PutStatus.PUT_OK
        prev: FlushRequest | None = None
        for r in batch:
            if flushed >= r.next_offset:
                self.acked += 1
                r.status = ok
            if prev is not None:
                prev.successor = r
            prev = r
        if batch:
            self._wake_next(batch[0])
        _notify(self._on_flushed, self.failures)


class AsyncFlusher(_Service):
    """ASYNC_FLUSH: periodic syncs by pages written, and a thorough sync every 10 s."""

    name = "async-flush"
    waits = False
    """:meth:`wait_for` returns PUT_OK at once: a caller may skip the call."""

    def __init__(
        self,
        segments: Segments,
        *,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        on_error: ErrorHandler,
        on_flushed: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self._segments = segments
        self._interval = interval_ms / 1000.0
        self._least_pages = least_pages
        self._thorough = thorough_interval_ms / 1000.0
        self._on_error = on_error
        self._on_flushed = on_flushed
        self._last_thorough = time.monotonic()
        self.syncs = 0

    @property
    def flushed_offset(self) -> int:
        """Log offset known durable."""
        return self._segments.flushed_where

    def wait_for(self, next_offset: int) -> PutStatus:
        """Async mode never waits: the ack means "in the page cache"."""
        return PutStatus.PUT_OK

    def flush_once(self) -> None:
        """One flusher iteration (also used by tests to step the service)."""
        now = time.monotonic()
        least = self._least_pages
        if now - self._last_thorough >= self._thorough:
            self._last_thorough = now
            least = 0
        seg = self._segments
        progressed = False
        while seg.flush(least):
            progressed = True
            self.syncs += 1
            if seg.flushed_where >= seg.max_offset:
                break
        if progressed:
            _notify(self._on_flushed, self.failures)

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._stopped.wait(self._interval)
            if self._stopped.is_set():
                break
            try:
                self.flush_once()
            except OSError as e:
                self._on_error(e)
                return
            except Exception as e:  # not the disk's verdict: the next round syncs again
                self.failures.record("flush", e)


def _notify(callback: Callable[[], None] | None, failures: FailureCounter) -> None:
    """Run the after-flush callback; its failure is counted, never the flusher's end."""
    if callback is None:
        return
    try:
        callback()
    except Exception as e:
        failures.record("on_flushed", e)
