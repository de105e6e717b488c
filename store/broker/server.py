"""The broker's network front end: RocketMQ remoting over asyncio, on one port.

:class:`BrokerServer` runs an asyncio event loop in a background thread. The loop
only moves bytes: each connection feeds a sans-IO :class:`FrameDecoder`, and every
request is handed to a thread pool where a processor (``mqstore.broker.processors``)
calls the blocking :class:`~mqstore.broker.core.BrokerCore`. Responses are written back
on the loop thread. The built-in name server (GET_ROUTEINFO_BY_TOPIC,
GET_BROKER_CLUSTER_INFO) answers on the same port, so a client's name-server address
is the broker address.

Rules
-----
Rule 1. A malformed frame closes that connection only; the server keeps serving the
others. A request with an unknown code gets REQUEST_CODE_NOT_SUPPORTED; a oneway
request gets no response at all.

Rule 2. PULL_MESSAGE responses carry the raw CommitLog records: the head (length,
header) is written, then each record view, without copying them into a frame, once they
total more than :data:`COPY_LIMIT` bytes. Below it the head and records are joined into
one buffer, and so are the small answers of one turn (Rule 8): the event loop's per-buffer
cost is more than copying a few KiB (:func:`coalesce`).

Rule 3. A connection is a :class:`~mqstore.broker.consumers.ClientChannel`: the broker
pushes NOTIFY_CONSUMER_IDS_CHANGED (oneway, code 40) on it, and its closing removes
the client's registrations (the group rebalances at once).

Rule 4. Blocking work runs on a thread pool; requests that cannot block (offset
lookups, routes, pulls, and puts under ASYNC_FLUSH) run on the loop thread, because
the pool hand-off would cost more than the work (:func:`inline_codes`). No long poll
holds a thread while it waits: a PULL that finds nothing is held by the core's
``PullHoldService``, a POP_MESSAGE or NOTIFICATION by ``mqstore.broker.pop_polling``;
both are answered later from another thread.

Rule 5. The store host written into records (and so into message ids, which clients
dial) is the store's ``store_host`` config, fixed when the store opens. To serve on a
free port with dialable ids, bind first (:func:`bind_listener` with port 0), open the
store with ``store_host=(host, sock.getsockname()[1])``, and serve on that socket
(``BrokerServer(core, host, sock=sock)``): the port is held from the bind on, so no
other process can take it in between. ``BrokerServer(core, host, 0)`` alone binds a
free port only after the store opened, so its message ids name the configured address.

Rule 6. No client takes unbounded memory or the whole loop (:class:`ServerLimits`,
shared by every server: ``mqstore.limits``, docs/limits.md). Connections past
``max_connections`` are closed as they are accepted.
Back-pressure: a connection whose unsent output passes ``write_high_water`` (a client
that sends and does not read) is not read, and its received requests are not run,
until the output drains below ``write_low_water``; the same holds while it has
``max_in_flight`` requests running or held (long polls). Partial frames: a frame is at
most 16 MiB (the codec refuses more), and the bytes of unfinished frames over all
connections together are capped at ``max_buffered_total``: when a read passes the
cap, the connections holding the most are closed. Fairness: a connection runs at most
``frames_per_turn`` requests, then the loop serves the others before it runs the rest
(its reading paused meanwhile), so a flood of pipelined requests delays a new client by
one round, not by the flood. Idle connections (nothing read or written for
``idle_timeout_s``, RocketMQ's ``channelMaxIdleTimeSeconds`` = 120) are closed.

Rule 7. With ``acl`` (:class:`~mqstore.broker.acl.AccessControl`), every request is
checked before it runs, on the loop thread; a refused request gets NO_PERMISSION (16)
with the reason as remark (a oneway one gets nothing), is logged in one line, and never
reaches a processor. The processors of an admitted request see the signing account's
read permission as ``RequestContext.read_refusal``.

Rule 8. The answers of the requests one read brought in are written together: a
connection with several requests in flight (the Java client multiplexes all its threads
over one connection) gets them in one write call, one system call, instead of one each.
Answers given later (pool, held pulls) and pushes to the client are written at once, and
so are a turn's answers once they pass ``write_high_water`` bytes (Rule 6 holds).

Lifecycle: :meth:`BrokerServer.start` also starts the core (long polling);
:meth:`BrokerServer.stop` closes every connection and the loop but leaves the core
running: call ``core.shutdown()`` (persists offsets) and then close the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import TypeVar, cast

from mqstore.broker.acl import AccessControl, AclDenied, publish_refusal, read_refusal
from mqstore.broker.context import RequestContext
from mqstore.broker.core import BrokerCore
from mqstore.broker.pop_processors import SUSPENDING
from mqstore.broker.processors import Records, process, process_pull
from mqstore.closeable import Stoppable
from mqstore.config import BrokerRole, FlushDiskType
from mqstore.eventloop import new_event_loop
from mqstore.failures import FailureCounter
from mqstore.limits import PartialFrames, ServerLimits, close_idle
from mqstore.remoting.codec import (
    FrameDecoder,
    ProtocolError,
    RemotingCommand,
    encode,
    encode_header,
)
from mqstore.remoting.codes import RemotingFlag, RequestCode, ResponseCode

log = logging.getLogger(__name__)

_PREFIX = struct.Struct(">iI")
T = TypeVar("T")
DEFAULT_PORT = 10911


def bind_listener(host: str, port: int = 0) -> socket.socket:
    """A TCP socket bound to ``host:port`` (0: any free port) and listening, for
    ``BrokerServer(..., sock=)`` (Rule 5). The caller owns it until it is passed on.

    Raises:
        OSError: the address cannot be resolved or bound.
    """
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family, backlog=100)


def frame_head(cmd: RemotingCommand, body_length: int) -> bytes:
    """Length prefix, header meta and header of a frame whose body (``body_length``
    bytes) is written separately (Rule 2)."""
    header = encode_header(cmd)
    meta = int(cmd.serialize_type) << 24 | len(header)
    return _PREFIX.pack(4 + len(header) + body_length, meta) + header


COPY_LIMIT = 16 * 1024
"""Buffers of at most this many bytes in all are joined into one before a write (Rule 2).

