"""Long polling (RocketMQ ``PullRequestHoldService``): pulls held until a message comes.

A pull that finds nothing new (PULL_NOT_FOUND) and allows suspension is *held* here
instead of being answered. It is re-executed, once, and never held again, when:

- a message arrives on its queue (the store's arrival listener, called from the
  dispatcher thread) at an offset past the request's and whose tags code matches the
  subscription; this is what makes a long poll answer within milliseconds of a put;
- the check loop finds the queue's max offset past the request offset (every
  ``check_interval_ms`` = 5 s, as RocketMQ; this catches anything the listener missed);
- its deadline (hold start + suspend timeout) has passed.

Unlike RocketMQ, whose loop only wakes every 5 s so a 1 s suspend can last 5 s, the
loop also wakes at the earliest deadline: a hold never outlives its timeout by more
than scheduling noise.

A lost wake-up is impossible: after registering a request, :meth:`PullHoldService.hold`
re-reads the queue's max offset (listeners run after the consume queue is updated)
and re-executes at once if it moved.

Re-execution runs on a small thread pool, not on the dispatcher thread.
Deadlines are kept in a heap, so holding a pull and releasing the expired ones cost
O(log n) in the number of held pulls (a consumer of a 1,000-queue topic keeps 1,000
held at once and re-holds each as it times out); the loop is woken by a new hold only
when its deadline comes before the one the loop waits for. Thread-safe.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from mqstore.broker.pulls import PullCallback, PullRequest
from mqstore.consumequeue.dispatch import Arrival
from mqstore.consumequeue.filter import Subscription, parse_subscription
from mqstore.failures import FailureCounter

log = logging.getLogger(__name__)

Executor = Callable[[PullRequest, PullCallback], None]
"""Runs a held request again, without suspension, and answers ``on_done``."""


@dataclass(frozen=True, slots=True)
class HeldPull:
    """A suspended pull and when it gives up."""

    request: PullRequest
    on_done: PullCallback
    deadline: float  # time.monotonic()
    subscription: Subscription

    @property
    def key(self) -> tuple[str, int]:
        """The held queue as the service keys it: (topic, queue id)."""
        queue = self.request.query.queue
        return (queue.topic, queue.queue_id)


class PullHoldService:
    """The held pulls, keyed by ``(topic, queue_id)``."""

    def __init__(
        self,
        execute: Executor,
        max_offset: Callable[[str, int], int],
        check_interval_ms: int = 5000,
        workers: int = 4,
    ) -> None:
        self._execute = execute
        self._max_offset = max_offset
        self.check_interval = check_interval_ms / 1000
        self._lock = threading.Lock()
        self._held: dict[tuple[str, int], list[HeldPull]] = {}
        self._deadlines: list[tuple[float, int, HeldPull]] = []  # a heap; may hold released
        self._seq = itertools.count()
        self._wake_at = float("inf")  # the deadline the loop waits for now
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pull-wakeup")
        self._thread: threading.Thread | None = None
        self.failures = FailureCounter(log, "pull-hold")

    @property
    def running(self) -> bool:
        """True while the check loop's thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the check loop."""
        self._stopped.clear()
        self._thread = threading.Thread(target=self._loop, name="pull-hold", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop and answer every held request now (usually PULL_NOT_FOUND)."""
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        with self._lock:
            held = [h for queue in self._held.values() for h in queue]
            self._held.clear()
            self._deadlines.clear()
        for h in held:
            self._run(h)
        self._pool.shutdown(wait=True)

    @property
    def held_count(self) -> int:
        """How many pulls are suspended right now."""
        with self._lock:
            return sum(len(v) for v in self._held.values())

    def hold(self, request: PullRequest, on_done: PullCallback, hold_ms: int) -> None:
        """Suspend ``request`` for at most ``hold_ms``; ``on_done`` is called once later."""
        held = HeldPull(
            request,
            on_done,
            time.monotonic() + hold_ms / 1000,
            parse_subscription(request.query.expression, request.query.expression_type),
        )
        key = held.key
        with self._lock:
            self._held.setdefault(key, []).append(held)
            heapq.heappush(self._deadlines, (held.deadline, next(self._seq), held))
            sooner = held.deadline < self._wake_at
        if sooner:
            self._wake.set()  # the loop re-plans for this earlier deadline
        if self._max_offset(*key) > request.query.offset:
            self._release(key, lambda h: h is held)

    def on_arrival(self, arrival: Arrival) -> None:
        """Store arrival listener: wake the matching held pulls of the queue."""
        key = (arrival.topic, arrival.queue_id)
        if key not in self._held:  # racy read is fine: hold() re-checks after adding
            return
        newest = arrival.queue_offset + 1
        self._release(
            key,
            lambda h: (
                newest > h.request.query.offset and h.subscription.matches_code(arrival.tags_code)
            ),
        )

    def _release(self, key: tuple[str, int], wake: Callable[[HeldPull], bool]) -> None:
        with self._lock:
            queue = self._held.get(key)
            if not queue:
                return
            woken: list[HeldPull] = []
            rest: list[HeldPull] = []
            for h in queue:
                (woken if wake(h) else rest).append(h)
            if not woken:
                return
            if rest:
                self._held[key] = rest
            else:
                del self._held[key]
        for h in woken:
            self._submit(h)

    def _submit(self, h: HeldPull) -> None:
        try:
            self._pool.submit(self._run, h)
        except RuntimeError:  # pool shut down: answer on this thread
            self._run(h)

    def _run(self, h: HeldPull) -> None:
        try:
            self._execute(h.request, h.on_done)
        except Exception as e:  # that request is lost; the others are answered
            self.failures.record("re-executing a held pull", e, h.key)

    def check_all(self) -> None:
        """The 5 s pass: release what has data past its offset or has timed out.

        As RocketMQ's ``checkHoldRequest``, data is judged by the max offset alone (no
        tag test): the re-executed pull then answers PULL_RETRY_IMMEDIATELY with a
        ``nextBeginOffset`` past the non-matching messages.
        """
        now = time.monotonic()
        with self._lock:
            keys = list(self._held)
        for key in keys:
            self._release(key, self._due(self._max_offset(*key), now))

    def expire(self) -> None:
        """Release only the pulls whose suspend time has run out (from the heap: the
        entries of pulls already released are dropped on the way)."""
        now = time.monotonic()
        due: list[HeldPull] = []
        with self._lock:
            while self._deadlines and self._deadlines[0][0] <= now:
                h = heapq.heappop(self._deadlines)[2]
                key = h.key
                queue = self._held.get(key)
                if queue is None or not any(x is h for x in queue):
                    continue  # released earlier
                rest = [x for x in queue if x is not h]
                if rest:
                    self._held[key] = rest
                else:
                    del self._held[key]
                due.append(h)
        for h in due:
            self._submit(h)

    @staticmethod
    def _due(newest: int, now: float) -> Callable[[HeldPull], bool]:
        return lambda h: newest > h.request.query.offset or now >= h.deadline

    def _next_wait(self, next_check: float) -> float:
        with self._lock:
            while self._deadlines and not self._is_held(self._deadlines[0][2]):
                heapq.heappop(self._deadlines)  # released before its deadline
            first = self._deadlines[0][0] if self._deadlines else next_check
            self._wake_at = min(next_check, first)
            return max(0.0, self._wake_at - time.monotonic())

    def _is_held(self, h: HeldPull) -> bool:
        queue = self._held.get(h.key)
        return queue is not None and any(x is h for x in queue)

    def _loop(self) -> None:
        next_check = time.monotonic() + self.check_interval
        while not self._stopped.is_set():
            self._wake.wait(self._next_wait(next_check))
            self._wake.clear()
            if self._stopped.is_set():
                return
            try:
                if time.monotonic() >= next_check:
                    self.check_all()
                    next_check = time.monotonic() + self.check_interval
                else:  # woken for a deadline, or to re-plan after a new hold
                    self.expire()
            except Exception as e:  # the next pass retries
                self.failures.record("checking held pulls", e)
