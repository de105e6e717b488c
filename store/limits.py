"""The bounds every mqstore server applies to its clients: one set, one meaning.

No client may take unbounded memory, every worker thread, or a connection slot for
ever. The remoting broker, the name server, the gRPC endpoint and the HA master take
their bounds from one :class:`ServerLimits` (docs/limits.md has the table of values
and which server applies each):

- **Partial frames.** Bytes received and not yet decoded into a request are held per
  connection (at most one frame, ``max_frame_bytes``: a longer frame is refused when
  its length arrives) and over all connections together (``max_buffered_total``): the
  connection whose data passes the total is closed (:class:`PartialFrames`).
- **Idle connections.** A connection that read and wrote nothing for
  ``idle_timeout_s`` and has no request pending is closed (:func:`close_idle`).
- **Calls.** A connection has at most ``max_in_flight`` requests running or suspended
  (remoting) or ``max_streams_per_connection`` open streams (gRPC, HTTP/2 SETTINGS);
  the server at most ``max_calls_total`` calls at once (gRPC) and ``max_streams_total``
  open long-lived streams (gRPC Telemetry), so workers stay free for short calls.
- **First message.** A stream that has sent no message within ``first_message_s`` is
  closed: nobody has authenticated on it yet, and it holds a worker (gRPC Telemetry; an
  HA slave connection's first report, or its handshake proof).
- **Connections.** A server holds at most ``max_connections`` connections at once
  (remoting broker and name server: more are closed at accept; the HA master, whose
  slave links hold two threads each: :data:`HA_LIMITS`).

Inflation of compressed bodies is bounded by :func:`mqstore.compression.inflate`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from mqstore.remoting.codec import FRAME_MAX_LENGTH

log = logging.getLogger(__name__)

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """The bounds of one server (module docstring); the defaults suit a broker,
    :data:`NAME_SERVER_LIMITS` a name server, tests pass small ones."""

    write_high_water: int = 4 * MIB
    """Unsent output bytes of one connection above which it is no longer read."""
    write_low_water: int = MIB
    """Unsent output bytes below which a paused connection is read again."""
    max_in_flight: int = 1024
    """Requests of one connection running on the pool or held (long polls) at once."""
    frames_per_turn: int = 32
    """Requests one connection runs before the loop serves the others."""
    max_frame_bytes: int = FRAME_MAX_LENGTH
    """Largest remoting frame, and so the partial-frame bytes of one connection."""
    max_buffered_total: int = 128 * MIB
    """Bytes of unfinished frames over all connections together."""
    idle_timeout_s: float = 120.0
    """A connection with nothing read or written for this long is closed
    (RocketMQ's ``channelMaxIdleTimeSeconds``)."""
    max_streams_per_connection: int = 100
    """Concurrent calls one gRPC (HTTP/2) connection may have open."""
    max_calls_total: int = 2048
    """gRPC calls open at once, waiting ones (long polls, streams) included; more are
    refused RESOURCE_EXHAUSTED. A waiting call holds no thread, a few KiB."""
    max_streams_total: int = 1024
    """gRPC Telemetry streams open at once (one per client); more are refused
    RESOURCE_EXHAUSTED."""
    first_message_s: float = 10.0
    """A gRPC stream, or an HA slave connection, with no message this long after it
    opened is closed."""
    max_connections: int = 4096
    """Connections a server holds at once; more are closed at accept."""

    def __post_init__(self) -> None:
        if not 0 <= self.write_low_water <= self.write_high_water:
            raise ValueError("need 0 <= write_low_water <= write_high_water")
        counts = (self.max_in_flight, self.frames_per_turn, self.max_buffered_total,
                  self.max_streams_per_connection, self.max_calls_total,
                  self.max_streams_total, self.max_connections)  # fmt: skip
        if min(counts) < 1:
            raise ValueError("counts and byte caps must be >= 1")
        if self.max_frame_bytes < 8:
            raise ValueError("max_frame_bytes must be >= 8")
        if self.idle_timeout_s <= 0 or self.first_message_s <= 0:
            raise ValueError("idle_timeout_s and first_message_s must be > 0")


NAME_SERVER_LIMITS = ServerLimits(max_buffered_total=32 * MIB)
"""A name server's requests are small (a broker's registration, its topic table, is
the largest); 32 MiB of partial frames is room for many brokers registering at once."""


HA_LIMITS = ServerLimits(
    max_connections=32,
    max_frame_bytes=MIB,
    max_buffered_total=MIB,
    idle_timeout_s=20.0,
    first_message_s=10.0,
)
"""The HA master's (``mqstore.ha.master``): a slave's messages are 8-byte reports (a
handshake proof first, with a secret), so a connection holds at most 7 bytes of a
partial one and a read takes at most ``max_frame_bytes`` (RocketMQ's 1 MiB read
buffer); a link silent for ``idle_timeout_s`` is closed (RocketMQ's
``haHousekeepingInterval``, 20 s; the store's ``ha_housekeeping_interval_ms`` sets
it), one that sent no report (or proof) within ``first_message_s`` too; at most
``max_connections`` links at once (RocketMQ brokers have one to a few slaves; each
link holds two threads), a connection past them taking the place of the oldest that
has not reported yet, else closed."""


class Closable(Protocol):
    """A connection that can be closed at once."""

    def abort(self) -> None:
        """Close it now, dropping what it holds."""
        ...


class PartialFrames:
    """The bytes of unfinished frames held by one server's connections; loop thread
    only. Each connection reports its decoder's ``buffered`` after every read (once it
    has decoded what it could) and ``0`` when it closes.

    When the total passes the limit, the connections holding the most are closed until
    it is back within: a flood of half-written frames loses its own connections, while
    a client whose small request happened to arrive at that moment keeps its own.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._held: dict[Closable, int] = {}
        self._closing: set[Closable] = set()

    def account(self, conn: Closable, buffered: int) -> int:
        """Record that ``conn`` now holds ``buffered`` bytes; returns how many
        connections were closed (``abort()``) to keep the total within the limit."""
        if buffered == 0:
            self._closing.discard(conn)
        elif conn in self._closing:
            return 0  # closed already: its share was released then
        self.total += buffered - self._held.get(conn, 0)
        if buffered:
            self._held[conn] = buffered
        else:
            self._held.pop(conn, None)
        closed = 0
        while self.total > self.limit:
            victim = max(self._held, key=self._held.__getitem__)
            self.total -= self._held.pop(victim)
            self._closing.add(victim)
            victim.abort()
            closed += 1
        return closed


class Idle(Protocol):
    """What :func:`close_idle` needs of a connection."""

    last_active: float
    """``time.monotonic()`` of its last read or write."""

    @property
    def busy(self) -> bool:
        """True while a request of it is running or suspended."""
        ...

    def abort(self) -> None:
        """Close it now."""
        ...


async def close_idle(
    connections: Callable[[], Iterable[Idle]], timeout_s: float, what: str
) -> None:
    """Close, for ever, the connections idle for ``timeout_s`` and not busy, checking
    a few times per timeout (cancel the task to stop)."""
    while True:
        await asyncio.sleep(min(timeout_s / 4, 5.0))
        deadline = time.monotonic() - timeout_s
        for conn in list(connections()):
            if conn.last_active < deadline and not conn.busy:
                log.info("%s: closing a connection idle for %.0f s", what, timeout_s)
                conn.abort()
