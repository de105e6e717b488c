"""A synchronous, thread-safe RocketMQ remoting client: the socket side of the codec.

:mod:`mqstore.remoting.codec` knows the bytes; this module owns the sockets and
threads around it, as RocketMQ's ``NettyRemotingClient`` does:

- **One TCP connection per address**, shared by every caller thread. Requests are
  numbered with a process-wide opaque counter; each connection keeps a table
  opaque -> waiting call, and a reader thread matches responses to calls.
- **invoke** (request/response) blocks the calling thread until the response arrives
  or the timeout passes (:class:`TransportError`); **invoke_async** writes and returns
  a handle, and the response (or the connection's failure) is handed to a callback on
  the reader thread (RocketMQ's ``invokeAsync``: how one pull thread keeps many long
  polls outstanding); the caller owns the timeout (``handle.cancel()``);
  **invoke_oneway** writes and returns (flag bit 1, no response expected).
- **Broker-originated requests** (``NOTIFY_CONSUMER_IDS_CHANGED`` and any other
  request the broker sends) go to the ``request_handler``, called on the reader
  thread. It must return quickly; for a request that is not oneway its answer is
  written back, and with no answer the client replies ``REQUEST_CODE_NOT_SUPPORTED``
  as the Java client does for unknown codes.
- **Failure**: when a connection breaks (EOF, reset, bytes that are not frames) every
  call waiting on it fails at once with :class:`TransportError` (not after its
  timeout), and the connection is dropped; the next call to that address dials a new
  one. Nothing is retried here: whether a request may be repeated is the caller's
  decision (a send may not be idempotent).

Thread-safety: every public method may be called from any thread. Writes to a socket
are serialised by a per-connection lock so frames never interleave.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Final

from mqstore.client.acl_hook import RpcHook
from mqstore.client.transport import TransportError
from mqstore.closeable import Closeable
from mqstore.remoting.codec import (
    FrameDecoder,
    ProtocolError,
    RemotingCommand,
    encode_head,
)
from mqstore.remoting.codes import LanguageCode, RemotingFlag, ResponseCode

log = logging.getLogger(__name__)

RequestHandler = Callable[[str, RemotingCommand], RemotingCommand | None]
"""Handler of a broker-originated request: ``(address, request) -> response or None``."""

ResponseCallback = Callable[[RemotingCommand | None, TransportError | None], None]
"""Completion of an async call: ``(response, None)`` or ``(None, error)``, called once,
on the connection's reader thread (or the caller's, if the write fails); it must be
quick and must not wait for another response."""

_RECV_SIZE: Final = 256 * 1024
_COALESCE_BELOW: Final = 64 * 1024


def parse_address(addr: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``; IPv6 hosts may be bracketed.

    Raises:
        ValueError: no port, or a port that is not a number.
    """
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    return host.strip("[]"), int(port)


class _Call:
    """One outstanding request: the caller sleeps on ``done`` until the reader sets it,
    or (async) the reader calls ``callback``."""

    __slots__ = ("callback", "done", "error", "response")

    def __init__(self, callback: ResponseCallback | None = None) -> None:
        self.done = threading.Lock()
        self.done.acquire()  # released once, by whoever completes the call
        self.response: RemotingCommand | None = None
        self.error: TransportError | None = None
        self.callback = callback

    def complete(self, response: RemotingCommand | None, error: TransportError | None) -> None:
        """Hand the outcome to the waiting caller or to the callback (exactly once:
        whoever popped the call from the table calls this)."""
        if self.callback is None:
            self.response, self.error = response, error
            self.done.release()
            return
        try:
            self.callback(response, error)
        except Exception:  # a callback bug must not kill the reader
            log.exception("response callback failed")


class AsyncCall:
    """Handle of an outstanding :meth:`RemotingClient.invoke_async` request."""

    __slots__ = ("_conn", "_opaque")

    def __init__(self, conn: _Connection, opaque: int) -> None:
        self._conn = conn
        self._opaque = opaque

    def cancel(self) -> bool:
        """Forget the request (its response, if any, is dropped); False if it already
        completed. The callback is not called."""
        return self._conn.forget(self._opaque)


