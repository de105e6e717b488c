"""HA transport: TCP sockets for the replication protocol, and nothing else.

This module opens, reads, writes and closes sockets; it never looks inside the bytes
(:mod:`mqstore.ha.protocol` parses them) and never touches the CommitLog (the master and
slave services do). Sockets are blocking with a timeout, one reader and one writer
thread per :class:`Channel` at most, ``TCP_NODELAY`` on both ends (docs/protocol.md
§2.1), and every read is bounded by the caller's ``max_bytes``.
"""

from __future__ import annotations

import contextlib
import socket
import threading

READ_TIMEOUT_S = 0.1
"""How long one ``recv`` blocks before returning None, so loops can check deadlines."""


def parse_address(address: str) -> tuple[str, int]:
    """Split ``"HOST:PORT"`` (``"[::1]:10912"`` for IPv6) into host and port.

    >>> parse_address("127.0.0.1:10912")
    ('127.0.0.1', 10912)

    Raises:
        ValueError: no port, or a port outside 1..65535.
    """
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"HA address must be HOST:PORT, got {address!r}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"HA port out of range in {address!r}")
    return host.strip("[]"), port


class Listener:
    """A listening TCP socket whose ``accept`` gives up every :data:`READ_TIMEOUT_S`.

    Args:
        host, port: where to bind (port 0: the OS picks one; see :attr:`port`).

    Raises:
        OSError: the address is in use or not ours.
    """

    def __init__(self, host: str, port: int, backlog: int = 16) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(backlog)
            sock.settimeout(READ_TIMEOUT_S)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self.port: int = sock.getsockname()[1]

    def accept(self) -> Channel | None:
        """The next connection as a :class:`Channel`; None when none came in time.

        Raises:
            OSError: the listening socket was closed.
        """
        try:
            sock, _ = self._sock.accept()
        except TimeoutError:
            return None
        return Channel(sock)

    def close(self) -> None:
        """Stop listening (idempotent)."""
        self._sock.close()


def connect(host: str, port: int, timeout: float = 3.0) -> Channel:
    """Connect to ``host:port`` within ``timeout`` seconds.

    Raises:
        OSError: refused, unreachable or timed out.
    """
    return Channel(socket.create_connection((host, port), timeout=timeout))


class Channel:
    """One connected TCP socket: bounded timed reads, whole writes, idempotent close.

    Thread-safety: one thread may read while another writes; ``close`` may be called
    from any thread and makes a blocked ``recv`` return ``b""`` (or raise OSError).
    """

    def __init__(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(READ_TIMEOUT_S)
        self._sock = sock
        self._closed = threading.Event()
        try:
            self.peer = "%s:%d" % sock.getpeername()[:2]  # noqa: UP031 - (host, port, ...)
        except OSError:
            self.peer = "?"

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed.is_set()

    def recv(self, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` bytes; ``b""`` when the peer closed; None on timeout.

        Raises:
            OSError: the connection broke (reset) or was closed locally.
        """
        try:
            return self._sock.recv(max_bytes)
        except TimeoutError:
            return None

    def send_all(self, data: bytes) -> None:
        """Write every byte of ``data`` (retrying through timeouts while open).

        Raises:
            OSError: the connection broke or was closed.
        """
        view = memoryview(data)
        while view:
            if self.closed:
                raise ConnectionAbortedError(f"channel to {self.peer} is closed")
            try:
                sent = self._sock.send(view)
            except TimeoutError:
                continue
            view = view[sent:]

    def close(self) -> None:
        """Shut down both directions and close; safe to call twice or concurrently."""
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    def __repr__(self) -> str:
        return f"Channel({self.peer}{', closed' if self.closed else ''})"


__all__ = ["READ_TIMEOUT_S", "Channel", "Listener", "connect", "parse_address"]
