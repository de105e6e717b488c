"""Bounds on the gRPC endpoint's client-streaming calls (Telemetry): how many may be open
at once, and how long one may stay silent before its first message.

The endpoint runs every call on a worker thread, and a client stream holds its thread
while it waits for the client's next message. Without bounds, 80 Telemetry calls that
never send anything hold all 64 workers and no other call of any client runs. So
(``mqstore.limits``):

- at most ``max_streams_total`` streams are open at once; one more is answered
  RESOURCE_EXHAUSTED at once, holding its thread for no time;
- a stream whose first message has not arrived ``first_message_s`` after it opened is
  cancelled: nobody has authenticated on it (with ACL the first message is checked, and
  a refused one ends the stream, ``mqstore.grpc.access``), and it holds a worker.

The official clients open one Telemetry stream per client and send their settings on
it at once, so neither bound touches them.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import grpc


class _Ticket:
    __slots__ = ("context", "done")

    def __init__(self, context: Any) -> None:
        self.context = context
        self.done = False


class FirstMessageWatch:
    """Cancels the calls whose first message did not come in time; one thread for all
    of them. Thread-safe."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.cancelled = 0
        """Calls cancelled for want of a first message (for tests and stats)."""
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Ticket]] = []
        self._seq = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="grpc-first-message", daemon=True)
        self._thread.start()

    def start(self, context: Any) -> Callable[[], None]:
        """Watch the call of ``context``; the returned function says its first
        message came (or that it ended), and may be called more than once."""
        ticket = _Ticket(context)
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + self.timeout_s, next(self._seq), ticket))
            self._cond.notify()

        def arrived() -> None:
            ticket.done = True

        return arrived

    def _loop(self) -> None:
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                while self._heap and (self._heap[0][2].done or self._heap[0][0] <= now):
                    ticket = heapq.heappop(self._heap)[2]
                    if not ticket.done:
                        ticket.done = True
                        self.cancelled += 1
                        ticket.context.cancel()  # the request iterator then raises
                self._cond.wait(self._heap[0][0] - now if self._heap else None)

    def stop(self) -> None:
        """Stop watching (calls are no longer cancelled)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(5)


class StreamLimits:
    """The open-stream cap and the first-message watch of one endpoint."""

    def __init__(self, max_streams: int, first_message_s: float) -> None:
        self.max_streams = max_streams
        self._slots = threading.BoundedSemaphore(max_streams)
        self.watch = FirstMessageWatch(first_message_s)
        self.refused = 0
        """Streams refused because ``max_streams`` were open."""

    def wrap(self, behaviour: Callable[[Iterator[Any], Any], Iterator[Any]]) -> Any:
        """The client-streaming handler ``behaviour`` under these bounds."""

        def handler(requests: Iterator[Any], context: Any) -> Iterator[Any]:
            if not self._slots.acquire(blocking=False):
                self.refused += 1
                context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"{self.max_streams} streams are open on this endpoint; retry later",
                )
            arrived = self.watch.start(context)
            try:
                yield from behaviour(_first_noted(requests, arrived), context)
            finally:
                arrived()
                self._slots.release()

        return handler

    def close(self) -> None:
        """Stop the watch thread."""
        self.watch.stop()


def _first_noted(requests: Iterator[Any], arrived: Callable[[], None]) -> Iterator[Any]:
    for request in requests:
        arrived()
        yield request


class Incoming(NamedTuple):
    """A command the client sent on the stream (as opposed to one the server queued)."""

    command: Any


_END = object()


def merged(
    requests: Iterator[Any], outbox: queue.Queue[Any], active: Callable[[], bool]
) -> Iterator[Any]:
    """What a bidirectional stream's handler works through: each command the client
    sends, as :class:`Incoming`, and whatever the server puts in ``outbox`` to send
    (a check-back command), in the order they come. The client's side is read on its
    own thread, so a queued command goes out while the client is silent. Ends when the
    client's side ends or the call is no longer ``active``; a failure reading the
    client's side is raised here."""

    def read() -> None:
        try:
            for cmd in requests:
                outbox.put(Incoming(cmd))
        except Exception as e:  # handed to the handler's thread
            outbox.put(e)
        finally:
            outbox.put(_END)

    threading.Thread(target=read, name="grpc-stream-read", daemon=True).start()
    while True:
        try:
            item = outbox.get(timeout=1.0)
        except queue.Empty:
            if not active():
                return
            continue
        if item is _END:
            return
        if isinstance(item, Exception):
            raise item
        yield item