class _Connection:
    """One socket, its reader thread and its table of outstanding calls."""

    def __init__(
        self, addr: str, sock: socket.socket, handler: RequestHandler | None, language: LanguageCode
    ) -> None:
        self.addr = addr
        self._sock = sock
        self.handler = handler
        self._language = language
        self._write_lock = threading.Lock()
        self._calls: dict[int, _Call] = {}
        self._calls_lock = threading.Lock()
        self.closed = False
        self._reader = threading.Thread(
            target=self._read_loop, name=f"remoting-reader-{addr}", daemon=True
        )
        self._reader.start()

    # ----------------------------------------------------------------- writing

    def write(self, cmd: RemotingCommand) -> None:
        """Write one frame; a socket error closes the connection and raises."""
        try:
            head = encode_head(cmd)
        except ProtocolError as e:
            raise TransportError(f"cannot encode request code {cmd.code}: {e}") from e
        with self._write_lock:
            if self.closed:
                raise TransportError(f"connection to {self.addr} is closed")
            try:
                if len(cmd.body) < _COALESCE_BELOW:  # one segment: no Nagle/ACK stall
                    self._sock.sendall(head + cmd.body)
                else:  # large body: two writes beat copying megabytes
                    self._sock.sendall(head)
                    self._sock.sendall(cmd.body)
            except OSError as e:
                self._fail(TransportError(f"write to {self.addr} failed: {e}"))
                raise TransportError(f"write to {self.addr} failed: {e}") from e

    def _send(self, cmd: RemotingCommand, pending: _Call) -> None:
        """Enter ``pending`` in the call table under the request's opaque, then write
        the request; a failed write takes the entry out again before raising.

        Raises:
            TransportError: the connection is closed or the write failed.
        """
        with self._calls_lock:
            if self.closed:
                raise TransportError(f"connection to {self.addr} is closed")
            self._calls[cmd.opaque] = pending
        try:
            self.write(cmd)
        except TransportError:
            with self._calls_lock:
                self._calls.pop(cmd.opaque, None)
            raise

    def call(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request and wait for the response with the same opaque."""
        pending = _Call()
        self._send(cmd, pending)
        if not pending.done.acquire(timeout=timeout_s):
            with self._calls_lock:
                self._calls.pop(cmd.opaque, None)
            raise TransportError(
                f"no response from {self.addr} to request code {cmd.code} "
                f"(opaque {cmd.opaque}) within {timeout_s:.3f} s"
            )
        if pending.error is not None:
            raise pending.error
        assert pending.response is not None
        return pending.response

    def call_async(self, cmd: RemotingCommand, callback: ResponseCallback) -> AsyncCall:
        """Send a request; ``callback`` gets the response with the same opaque.

        Raises:
            TransportError: the connection is closed or the write failed (the callback
                is then not called).
        """
        self._send(cmd, _Call(callback))
        return AsyncCall(self, cmd.opaque)

    def forget(self, opaque: int) -> bool:
        """Drop an outstanding call; False if it is no longer outstanding."""
        with self._calls_lock:
            return self._calls.pop(opaque, None) is not None

    # ----------------------------------------------------------------- reading

    def _read_loop(self) -> None:
        decoder = FrameDecoder()
        reason = "closed by peer"
        try:
            while True:
                data = self._sock.recv(_RECV_SIZE)
                decoder.receive_data(data)
                while isinstance(cmd := decoder.next_command(), RemotingCommand):
                    self._dispatch(cmd)
                if not data:
                    break
        except OSError as e:
            reason = f"read failed: {e}"
        except ProtocolError as e:
            reason = f"peer sent a bad frame: {e}"
        self._fail(TransportError(f"connection to {self.addr} lost ({reason})"))

    def _dispatch(self, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            with self._calls_lock:
                pending = self._calls.pop(cmd.opaque, None)
            if pending is not None:  # None: the caller already timed out
                pending.complete(cmd, None)
            return
        self._serve(cmd)

    def _serve(self, request: RemotingCommand) -> None:
        """Answer a broker-originated request through the handler."""
        response: RemotingCommand | None = None
        if self.handler is not None:
            try:
                response = self.handler(self.addr, request)
            except Exception:  # a handler bug must not kill the connection
                log.exception("request handler failed on code %d from %s", request.code, self.addr)
        if request.is_oneway:
            return
        if response is None:
            response = request.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                remark=f"request code {request.code} not supported by this client",
                language=self._language,
            )
        else:
            response = replace(
                response, opaque=request.opaque, flag=int(response.flag | RemotingFlag.RESPONSE)
            )
        with contextlib.suppress(TransportError):  # the read loop sees the broken socket
            self.write(response)

    # ----------------------------------------------------------------- closing

    def _fail(self, error: TransportError) -> None:
        """Close the socket and fail every outstanding call (idempotent)."""
        with self._calls_lock:
            self.closed = True
            calls, self._calls = self._calls, {}
        for pending in calls.values():
            pending.complete(None, error)
        with contextlib.suppress(OSError):  # already closed by the peer or by us
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    def close(self) -> None:
        """Close the socket, fail outstanding calls and wait for the reader to stop."""
        self._fail(TransportError(f"connection to {self.addr} closed locally"))
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5)


class RemotingClient(Closeable):
    """Request/response and oneway RPC to any number of addresses, from any thread.

    Args:
        request_handler: serves requests the broker sends (see the module doc).
        connect_timeout_s: how long a dial may take before :class:`TransportError`.
        language: the language code put on our commands (PYTHON).
        rpc_hook: called on every outgoing request (:mod:`mqstore.client.acl_hook`).
    """

    def __init__(
        self,
        request_handler: RequestHandler | None = None,
        *,
        connect_timeout_s: float = 3.0,
        language: LanguageCode = LanguageCode.PYTHON,
        rpc_hook: RpcHook | None = None,
    ) -> None:
        self._handler = request_handler
        self.rpc_hook = rpc_hook
        """Sees every request before it is sent (e.g. :class:`AclSigner` for ACL brokers)."""
        self._connect_timeout_s = connect_timeout_s
        self.language = language
        self._connections: dict[str, _Connection] = {}
        self._opaques = itertools.count(1)  # request ids; next() is atomic under the GIL
        self._dial_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._closed = False

    def set_request_handler(self, handler: RequestHandler | None) -> None:
        """Replace the handler; connections dialled from now on use the new one."""
        self._handler = handler
        with self._lock:
            for conn in self._connections.values():
                conn.handler = handler

    def invoke(self, addr: str, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return its response.

        The request gets a fresh opaque and this client's language; its flag must not
        have the response or oneway bit.

        Raises:
            TransportError: cannot connect, the connection broke, or no response came
                within ``timeout_s``.
        """
        return self._connection(addr).call(self._outgoing(request), timeout_s)

    def invoke_async(
        self, addr: str, request: RemotingCommand, callback: ResponseCallback
    ) -> AsyncCall:
        """Send ``request`` to ``addr``; ``callback`` gets the response or the
        connection's failure (see :data:`ResponseCallback`). No timeout here: the caller
        cancels the handle when it stops waiting.

        Raises:
            TransportError: cannot connect or the write failed (no callback then).
        """
        return self._connection(addr).call_async(self._outgoing(request), callback)

    def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send ``request`` with the oneway flag and return once it is written.

        Raises:
            TransportError: cannot connect or the write failed.
        """
        self._connection(addr).write(self._outgoing(request, oneway=True))

    def _outgoing(self, request: RemotingCommand, *, oneway: bool = False) -> RemotingCommand:
        """``request`` as sent: through the RPC hook, then with a fresh opaque, this
        client's language, and the oneway flag bit when ``oneway``."""
        if self.rpc_hook is not None:
            request = self.rpc_hook.before_request(request)
        flag = int(request.flag | RemotingFlag.ONEWAY) if oneway else request.flag
        return RemotingCommand(  # the constructor: dataclasses.replace costs 3x more
            request.code,
            self.language,
            request.version,
            next(self._opaques) % 0x7FFFFFFF + 1,  # positive int32, wrapping
            flag,
            request.remark,
            request.ext_fields,
            request.body,
            request.serialize_type,
        )

    def close_connection(self, addr: str) -> None:
        """Drop the connection to ``addr`` (outstanding calls fail); the next call redials."""
        with self._lock:
            conn = self._connections.pop(addr, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close every connection; later calls raise :class:`TransportError`."""
        with self._lock:
            self._closed = True
            conns, self._connections = list(self._connections.values()), {}
        for conn in conns:
            conn.close()

    def _connection(self, addr: str) -> _Connection:
        with self._lock:
            if self._closed:
                raise TransportError("remoting client is closed")
            conn = self._connections.get(addr)
            if conn is not None and not conn.closed:
                return conn
            dial_lock = self._dial_locks.setdefault(addr, threading.Lock())
        # Dial under the address's own lock: concurrent first calls to one address share
        # a socket, and a dial that hangs (an address that drops SYNs) holds up only the
        # calls to that address.
        with dial_lock:
            with self._lock:
                conn = self._connections.get(addr)
                if conn is not None and not conn.closed:
                    return conn
            conn = self._dial(addr)
            with self._lock:
                if self._closed:
                    conn.close()
                    raise TransportError("remoting client is closed")
                self._connections[addr] = conn
            return conn

    def _dial(self, addr: str) -> _Connection:
        try:
            host, port = parse_address(addr)
        except ValueError as e:
            raise TransportError(str(e)) from e
        try:
            sock = socket.create_connection((host, port), timeout=self._connect_timeout_s)
        except OSError as e:
            raise TransportError(f"cannot connect to {addr}: {e}") from e
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(addr, sock, self._handler, self.language)
