"""The HA slave: replicates a master's CommitLog into this store (RocketMQ ``HAClient``).

One thread runs *sessions*. A session connects to ``master_address``, builds a
:class:`~mqstore.ha.protocol.SlaveConnection` at the log's max offset, reports that offset
at once, then loops: read (at most 4 MiB, 100 ms timeout), append the bytes of every
:class:`~mqstore.ha.protocol.Transfer` at exactly their offset (``append_raw_at``), whole
records at a time (:mod:`mqstore.ha.continuity`: a record cut by a frame's end waits for
the next frame), report the log's new max offset after each batch of appends and at
least every ``heartbeat_interval_ms`` (5 s). It ends when the master closes, the socket breaks, or
nothing arrived for ``housekeeping_interval_ms`` (20 s); the next session starts
``reconnect_interval_ms`` (5 s) later.

Divergence stops replication for good. A frame the protocol refuses (an offset that
is not our end, a bad header) or bytes that do not continue our log's records
(:mod:`mqstore.ha.continuity`) mean the two logs differ: the error is logged, kept in
:attr:`HASlave.last_error`, :attr:`HASlave.diverged` becomes True and the thread
stops, before the bytes are appended. An operator decides what to keep.

Acks mean "appended to the page cache": the slave's flush service makes them durable
like any other write. Writes by producers are refused by the store (SLAVE role).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from mqstore.commitlog.commitlog import RollFailed
from mqstore.failures import FailureCounter
from mqstore.ha import transport
from mqstore.ha.continuity import DivergenceError, LogContinuity
from mqstore.ha.handshake import CHALLENGE_SIZE, SlaveHandshake
from mqstore.ha.protocol import (
    MAX_TRANSFER,
    NEED_DATA,
    ConnectionClosed,
    RemoteProtocolError,
    ReportOffset,
    SlaveConnection,
    Transfer,
)

log = logging.getLogger("mqstore.ha.slave")

READ_BUFFER = 4 << 20
"""Largest read from the master socket (RocketMQ's slave read buffer, 4 MiB)."""


class LogSink(Protocol):
    """What the slave writes to: the CommitLog's end and raw appends (CommitLog fits)."""

    @property
    def max_offset(self) -> int: ...

    @property
    def file_size(self) -> int: ...

    def append_raw_at(self, offset: int, data: bytes | memoryview) -> None: ...


class _SessionEnded(Exception):
    """A session ended for a reason worth recording (then the slave reconnects)."""


class HASlave:
    """Keeps this store's CommitLog a copy of the master's, reconnecting after failures.

    Args:
        log: the CommitLog, freshly recovered (its max offset is a record boundary).
        master_address: ``"HOST:PORT"`` of the master's HA port.
        heartbeat_interval_ms, housekeeping_interval_ms: docs/protocol.md §2.2 and §2.5.
        reconnect_interval_ms: wait after a failed or closed session (RocketMQ: 5 s).
        secret: the master's HA secret, answered in the handshake of
            :mod:`mqstore.ha.handshake` (our addition; only for a master that has one).

    ``start()``/``stop()``; the status properties are safe to read from any thread.
    """

    def __init__(
        self,
        log: LogSink,
        master_address: str,
        *,
        heartbeat_interval_ms: int = 5_000,
        housekeeping_interval_ms: int = 20_000,
        reconnect_interval_ms: int = 5_000,
        connect_timeout_ms: int = 3_000,
        max_transfer: int = MAX_TRANSFER,
        secret: bytes | None = None,
    ) -> None:
        self.log = log
        self._secret = secret or None
        self.master_address = master_address
        self._host, self._port = transport.parse_address(master_address)
        self._heartbeat = heartbeat_interval_ms / 1000.0
        self._housekeeping = housekeeping_interval_ms / 1000.0
        self._reconnect = reconnect_interval_ms / 1000.0
        self._connect_timeout = connect_timeout_ms / 1000.0
        self._max_transfer = max_transfer
        self._continuity = LogContinuity(log.file_size, None)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._channel: transport.Channel | None = None
        self.sessions = 0
        self.last_error: str | None = None
        self.diverged = False
        self.received_bytes = 0
        self.failures = FailureCounter(logging.getLogger(__name__), "ha-slave")
        """Sessions ended by an unexpected exception (kind ``session``); each reconnects."""

    # ------------------------------------------------------------- lifecycle

    def start(self) -> HASlave:
        """Start the replication thread; returns self."""
        self._thread = threading.Thread(target=self._run, name="ha-slave", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Close the session and join the thread (it appends nothing after this returns)."""
        self._stopped.set()
        channel = self._channel
        if channel is not None:
            channel.close()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def connected(self) -> bool:
        """True while a session's socket is open."""
        channel = self._channel
        return channel is not None and not channel.closed

    @property
    def running(self) -> bool:
        """True until stopped or diverged."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def replica_wait(self) -> None:
        """A slave never makes puts wait (it refuses them)."""
        return None

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._session()
            except (DivergenceError, RemoteProtocolError, ValueError) as e:
                self.diverged = True
                self.last_error = f"replication stopped: {e}"
                log.error(
                    "HA slave of %s: %s; this slave no longer replicates, its log is "
                    "left as it was (max offset %d)",
                    self.master_address, e, self.log.max_offset,
                )  # fmt: skip
                return
            except (OSError, RollFailed, _SessionEnded) as e:
                if self._stopped.is_set():
                    return
                self.last_error = f"session with {self.master_address} ended: {e}"
                log.warning("HA slave: %s; retry in %.1f s", self.last_error, self._reconnect)
            except Exception as e:  # a bug in one session: count it, reconnect like any end
                if self._stopped.is_set():
                    return
                self.failures.record("session", e, self.master_address)
                self.last_error = f"session with {self.master_address} failed: {e!r}"
            self._stopped.wait(self._reconnect)

    # --------------------------------------------------------------- session

    def _session(self) -> None:
        channel = transport.connect(self._host, self._port, self._connect_timeout)
        self._channel = channel
        if self._stopped.is_set():  # stop() raced with connect: do not start
            channel.close()
            return
        self.sessions += 1
        try:
            self._replicate(channel)
        finally:
            channel.close()

    def _replicate(self, channel: transport.Channel) -> None:
        end = self.log.max_offset  # a record boundary: held-back bytes are dropped
        self._continuity.reset(end or None)
        conn = SlaveConnection(end, file_size=self.log.file_size, max_transfer=self._max_transfer)
        log.info("HA slave connected to %s at offset %d", channel.peer, end)
        if self._secret is not None:
            self._answer_challenge(channel, self._secret)
        channel.send_all(conn.send(ReportOffset(end)))
        last_report = last_read = time.monotonic()
        frames = 0
        while not self._stopped.is_set():
            data = channel.recv(READ_BUFFER)
            now = time.monotonic()
            if data is None:
                if now - last_read > self._housekeeping:
                    raise _SessionEnded(f"the master sent nothing for {now - last_read:.1f} s")
            elif not data:
                raise _SessionEnded(self._closed_reason(frames, conn.end_offset))
            else:
                last_read = now
                conn.receive_data(data)
                frames += self._apply(conn)
            end = self.log.max_offset
            if end > (conn.last_reported_offset or 0) or now - last_report >= self._heartbeat:
                channel.send_all(conn.send(ReportOffset(end)))
                last_report = now

    def _answer_challenge(self, channel: transport.Channel, secret: bytes) -> None:
        """Rule H3 of :mod:`mqstore.ha.handshake`: read the challenge, send the proof."""
        hs = SlaveHandshake(secret)
        deadline = time.monotonic() + self._housekeeping
        while True:
            data = channel.recv(CHALLENGE_SIZE)
            if data is None:
                if time.monotonic() > deadline:
                    raise _SessionEnded("the master sent no HA challenge")
                continue
            if not data:
                raise _SessionEnded("the master closed during the HA handshake")
            proof = hs.receive_data(data)
            if proof is not None:
                channel.send_all(proof)
                return

    def _apply(self, conn: SlaveConnection) -> int:
        """Append every complete Transfer in the buffer; return how many frames were read."""
        frames = 0
        while True:
            event = conn.next_event()
            if event is NEED_DATA:
                return frames
            frames += 1
            if isinstance(event, Transfer):
                at, data = self._continuity.feed(event.physical_offset, event.payload)
                if data:
                    self.log.append_raw_at(at, data)
                self.received_bytes += len(event.payload)
            elif isinstance(event, ConnectionClosed):  # pragma: no cover - EOF is not fed
                raise _SessionEnded("the master closed the connection")

    def _closed_reason(self, frames: int, offset: int) -> str:
        if frames:
            return "the master closed the connection"
        return (
            f"the master closed the connection after our report of offset {offset} without "
            "sending a frame (a master refuses a slave holding more data than itself: "
            "diverging logs? its log says why)"
        )

    def __repr__(self) -> str:
        state = "diverged" if self.diverged else "connected" if self.connected else "idle"
        return f"HASlave({self.master_address}, {state}, offset={self.log.max_offset})"


__all__ = ["DivergenceError", "HASlave", "LogSink"]