Measured on the 2-CPU VM with uvloop (a head and 32 record views written to a
socket): 32 records of 200 B cost 2-3x more CPU as separate buffers than joined,
32 of 1.1 KiB the same either way, 32 of 4 KiB twice as much joined."""


def coalesce(
    buffers: list[bytes | memoryview], size: int, limit: int = COPY_LIMIT
) -> list[bytes | memoryview]:
    """``buffers`` (``size`` bytes in all) as they are best handed to one write: joined
    into one ``bytes`` when several total at most ``limit`` bytes, else unchanged (large
    record views are written without a copy, Rule 2). The bytes written are the same."""
    if len(buffers) > 1 and size <= limit:
        return [b"".join(buffers)]
    return buffers


NON_BLOCKING: frozenset[int] = frozenset(
    {
        RequestCode.PULL_MESSAGE,
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.GET_MAX_OFFSET,
        RequestCode.GET_MIN_OFFSET,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        RequestCode.LOCK_BATCH_MQ,
        RequestCode.UNLOCK_BATCH_MQ,
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        RequestCode.GET_BROKER_CLUSTER_INFO,
    }
)
"""Requests that only touch memory or mapped pages: run on the loop thread."""
SENDS: frozenset[int] = frozenset(
    {RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE}
)


def inline_codes(core: BrokerCore) -> frozenset[int]:
    """The request codes processed on the loop thread instead of the pool (Rule 4).

    A thread-pool round trip costs more than a whole PULL or an ASYNC_FLUSH put (two
    GIL hand-offs per request), so those run inline. Sends run inline only when a put
    cannot wait: ASYNC_FLUSH on a store that does not wait for a slave. Everything
    else (SYNC_FLUSH puts, heartbeats and send-backs that may persist config files)
    goes to the pool.
    """
    cfg = core.store.cfg
    if (
        cfg.flush_disk_type is FlushDiskType.ASYNC_FLUSH
        and cfg.broker_role is not BrokerRole.SYNC_MASTER
    ):
        return NON_BLOCKING | SENDS
    return NON_BLOCKING


class _Connection(asyncio.Protocol):
    """One client connection (a ClientChannel for the broker); loop thread only,
    except where a method says otherwise."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.loop = server.loop
        self.limits = server.limits
        self.decoder = FrameDecoder(server.limits.max_frame_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("0.0.0.0", 0)
        self.ctx: RequestContext | None = None
        self.last_active = time.monotonic()
        self.in_flight = 0
        """Requests answered later (pool, held pulls), not yet answered."""
        self._write_paused = False
        self._reading_paused = False
        self._pump_scheduled = False
        self._calls: dict[int, Future[RemotingCommand]] = {}
        self._out: list[bytes | memoryview] | None = None
        """While :meth:`_pump` runs: the frames its requests answered, written at its end
        in one call (Rule 8)."""
        self._out_bytes = 0
        """Bytes in ``_out``: past the write high-water mark they are written at once, so
        the transport's back-pressure stops the turn as it would without batching."""
        """Broker-to-client requests awaiting the client's answer, by opaque (:meth:`call`)."""

    # ---------------------------------------------------------------- asyncio

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transport has asyncio.Transport's methods but not its class
        self.transport = cast(asyncio.Transport, transport)
        if len(self.server.connections) >= self.limits.max_connections:
            log.info("broker: %d connections open: closing a new one", len(self.server.connections))
            self.transport.abort()
            return
        self.transport.set_write_buffer_limits(
            high=self.limits.write_high_water, low=self.limits.write_low_water
        )
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP; those
            # accepted on a bind_listener() socket have proto 0. A pull answer is two
            # writes (head, records): with Nagle the second waits for the client's
            # delayed ACK, about 40 ms per pull.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))
        self.ctx = RequestContext(
            self.server.core, self, self.peer, self.server.address, self.server.serve_name_server
        )
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        self.decoder.receive_data(data)
        if not self._pump_scheduled:
            self._pump()  # decodes first: a whole request holds no partial bytes
        else:
            self._account()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._resume()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        self.server.partial.account(self, 0)
        self.transport = None
        for waiting in self._calls.values():
            waiting.set_exception(ConnectionError("the client's connection closed"))
        self._calls.clear()
        if self.server.submit(self.server.core.channel_closed, self) is None:
            self.server.core.channel_closed(self)  # stopping: no pool left, do it here

    # ------------------------------------------------------------ flow control

    @property
    def _blocked(self) -> bool:
        return self._write_paused or self.in_flight >= self.limits.max_in_flight

    @property
    def busy(self) -> bool:
        """True while a request of this connection is running or held."""
        return self.in_flight > 0

    def _account(self) -> None:
        """Report the decoder's partial bytes; over the server's total, the connections
        holding the most are closed (Rule 6)."""
        if self.server.partial.account(self, self.decoder.buffered):
            self.server.failures.record(
                "buffering partial frames over the total cap", OverflowError(self.peer), self.peer
            )

    def abort(self) -> None:
        """Close the connection now, dropping unsent output."""
        if self.transport is not None:
            self.transport.abort()

    def _update_reading(self) -> None:
        """Read from the socket only while requests may run and none are deferred."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        pause = self._blocked or self._pump_scheduled
        if pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not pause and self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False

    def _resume(self) -> None:
        if not self._blocked and not self._pump_scheduled:
            self._pump_scheduled = True
            self.loop.call_soon(self._pump)
        self._update_reading()

    def _pump(self) -> None:
        """Run up to ``frames_per_turn`` received requests; defer the rest (Rule 6)."""
        self._pump_scheduled = False
        self._out = []
        try:
            for _ in range(self.limits.frames_per_turn):
                if self._blocked or self.transport is None:
                    break
                cmd = self.decoder.next_command()
                if not isinstance(cmd, RemotingCommand):  # NEED_DATA or CLOSED
                    break
                self._dispatch(cmd)
            else:  # a full turn: maybe more, after the other connections' turns
                if not self._pump_scheduled:
                    self._pump_scheduled = True
                    self.loop.call_soon(self._pump)
        except ProtocolError as e:
            log.info("closing %s:%d: %s", *self.peer, e)
            self._flush()  # the answers before the bad frame still go out
            self.abort()
        finally:
            self._flush()
        self._account()
        self._update_reading()

    def _flush(self) -> None:
        """Write what the requests of this turn answered, in one call, and stop batching."""
        out, self._out = self._out, None
        size, self._out_bytes = self._out_bytes, 0
        transport = self.transport
        if out and transport is not None and not transport.is_closing():
            out = coalesce(out, size)
            if len(out) == 1:
                transport.write(out[0])
            else:
                transport.writelines(out)

    # --------------------------------------------------------------- requests

    def _dispatch(self, cmd: RemotingCommand) -> None:
        if cmd.is_response:  # the answer to a call(); strays are ignored
            waiting = self._calls.pop(cmd.opaque, None)
            if waiting is not None:
                waiting.set_result(cmd)
            return
        ctx = self.ctx
        assert ctx is not None
        oneway = cmd.is_oneway
        acl = self.server.acl
        if acl is not None:
            try:
                account = acl.check(cmd.code, cmd.ext_fields, cmd.body, self.peer[0])
            except AclDenied as e:  # RocketMQ answers an AclException with its message
                log.info("refused request code=%d from %s:%d: %s", cmd.code, *self.peer, e)
                if not oneway:
                    self.write(cmd.make_response(ResponseCode.NO_PERMISSION, str(e)))
                return
            if account is not None:
                ctx = replace(
                    ctx,
                    read_refusal=functools.partial(read_refusal, account),
                    publish_refusal=functools.partial(publish_refusal, account),
                )
        if oneway:  # processors build a response regardless; it is dropped below
            cmd = replace(cmd, flag=cmd.flag & ~RemotingFlag.ONEWAY.value)
        inline = cmd.code in self.server.inline_codes
        suspending = SUSPENDING.get(cmd.code)
        if suspending is not None:  # long polls: held without a thread, answered later
            self.in_flight += 1
            respond = _Responder(self, oneway)
            if self.server.submit(suspending, ctx, cmd, lambda r: respond(r, ())) is None:
                self.in_flight -= 1
            return
        if cmd.code == RequestCode.PULL_MESSAGE:
            self.in_flight += 1
            respond = _Responder(self, oneway)
            if inline:
                process_pull(ctx, cmd, respond)
            elif self.server.submit(process_pull, ctx, cmd, respond) is None:
                self.in_flight -= 1
            return
        if inline:
            try:
                resp = process(ctx, cmd)
            except Exception as e:
                self.server.failures.record(f"request {cmd.code}", e)
                resp = cmd.make_response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
            if not oneway:
                self.write(resp)
            return
        fut = self.server.submit(process, ctx, cmd)
        if fut is not None:
            self.in_flight += 1
            fut.add_done_callback(lambda f: self._finish(cmd, oneway, f))

    def _finish(self, cmd: RemotingCommand, oneway: bool, fut: Future[RemotingCommand]) -> None:
        if fut.cancelled():  # the server is stopping: nobody is left to answer
            _Responder(self, True)(cmd, ())
            return
        err = fut.exception()
        if err is not None:
            self.server.failures.record(f"request {cmd.code}", err)
            resp = cmd.make_response(ResponseCode.SYSTEM_ERROR, f"{type(err).__name__}: {err}")
        else:
            resp = fut.result()
        _Responder(self, oneway)(resp, ())

    def answered(self, response: RemotingCommand | None, records: Records = ()) -> None:
        """Loop thread only: one request answered later is done; write its response
        (None: oneway) and run deferred requests if that unblocks the connection."""
        self.in_flight -= 1
        if response is not None:
            self.write(response, records)
        if self.in_flight == self.limits.max_in_flight - 1:
            self._resume()

    def write(self, cmd: RemotingCommand, records: Records = ()) -> None:
        """Loop thread only: write one frame, the records as its body (Rule 2)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        self.last_active = time.monotonic()
        out = self._out
        if out is not None:  # inside a turn of _pump: written at its end (Rule 8)
            if records:
                size = sum(len(r) for r in records)
                head = frame_head(cmd, size)
                out.append(head)
                out.extend(records)
                size += len(head)
            else:
                frame = encode(cmd)
                size = len(frame)
                out.append(frame)
            self._out_bytes += size
            if self._out_bytes >= self.limits.write_high_water:  # back-pressure now (Rule 6)
                self._flush()
                self._out = []
        elif records:
            body = sum(len(r) for r in records)
            head = frame_head(cmd, body)
            buffers = coalesce([head, *records], len(head) + body)
            if len(buffers) == 1:
                transport.write(buffers[0])
            else:
                transport.writelines(buffers)
        else:
            transport.write(encode(cmd))

    # ---------------------------------------------------------- ClientChannel

    def notify_consumer_ids_changed(self, group: str) -> None:
        """Push NOTIFY_CONSUMER_IDS_CHANGED (oneway) for ``group``; any thread."""
        cmd = RemotingCommand(
            code=RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
            opaque=next(self.server.opaques),
            flag=RemotingFlag.ONEWAY.value,
            ext_fields={"consumerGroup": group},
        )
        self.server.call_soon(self.write, cmd)

    def call(
        self, code: int, ext: dict[str, str], body: bytes, timeout_s: float
    ) -> RemotingCommand:
        """Send a request to the client and wait for its answer (Broker2Client
        ``callClient``); any thread but the loop's.

        Raises:
            TimeoutError: no answer within ``timeout_s``.
            ConnectionError: the connection closed before the answer.
        """
        opaque = next(self.server.opaques)
        waiting: Future[RemotingCommand] = Future()
        cmd = RemotingCommand(code=code, opaque=opaque, ext_fields=ext, body=body)

        def start() -> None:
            if self.transport is None or self.transport.is_closing():
                waiting.set_exception(ConnectionError("the client's connection is closed"))
                return
            self._calls[opaque] = waiting
            self.write(cmd)

        self.server.call_soon(start)
        try:
            return waiting.result(timeout_s)
        finally:
            self.server.call_soon(self._calls.pop, opaque, None)

    def send_oneway(self, code: int, ext: dict[str, str], body: bytes) -> None:
        """Push a oneway request to the client (RESET_CONSUMER_CLIENT_OFFSET); any thread."""
        cmd = RemotingCommand(
            code=code,
            opaque=next(self.server.opaques),
            flag=RemotingFlag.ONEWAY.value,
            ext_fields=ext,
            body=body,
        )
        self.server.call_soon(self.write, cmd)


class _Responder:
    """Answers one counted request (``conn.in_flight``) from any thread, exactly once
    in effect: oneway requests get no frame, but still leave the count."""

    __slots__ = ("conn", "oneway")

    def __init__(self, conn: _Connection, oneway: bool) -> None:
        self.conn = conn
        self.oneway = oneway

    def __call__(self, response: RemotingCommand, records: Records) -> None:
        conn = self.conn
        answer = None if self.oneway else response
        if threading.get_ident() == conn.server.loop_thread_id:
            conn.answered(answer, records)
        else:
            conn.server.call_soon(conn.answered, answer, records)


class BrokerServer(Stoppable):
    """RocketMQ remoting server (+ name server) for one :class:`BrokerCore`.

    It binds ``host:port`` when started, or serves on ``sock``, a socket already bound
    (:func:`bind_listener`, Rule 5); ``host`` then only names the address, the port is
    the socket's, and the server owns the socket from :meth:`start` on (closed at
    :meth:`stop`, or when the start fails).
    """

    def __init__(
        self,
        core: BrokerCore,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        sock: socket.socket | None = None,
        workers: int = 16,
        serve_name_server: bool = True,
        limits: ServerLimits | None = None,
        acl: AccessControl | None = None,
    ) -> None:
        self.core = core
        self.acl = acl
        """When set, every request passes :meth:`AccessControl.check` first (Rule 7)."""
        self.limits = limits or ServerLimits()
        self.partial = PartialFrames(self.limits.max_buffered_total)
        """Bytes received and not yet decoded, over all connections (loop thread)."""
        self.failures = FailureCounter(log, "broker server")
        self.host = host
        self.port = port if sock is None else int(sock.getsockname()[1])
        self._sock = sock
        self.serve_name_server = serve_name_server
        self.loop = new_event_loop()
        self.connections: set[_Connection] = set()
        self.opaques = itertools.count(1)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="broker-req")
        self.loop_thread_id = -1
        self.inline_codes = inline_codes(core)
        self._server: asyncio.Server | None = None
        self._idle_check: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def address(self) -> str:
        """``host:port`` clients connect to (``127.0.0.1`` for a wildcard bind)."""
        host = "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
        return f"{host}:{self.port}"

    def start(self) -> int:
        """Start the core and serve in a background thread; returns the bound port.

        Raises:
            OSError: the port could not be bound.
        """
        self.core.start()
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop_thread_id = threading.get_ident()
            try:
                factory = functools.partial(_Connection, self)
                if self._sock is not None:
                    serving = self.loop.create_server(factory, sock=self._sock)
                else:
                    serving = self.loop.create_server(factory, self.host, self.port)
                self._server = self.loop.run_until_complete(serving)
                self.port = self._server.sockets[0].getsockname()[1]
                self._idle_check = self.loop.create_task(
                    close_idle(lambda: self.connections, self.limits.idle_timeout_s, "broker")
                )
            except BaseException as e:
                if self._sock is not None:
                    self._sock.close()
                failure.append(e)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()
            self.loop.run_until_complete(self._close_all())
            self.loop.close()

        self._thread = threading.Thread(target=run, name=f"broker-{self.port}", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._pool.shutdown(wait=False)
            raise failure[0]
        log.info("broker %s serving on %s", self.core.config.broker_name, self.address)
        return self.port

    @property
    def buffered_total(self) -> int:
        """Bytes of unfinished frames over all connections (loop thread)."""
        return self.partial.total

    async def _close_all(self) -> None:
        if self._idle_check is not None:
            self._idle_check.cancel()
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()

    def stop(self) -> None:
        """Close the listener and every connection; the core keeps running."""
        if self._stopped or self._thread is None:
            return
        self._stopped = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, fn: Callable[..., T], *args: object) -> Future[T] | None:
        """Run ``fn(*args)`` on the request pool (None once stopped)."""
        try:
            return self._pool.submit(fn, *args)
        except RuntimeError:
            return None

    def call_soon(self, fn: Callable[..., object], *args: object) -> None:
        """Run ``fn(*args)`` on the loop thread, from any thread (dropped once stopped)."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to answer
            self.loop.call_soon_threadsafe(fn, *args)
