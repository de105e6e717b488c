"""POP long polling (RocketMQ ``PopLongPollingService``): a POP_MESSAGE or NOTIFICATION
that finds nothing is suspended here, holding no thread, until a message arrives or
its poll time runs out.

Semantics, as upstream's (``broker/longpolling/PopLongPollingService.java``,
``PopMessageProcessor``):

- A request with ``pollTime`` > 0 that finds nothing is held until the broker's
  receipt time + ``pollTime`` (at most :data:`MAX_POLL_MS`); ``pollTime`` 0 answers at
  once.
- It is re-executed, once per wake-up, when a message arrives on the topic or on the
  group's POP retry topic (where revived messages go), and when its time runs out. A
  re-executed request that still finds nothing before its deadline is held again; at
  the deadline it answers what it finds (POLLING_TIMEOUT: nothing, which clients read
  as POLLING_NOT_FOUND).
- At most ``max_total`` requests are held (``maxPopPollingSize``, 100,000) and at most
  ``max_per_key`` per (topic, group, queue) (``popPollingSize``, 1,024): past either,
  the request is answered POLLING_FULL (209) at once.
- A FIFO request is also re-executed every :data:`FIFO_RECHECK_S`: its queue unblocks
  when an in-flight message is acked or its invisible time runs out, which is no
  arrival.
- At stop, every held request is answered at once with what its last attempt found.

No lost wake-up: the topics' arrival counts are read before the attempt that found
nothing; :meth:`PopPolling.hold` re-executes at once if one moved meanwhile.

Re-execution runs on a small pool of this service, never on the dispatcher thread or
a request worker. Thread-safe.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from mqstore.broker.wire import BadRequestError
from mqstore.consumequeue.dispatch import Arrival
from mqstore.failures import FailureCounter
from mqstore.pop.records import pop_retry_topic
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import ResponseCode
from mqstore.remoting.headers import ext_int, ext_str

log = logging.getLogger(__name__)

MAX_POLL_MS = 20_000
"""The longest a request is held (``pollTime`` is capped to it)."""
FIFO_RECHECK_S = 0.5
POLLING_FULL = 209
"""RocketMQ ``ResponseCode.POLLING_FULL``: too many requests held; retry later."""

Respond = Callable[[RemotingCommand], None]
"""Answers one request, exactly once, from any thread."""


class Held(enum.Enum):
    """What :meth:`PopPolling.hold` did with a request."""

    HELD = "held"
    FULL = "full"
    STOPPED = "stopped"


@dataclass(eq=False)
class _Waiter:
    key: tuple[str, str, int]
    topics: tuple[str, ...]
    wake_at: float
    resume: Callable[[], None]
    done: bool = field(default=False)


class PopPolling:
    """The suspended POP requests of one broker."""

    def __init__(self, max_total: int = 100_000, max_per_key: int = 1024, workers: int = 4):
        self.max_total = max_total
        self.max_per_key = max_per_key
        self._lock = threading.Lock()
        self._by_topic: dict[str, set[_Waiter]] = {}
        self._per_key: dict[tuple[str, str, int], int] = {}
        self._count = 0
        self._heap: list[tuple[float, int, _Waiter]] = []
        self._seq = itertools.count()
        self._arrivals: dict[str, int] = {}
        self._wake = threading.Event()
        self._stopped = False
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pop-wakeup")
        self._thread = threading.Thread(target=self._loop, name="pop-polling", daemon=True)
        self._thread.start()
        self.failures = FailureCounter(log, "pop-polling")

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopped

    @property
    def held_count(self) -> int:
        """How many requests are suspended now."""
        with self._lock:
            return self._count

    def marks(self, topics: tuple[str, ...]) -> tuple[int, ...]:
        """The arrival counts of ``topics``: read them before the attempt that may be
        held, and pass them to :meth:`hold`."""
        return tuple(self._arrivals.get(t, 0) for t in topics)

    def hold(
        self,
        key: tuple[str, str, int],
        topics: tuple[str, ...],
        marks: tuple[int, ...],
        wake_at: float,
        resume: Callable[[], None],
    ) -> Held:
        """Suspend a request of ``key`` (topic, group, queue id) until a message
        arrives on one of ``topics`` or ``wake_at`` (``time.monotonic()``); then
        ``resume()`` runs once, on this service's pool. FULL or STOPPED: not held, and
        ``resume`` will not run."""
        w = _Waiter(key, topics, wake_at, resume)
        with self._lock:
            if self._stopped:
                return Held.STOPPED
            if self._count >= self.max_total or self._per_key.get(key, 0) >= self.max_per_key:
                return Held.FULL
            self._count += 1
            self._per_key[key] = self._per_key.get(key, 0) + 1
            for t in topics:
                self._by_topic.setdefault(t, set()).add(w)
            first = not self._heap or wake_at < self._heap[0][0]
            heapq.heappush(self._heap, (wake_at, next(self._seq), w))
        if first:
            self._wake.set()
        if self.marks(topics) != marks:  # arrived between the attempt and the hold
            self._release([w])
        return Held.HELD

    def on_arrival(self, arrival: Arrival) -> None:
        """Store arrival listener (dispatcher thread): wake the requests of the topic."""
        topic = arrival.topic
        self._arrivals[topic] = self._arrivals.get(topic, 0) + 1
        if topic not in self._by_topic:  # racy read is fine: hold() re-checks the marks
            return
        with self._lock:
            woken = list(self._by_topic.get(topic, ()))
        self._release(woken)

    def drop(self, topics: tuple[str, ...], resume: Callable[[], None]) -> None:
        """Forget the request held with ``resume`` (its caller went away: a gRPC receive
        the client cancelled), so it no longer counts against the limits; ``resume``
        will not run. Unknown or already resumed: nothing happens."""
        with self._lock:
            for w in {w for t in topics for w in self._by_topic.get(t, ()) if w.resume is resume}:
                self._forget(w)

    def _forget(self, w: _Waiter) -> bool:
        """Take ``w`` out of the tables (lock held); False if it already was."""
        if w.done:
            return False
        w.done = True
        self._count -= 1
        left = self._per_key[w.key] - 1
        if left:
            self._per_key[w.key] = left
        else:
            del self._per_key[w.key]
        for t in w.topics:
            group = self._by_topic.get(t)
            if group is not None:
                group.discard(w)
                if not group:
                    del self._by_topic[t]
        return True

    def _release(self, waiters: list[_Waiter]) -> None:
        with self._lock:
            run = [w for w in waiters if self._forget(w)]
        for w in run:
            try:
                self._pool.submit(self._run, w)
            except RuntimeError:  # stopping: answer here
                self._run(w)

    def _run(self, w: _Waiter) -> None:
        try:
            w.resume()
        except Exception as e:  # that request is lost; the others are answered
            self.failures.record("re-executing a held POP request", e, w.key)

    def _loop(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                now = time.monotonic()
                due = []
                while self._heap and self._heap[0][0] <= now:
                    due.append(heapq.heappop(self._heap)[2])
                wait = self._heap[0][0] - now if self._heap else None
            self._release(due)
            self._wake.wait(wait)
            self._wake.clear()

    def stop(self) -> None:
        """Answer every held request now, then stop."""
        with self._lock:
            self._stopped = True
            held = [w for _, _, w in self._heap]
        self._wake.set()
        self._thread.join(10)
        self._release(held)
        self._pool.shutdown(wait=True)


# ------------------------------------------------------------------- processors


def _poll_ms(cmd: RemotingCommand) -> int:
    return max(0, min(ext_int(cmd.ext_fields, "pollTime", 0), MAX_POLL_MS))


def suspend(
    polling: PopPolling,
    cmd: RemotingCommand,
    respond: Respond,
    attempt: Callable[[], RemotingCommand],
    found: Callable[[RemotingCommand], bool],
    fifo: bool,
) -> None:
    """Run ``attempt`` now and after each wake-up (held in ``polling``) until ``found``
    its answer or the request's poll time is over; answer through ``respond`` once."""
    ext = cmd.ext_fields
    try:
        topic, group = ext_str(ext, "topic"), ext_str(ext, "consumerGroup")
        key = (topic, group, ext_int(ext, "queueId", -1))
        deadline = time.monotonic() + _poll_ms(cmd) / 1000
    except BadRequestError as e:
        respond(cmd.make_response(ResponseCode.SYSTEM_ERROR, str(e)))
        return
    topics = (topic, pop_retry_topic(topic, group))

    last: list[RemotingCommand] = []

    def run() -> None:
        if last and polling.stopped:  # the POP service is closing: answer what was found
            respond(last[0])
            return
        marks = polling.marks(topics)
        try:
            resp = attempt()
        except BadRequestError as e:
            resp = cmd.make_response(ResponseCode.SYSTEM_ERROR, str(e))
        except Exception as e:  # answered, as the server answers a failed processor
            polling.failures.record(f"request {cmd.code}", e)
            resp = cmd.make_response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
        now = time.monotonic()
        if found(resp) or now >= deadline:
            respond(resp)
            return
        wake_at = min(deadline, now + FIFO_RECHECK_S) if fifo else deadline
        last[:] = [resp]
        held = polling.hold(key, topics, marks, wake_at, run)
        if held is Held.FULL:
            respond(cmd.make_response(POLLING_FULL, "the polling queue is full"))
        elif held is Held.STOPPED:
            respond(resp)

    run()
