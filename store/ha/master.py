"""The HA master: accepts slaves and streams the CommitLog to them (RocketMQ ``HAService``).

One :class:`HAMaster` listens on the HA port (``ha_bind_host:ha_listen_port``; 10912,
127.0.0.1 by default). Each accepted slave gets a :class:`SlaveLink` (RocketMQ
``HAConnection``) with two threads around one :class:`~mqstore.ha.protocol.MasterConnection`:

* the *reader* feeds the slave's reports to the protocol. The first report fixes the
  stream's start (``start_offset``: a slave at 0 starts at the master's last file);
  every report is an ack handed to :class:`~mqstore.ha.group_transfer.GroupTransfer`.
  No bytes for ``housekeeping_interval_ms`` (20 s) closes the connection.
* the *writer* sends :class:`~mqstore.ha.protocol.Transfer` frames from the CommitLog
  (:func:`~mqstore.ha.protocol.chunk` sizes: at most 32 KiB, never across a file) for as
  long as the log is ahead of the slave, then waits to be woken (a SYNC_MASTER put
  wakes it) or polls every ``poll_interval_ms``; after ``heartbeat_interval_ms`` (5 s)
  without writing it sends a Heartbeat.

Bounds (:data:`~mqstore.limits.HA_LIMITS`, the :class:`~mqstore.limits.ServerLimits`
every server shares; docs/limits.md): reads of at most ``max_frame_bytes``; the bytes
of partial reports over all links within ``max_buffered_total``; a link silent for
``idle_timeout_s`` (the housekeeping interval) closed, and one that sent no first
report (or handshake proof) within ``first_message_s``; at most ``max_connections``
links, a connection past them taking the place of the oldest link that has not
reported yet (a reconnecting slave is not locked out by idle connections), else
closed at accept.

Any protocol error or socket error closes that one link (logged, kept in
``last_error``); the slave reconnects on its own. Nothing here parses bytes or
touches sockets directly: that is :mod:`mqstore.ha.protocol` and :mod:`mqstore.ha.transport`.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from mqstore.failures import FailureCounter
from mqstore.ha import transport
from mqstore.ha.group_transfer import GroupTransfer
from mqstore.ha.handshake import PROOF_SIZE, HandshakeState, MasterHandshake
from mqstore.ha.protocol import (
    MAX_TRANSFER,
    NEED_DATA,
    ConnectionClosed,
    Heartbeat,
    MasterConnection,
    ProtocolError,
    ReportOffset,
    Transfer,
)
from mqstore.limits import HA_LIMITS, PartialFrames, ServerLimits
from mqstore.status import PutStatus

log = logging.getLogger("mqstore.ha.master")

READ_BUFFER = HA_LIMITS.max_frame_bytes
"""Largest read from a slave socket (RocketMQ's master read buffer, 1 MiB)."""


MAX_LINKS = HA_LIMITS.max_connections
"""Most slave connections served at once (``HA_LIMITS.max_connections``)."""


class LogSource(Protocol):
    """What the master reads: the CommitLog's offsets and bytes (CommitLog fits)."""

    @property
    def max_offset(self) -> int: ...

    @property
    def min_offset(self) -> int: ...

    @property
    def file_size(self) -> int: ...

    def read(self, offset: int, size: int) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class LinkInfo:
    """A snapshot of one slave connection, for status displays and tests."""

    peer: str
    slave_request_offset: int | None
    slave_ack_offset: int | None
    next_transfer_offset: int | None
    sent_bytes: int


class _LinkError(Exception):
    """Ends a link with a reason (not a protocol error: e.g. data no longer held)."""


class SlaveLink:
    """One slave connection: a reader and a writer thread sharing a MasterConnection."""

    def __init__(self, channel: transport.Channel, master: HAMaster) -> None:
        self.channel = channel
        self._master = master
        self._log = master.log
        self._conn = MasterConnection(max_transfer=master.max_transfer)
        self._lock = threading.Lock()  # guards self._conn (protocol objects are not thread-safe)
        self._started = threading.Event()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self.sent_bytes = 0
        self.opened = time.monotonic()
        self.authenticated = master.secret is None
        """False until the slave passed the handshake (always True without a secret)."""
        self._threads = [
            threading.Thread(target=self._guard, args=(self._read_loop,), daemon=True,
                             name=f"ha-read-{channel.peer}"),
            threading.Thread(target=self._guard, args=(self._write_loop,), daemon=True,
                             name=f"ha-write-{channel.peer}"),
        ]  # fmt: skip

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def wakeup(self) -> None:
        """Make an idle writer look at the log now."""
        self._wake.set()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def reported(self) -> bool:
        """True once the slave's first report arrived (the stream started)."""
        return self._started.is_set()

    def abort(self) -> None:
        """Close the link now: its partial reports passed the server's total
        (:class:`~mqstore.limits.PartialFrames`)."""
        self.close(f"closed {self.channel.peer}: partial frames over the server's limit")

    def info(self) -> LinkInfo:
        with self._lock:
            c = self._conn
            return LinkInfo(
                self.channel.peer,
                c.slave_request_offset,
                c.slave_ack_offset,
                c.next_transfer_offset,
                self.sent_bytes,
            )

    def close(self, reason: str | None = None) -> None:
        """Close the socket and stop both threads (they exit within a poll interval)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake.set()
        self.channel.close()
        self._master.account(self, 0)
        self._master._link_closed(self, reason)

    def join(self, timeout: float) -> None:
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout)

    def _guard(self, loop: Callable[[], None]) -> None:
        try:
            loop()
        except ProtocolError as e:  # logged once, by the master's _note_error
            self.close(f"protocol error from {self.channel.peer}: {e}")
        except _LinkError as e:
            self.close(str(e))
        except OSError as e:
            self.close(None if self.closed else f"socket error with {self.channel.peer}: {e}")
        except Exception as e:  # a bug on this link: close it (it still holds a slot), go on
            self._master.failures.record("link", e, self.channel.peer)
            self.close(f"link to {self.channel.peer} failed: {type(e).__name__}: {e}")

    # ------------------------------------------------------------------ reader

    def _authenticate(self) -> bytes | None:
        """Run the handshake (Rules H1, H2 of :mod:`mqstore.ha.handshake`) when the
        master has a secret; the bytes read past the proof, or None if the link closed."""
        assert self._master.secret is not None
        hs = MasterHandshake(self._master.secret)
        self.channel.send_all(hs.challenge())
        deadline = self.opened + self._master.first_report
        while hs.state is HandshakeState.PENDING:
            if self._closed.is_set():
                return None
            data = self.channel.recv(PROOF_SIZE)
            if data is None:
                if time.monotonic() > deadline:
                    raise _LinkError(f"slave {self.channel.peer} sent no HA handshake proof")
                continue
            if not data:
                raise _LinkError(f"slave {self.channel.peer} closed during the HA handshake")
            hs.receive_data(data)
        if hs.state is HandshakeState.REFUSED:
            raise _LinkError(f"refused slave {self.channel.peer}: wrong HA secret")
        self.authenticated = True
        return hs.leftover

    def _read_loop(self) -> None:
        housekeeping = self._master.housekeeping_interval
        if self._master.secret is not None:
            leftover = self._authenticate()
            if leftover is None:
                return
            if leftover:
                with self._lock:
                    self._conn.receive_data(leftover)
        last_read = time.monotonic()
        first_report_by = self.opened + self._master.first_report
        read_size = self._master.limits.max_frame_bytes
        while not self._closed.is_set():
            data = self.channel.recv(read_size)
            now = time.monotonic()
            if data is None:
                if now - last_read > housekeeping:
                    raise _LinkError(
                        f"housekeeping: no report from {self.channel.peer} for "
                        f"{now - last_read:.1f} s (limit {housekeeping:.1f} s)"
                    )
                if not self.reported and now > first_report_by:
                    raise _LinkError(
                        f"{self.channel.peer} sent no report within "
                        f"{self._master.first_report:.1f} s of connecting"
                    )
                continue
            last_read = now
            if not data:
                self.close()  # the slave closed its side
                return
            with self._lock:
                self._conn.receive_data(data)
                event = self._conn.next_event()
            while event is not NEED_DATA:
                if isinstance(event, ConnectionClosed):
                    self.close()
                    return
                if isinstance(event, ReportOffset):
                    self._on_report(event.offset)
                with self._lock:
                    event = self._conn.next_event()
            with self._lock:
                buffered = self._conn.buffered
            self._master.account(self, buffered)

    def _on_report(self, offset: int) -> None:
        if not self.authenticated:  # unreachable: reports are read only after the proof
            raise _LinkError(f"report from unauthenticated slave {self.channel.peer}")
        if not self._started.is_set():
            with self._lock:
                start = self._conn.start_offset(self._log.max_offset, self._log.file_size)
            log.info("slave %s reported %d; streaming from %d", self.channel.peer, offset, start)
            self._started.set()
        self._master.group.notify_ack(offset)

    # ------------------------------------------------------------------ writer

    def _write_loop(self) -> None:
        while not self._started.wait(transport.READ_TIMEOUT_S):
            if self._closed.is_set():
                return
        m = self._master
        file_size = self._log.file_size
        last_write = time.monotonic()
        while not self._closed.is_set():
            nxt = self._conn.next_transfer_offset
            assert nxt is not None
            end = self._log.max_offset
            if nxt < end:
                length = min(end - nxt, m.max_transfer, file_size - nxt % file_size)
                self._send_transfer(nxt, length)
                last_write = time.monotonic()
                continue
            if time.monotonic() - last_write >= m.heartbeat_interval:
                with self._lock:
                    frame = self._conn.send(Heartbeat(nxt))
                self.channel.send_all(frame)
                last_write = time.monotonic()
            self._wake.wait(m.poll_interval)
            self._wake.clear()

    def _send_transfer(self, offset: int, length: int) -> None:
        data = self._log.read(offset, length)
        if data is None:
            raise _LinkError(
                f"slave {self.channel.peer} needs offset {offset} but the master's log now "
                f"holds [{self._log.min_offset}, {self._log.max_offset}): that data was deleted"
            )
        with self._lock:
            frame = self._conn.send(Transfer(offset, data))
        self.channel.send_all(frame)
        self.sent_bytes += length


class HAMaster:
    """Serves slaves on one listening socket; owns the links and the replica waits.

    Args:
        log: the CommitLog (or anything with its offsets and ``read``).
        host, port: where to listen (port 0: the OS picks; see :attr:`port`).
        sync: True for SYNC_MASTER: :attr:`replica_wait` is then the put-path hook.
        heartbeat_interval_ms, housekeeping_interval_ms, slave_timeout_ms,
        fallbehind_max: docs/protocol.md §2.2-2.6 (``haSendHeartbeatInterval``,
            ``haHousekeepingInterval``, ``slaveTimeout``, ``haSlaveFallbehindMax``).
        poll_interval_ms: how often an idle writer looks for new data unprompted.
        secret: when set, a slave must pass the handshake of
            :mod:`mqstore.ha.handshake` before anything is streamed or acked (our
            addition; RocketMQ slaves cannot, so leave it unset for them).
        allowed_hosts: when set, connections from other peer addresses are closed at
            accept.
        limits: the connection bounds (module docstring; :data:`HA_LIMITS`).
            ``housekeeping_interval_ms`` and ``max_links``, when given, replace its
            ``idle_timeout_s`` and ``max_connections``; the first report is awaited
            at least two heartbeat intervals (a RocketMQ slave reports once per
            ``haSendHeartbeatInterval``).

    Thread-safe. ``start()`` binds (raising OSError if the port is taken);
    ``stop()`` closes every link and joins the threads.
    """

    def __init__(
        self,
        log: LogSource,
        *,
        host: str = "127.0.0.1",
        port: int = 10912,
        sync: bool = False,
        heartbeat_interval_ms: int = 5_000,
        housekeeping_interval_ms: int | None = None,
        slave_timeout_ms: int = 3_000,
        fallbehind_max: int = 256 * 1024 * 1024,
        poll_interval_ms: int = 10,
        max_transfer: int = MAX_TRANSFER,
        max_links: int | None = None,
        secret: bytes | None = None,
        allowed_hosts: frozenset[str] | None = None,
        limits: ServerLimits = HA_LIMITS,
    ) -> None:
        if housekeeping_interval_ms is not None:
            limits = dataclasses.replace(limits, idle_timeout_s=housekeeping_interval_ms / 1000)
        if max_links is not None:
            limits = dataclasses.replace(limits, max_connections=max_links)
        self.limits = limits
        self.log = log
        self.secret = secret or None
        self.allowed_hosts = allowed_hosts
        self.max_links = limits.max_connections
        """Links at once (``limits.max_connections``; settable, for tests)."""
        self.host = host
        self._requested_port = port
        self.sync = sync
        self.heartbeat_interval = heartbeat_interval_ms / 1000.0
        self.housekeeping_interval = limits.idle_timeout_s
        self.first_report = max(limits.first_message_s, 2 * heartbeat_interval_ms / 1000.0)
        """Seconds a new link has for its first report (or handshake proof)."""
        self.partial = PartialFrames(limits.max_buffered_total)
        self._partial_lock = threading.RLock()  # abort() re-enters through close()
        self.poll_interval = poll_interval_ms / 1000.0
        self.max_transfer = max_transfer
        self._links: list[SlaveLink] = []
        self._links_lock = threading.Lock()
        self.failures = FailureCounter(logging.getLogger(__name__), "ha-master")
        """Links closed by an unexpected exception of their threads (kind ``link``)."""
        self.group = GroupTransfer(
            timeout_ms=slave_timeout_ms,
            fallbehind_max=fallbehind_max,
            connections=self.connection_count,
            wake_writers=self.wakeup,
        )
        self._server: transport.Listener | None = None
        self._stopped = threading.Event()
        self._acceptor: threading.Thread | None = None
        self.port = 0
        self.accepted = 0
        self.errors: deque[str] = deque(maxlen=50)

    # ------------------------------------------------------------- lifecycle

    def start(self) -> HAMaster:
        """Bind and start accepting; returns self.

        Raises:
            OSError: the address is in use or not available.
        """
        self._server = transport.Listener(self.host, self._requested_port)
        self.port = self._server.port
        self._acceptor = threading.Thread(target=self._accept_loop, name="ha-accept", daemon=True)
        self._acceptor.start()
        log.info("HA master listening on %s:%d", self.host, self.port)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close every link, join the threads."""
        self._stopped.set()
        if self._acceptor is not None:
            self._acceptor.join(timeout)
            self._acceptor = None
        if self._server is not None:
            self._server.close()
            self._server = None
        for link in self._snapshot():
            link.close()
            link.join(timeout)

    def _accept_loop(self) -> None:
        assert self._server is not None
        while not self._stopped.is_set():
            try:
                channel = self._server.accept()
            except OSError as e:  # the listening socket broke: nothing more to accept
                self._note_error(f"accept failed on port {self.port}: {e}")
                return
            if channel is None:
                continue
            host = channel.peer.rsplit(":", 1)[0].strip("[]")
            if self.allowed_hosts is not None and host not in self.allowed_hosts:
                channel.close()
                self._note_error(f"refused {channel.peer}: not an allowed slave address")
                continue
            if not self._make_room():  # each link costs two threads: a flood may not
                channel.close()
                self._note_error(f"refused {channel.peer}: {self.max_links} slaves connected")
                continue
            link = SlaveLink(channel, self)
            with self._links_lock:
                self._links.append(link)
                self.accepted += 1
            log.info("slave connected from %s", channel.peer)
            link.start()

    # ---------------------------------------------------------------- links

    def _make_room(self) -> bool:
        """Whether a new link may be added: fewer than :attr:`max_links` are open, or
        the oldest that has not reported yet was closed to make room (idle or
        half-written connections cannot lock a reconnecting slave out)."""
        with self._links_lock:
            if len(self._links) < self.max_links:
                return True
            silent = [link for link in self._links if not link.reported]
        if not silent:
            return False
        oldest = min(silent, key=lambda link: link.opened)
        oldest.close(f"closed {oldest.channel.peer}: no report yet and {self.max_links} links open")
        return True

    def account(self, link: SlaveLink, buffered: int) -> None:
        """Record the partial-report bytes ``link`` holds (0 when it closes); links
        are closed while the total is over ``limits.max_buffered_total``."""
        with self._partial_lock:
            self.partial.account(link, buffered)

    def _snapshot(self) -> list[SlaveLink]:
        with self._links_lock:
            return list(self._links)

    def _link_closed(self, link: SlaveLink, reason: str | None) -> None:
        with self._links_lock:
            if link in self._links:
                self._links.remove(link)
        if reason is not None:
            self._note_error(reason)
        else:
            log.info("slave %s disconnected", link.channel.peer)

    def _note_error(self, reason: str) -> None:
        self.errors.append(reason)
        log.warning("HA master: %s", reason)

    @property
    def last_error(self) -> str | None:
        """The most recent reason a link was closed abnormally, if any."""
        return self.errors[-1] if self.errors else None

    def connection_count(self) -> int:
        """Slaves connected now (past the handshake, when there is one)."""
        with self._links_lock:
            return sum(1 for link in self._links if link.authenticated)

    def links(self) -> list[LinkInfo]:
        """A snapshot of every connected slave."""
        return [link.info() for link in self._snapshot()]

    def wakeup(self) -> None:
        """Wake every idle writer (called when data was appended)."""
        for link in self._snapshot():
            link.wakeup()

    def disconnect_all(self) -> int:
        """Close every slave connection from this side; return how many (fault tests)."""
        links = self._snapshot()
        for link in links:
            link.close()
        return len(links)

    # --------------------------------------------------------- replica waits

    @property
    def push_to_slave_max_offset(self) -> int:
        """The highest offset any slave acknowledged."""
        return self.group.push_to_slave_max_offset

    def wait_for_replica(self, next_offset: int) -> PutStatus:
        """SYNC_MASTER wait: see :mod:`mqstore.ha.group_transfer` for the statuses."""
        return self.group.wait_for_replica(next_offset)

    @property
    def replica_wait(self) -> Callable[[int], PutStatus] | None:
        """The put-path hook: :meth:`wait_for_replica` for a SYNC_MASTER, else None."""
        return self.wait_for_replica if self.sync else None

    @property
    def address(self) -> str:
        """``host:port`` actually bound."""
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"HAMaster({self.address}, slaves={self.connection_count()})"


__all__ = ["HAMaster", "LinkInfo", "LogSource", "SlaveLink"]
