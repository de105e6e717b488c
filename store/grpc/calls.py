"""Where the gRPC endpoint's handlers run, and what they see of a call.

The endpoint is a ``grpc.aio`` server on one event loop (``mqstore.grpc.server``): a
call that waits (a long-polling receive, an open Telemetry stream) is a suspended
coroutine, not a thread. The handlers' work on the broker core is blocking Python,
so each unary handler runs either on the loop thread or on a small thread pool,
chosen the way the remoting broker chooses (``mqstore.broker.server.inline_codes``):

- on the loop: work that cannot wait on I/O (routes, assignments, and, when the
  store's puts cannot wait, sends, acks and POP attempts: ASYNC_FLUSH and no
  synchronous slave), because the hand-off to a thread costs more than the work;
- on the pool: puts that may wait for a flush or a slave (SYNC_FLUSH, SYNC_MASTER),
  heartbeats (they may persist files) and EndTransaction (it waits for the index).

A handler reads its call (metadata, peer, time left) through the aio context when it
runs on the loop, and through a :class:`CallInfo` taken on the loop when it runs on the
pool: the aio context is not to be used from a pool thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

POOLED_ALWAYS = frozenset({"Heartbeat", "EndTransaction"})
"""RPCs that may block whatever the store's flush mode."""
PUTS = frozenset(
    {"SendMessage", "AckMessage", "ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue",
     "ReceiveMessage"}
)  # fmt: skip
"""RPCs that write CommitLog records (a receive writes its checkpoint): they block when
the store's puts wait for a flush or a slave."""


@dataclass(frozen=True, slots=True)
class CallInfo:
    """A call's metadata, peer and deadline, read once on the loop; the methods mirror
    the gRPC context's, so handlers and the ACL check take either."""

    metadata: tuple[tuple[str, str], ...]
    peer_address: str
    deadline: float | None
    """``time.monotonic()`` at the client's deadline; None: no deadline."""

    @classmethod
    def of(cls, context: Any) -> CallInfo:
        """The call info of an aio ``ServicerContext`` (loop thread only)."""
        left = context.time_remaining()
        pairs: Iterable[Any] = context.invocation_metadata() or ()
        return cls(
            tuple((str(k), v) for k, v in pairs),
            str(context.peer()),
            None if left is None else time.monotonic() + left,
        )

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        """The call's metadata, as (key, value) pairs."""
        return self.metadata

    def peer(self) -> str:
        """gRPC's peer text (``ipv4:127.0.0.1:5555``)."""
        return self.peer_address

    def time_remaining(self) -> float | None:
        """Seconds left before the client's deadline (None: none set)."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())


class Calls:
    """Runs handler work on the loop or on the pool (module docstring).

    ``puts_block``: the store's puts may wait (SYNC_FLUSH or a synchronous slave).
    ``pool`` None runs everything on the caller's thread (a service used without a
    server).
    """

    def __init__(self, pool: ThreadPoolExecutor | None, puts_block: bool) -> None:
        self.pool = pool
        self.pooled = POOLED_ALWAYS | PUTS if puts_block else POOLED_ALWAYS

    def runs_on_pool(self, rpc: str) -> bool:
        """Whether the work of ``rpc`` runs on the pool (else on the caller's thread)."""
        return self.pool is not None and rpc in self.pooled

    async def run(self, rpc: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, the work of ``rpc``, where that RPC's work runs."""
        if not self.runs_on_pool(rpc):
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)
