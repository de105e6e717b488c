"""Bounds on the gRPC endpoint's client-streaming calls (Telemetry), and the merge of
a bidirectional stream's two sides.

An open stream is a suspended coroutine on the endpoint's loop (``mqstore.grpc.calls``),
so a silent one holds no thread; it still holds a slot of the server's calls and a few
KiB. So (``mqstore.limits``):

- at most ``max_streams_total`` streams are open at once; one more is answered
  RESOURCE_EXHAUSTED at once;
- a stream whose first message has not arrived ``first_message_s`` after it opened is
  ended with CANCELLED: nobody has authenticated on it (with ACL the first message is
  checked, and a refused one ends the stream, ``mqstore.grpc.access``).

The official clients open one Telemetry stream per client and send their settings on
it at once, so neither bound touches them. Loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

import grpc


class StreamLimits:
    """The open-stream cap and the first-message time of one endpoint."""

    def __init__(self, max_streams: int, first_message_s: float) -> None:
        self.max_streams = max_streams
        self.first_message_s = first_message_s
        self.open = 0
        """Streams open now."""
        self.refused = 0
        """Streams refused because ``max_streams`` were open."""
        self.cancelled = 0
        """Streams ended for want of a first message."""

    def wrap(
        self, behaviour: Callable[[AsyncIterator[Any], Any], AsyncIterator[Any]]
    ) -> Callable[[AsyncIterator[Any], Any], AsyncIterator[Any]]:
        """The client-streaming handler ``behaviour`` under these bounds."""

        async def handler(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            if self.open >= self.max_streams:
                self.refused += 1
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"{self.max_streams} streams are open on this endpoint; retry later",
                )
            self.open += 1
            try:
                source = aiter(requests)
                try:
                    first = await asyncio.wait_for(anext(source), self.first_message_s)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    self.cancelled += 1
                    await context.abort(
                        grpc.StatusCode.CANCELLED,
                        f"no message within {self.first_message_s:g} s of opening the stream",
                    )
                async for answer in behaviour(_prepended(first, source), context):
                    yield answer
            finally:
                self.open -= 1

        return handler


async def _prepended(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    yield first
    async for item in rest:
        yield item


class Incoming(NamedTuple):
    """A command the client sent on the stream (as opposed to one the server queued)."""

    command: Any


_END = object()


class LoopOutbox:
    """The server's side of a stream, fed from any thread: :meth:`put` hands an item to
    the stream's loop (a check-back command from a broker thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    def put(self, item: Any) -> None:
        """Queue ``item`` for the stream (never raises; dropped once the loop closed)."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: the stream is gone
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)


async def merged(requests: AsyncIterator[Any], outbox: LoopOutbox) -> AsyncIterator[Any]:
    """What a bidirectional stream's handler works through: each command the client
    sends, as :class:`Incoming`, and whatever the server puts in ``outbox`` to send
    (a check-back command), in the order they come; a queued command goes out while
    the client is silent. Ends when the client's side ends; a failure reading the
    client's side is raised here."""
    queue = outbox.queue

    async def read() -> None:
        try:
            async for cmd in requests:
                queue.put_nowait(Incoming(cmd))
        except Exception as e:  # handed to the handler
            queue.put_nowait(e)
        finally:
            queue.put_nowait(_END)

    reader = asyncio.ensure_future(read())
    try:
        while True:
            item = await queue.get()
            if item is _END:
                return
            if isinstance(item, Exception):
                raise item
            yield item
    finally:
        reader.cancel()
