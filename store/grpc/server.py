"""The gRPC endpoint: :class:`MessagingService` on a gRPC server, started and stopped
with a broker core or an embedded store.

    with MessageStore.open(cfg) as store, GrpcEndpoint(store, GrpcConfig(port=0)) as ep:
        ...  # a 5.x client connects to ep.address

Plaintext only, bound to 127.0.0.1 unless told otherwise (8081 as the proxy). A
request larger than :attr:`GrpcConfig.max_request_bytes` is refused by gRPC itself
(RESOURCE_EXHAUSTED) before any handler runs. The connection and call bounds are the
shared :class:`~mqstore.limits.ServerLimits` (docs/limits.md): at most
``max_calls_total`` calls run or wait at once, more are refused with
RESOURCE_EXHAUSTED rather than queued without end; one connection opens at most
``max_streams_per_connection`` concurrent streams (HTTP/2 SETTINGS); a connection with
no call for ``idle_timeout_s`` is closed (120 s, as the remoting server), and the
server pings a connection quiet for ``keepalive_ms`` to find dead peers.

The server is ``grpc.aio`` on one event loop, in a thread of its own. A call that
waits holds no thread: a long-polling receive is suspended on the broker's POP long
polling and resumed by a message's arrival (at most ``ServiceConfig.max_long_polls``
wait at once), an open Telemetry stream is a suspended coroutine (at most
``max_streams_total``; one with no first message within ``first_message_s`` is ended,
``mqstore.grpc.streams``). The handlers' store work runs on the loop when it cannot
wait, else on a pool of :attr:`GrpcConfig.max_workers` threads
(``mqstore.grpc.calls``). With
:attr:`GrpcConfig.acl`, every request must be signed by an account of the broker's
plain ACL and hold the permissions its RPC needs, else it is answered UNAUTHORIZED or
FORBIDDEN without running (``mqstore.grpc.access``); a Telemetry stream ends at its
first refused message.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from mqstore.broker.acl import AccessControl
from mqstore.broker.core import BrokerCore
from mqstore.broker.server import inline_codes
from mqstore.closeable import Stoppable
from mqstore.grpc.access import GrpcAccess, guard
from mqstore.grpc.calls import CallInfo, Calls
from mqstore.grpc.protocol import SERVICE_NAME, svc
from mqstore.grpc.service import MALFORMED_REQUEST, MessagingService, ServiceConfig
from mqstore.grpc.streams import StreamLimits
from mqstore.limits import ServerLimits
from mqstore.remoting.codes import RequestCode
from mqstore.store_view import StoreView

DEFAULT_PORT = 8081
"""The proxy's gRPC port."""
STOP_WAIT_S = 5.0
"""How long :meth:`GrpcEndpoint.stop` waits past the grace for calls to end."""


def _lenient(message_class: Any) -> Callable[[bytes], Any]:
    """A request parser that gives :data:`MALFORMED_REQUEST` for bytes that do not parse,
    so the handler answers BAD_REQUEST in the protocol's own terms (and a stream goes
    on) rather than gRPC failing the call inside its machinery (None is gRPC's own
    sentinel for a failed parse, so it cannot be used)."""

    def parse(data: bytes) -> Any:
        try:
            return message_class.FromString(data)
        except Exception:  # DecodeError, or anything the parser raises on junk
            return MALFORMED_REQUEST

    return parse


def _unary(rpc: str, behaviour: Callable[[Any, Any], Any], calls: Calls) -> Any:
    """``behaviour`` as a coroutine: on the loop with the call's context, or on the pool
    with a :class:`CallInfo` of it (the aio context stays on its loop)."""
    if not calls.runs_on_pool(rpc):

        async def inline(request: Any, context: Any) -> Any:
            return behaviour(request, context)

        return inline

    async def pooled(request: Any, context: Any) -> Any:
        return await calls.run(rpc, behaviour, request, CallInfo.of(context))

    return pooled


def _handlers(service: MessagingService, access: GrpcAccess | None, streams: StreamLimits) -> Any:
    """The method handlers of every RPC of the service descriptor, on ``service``; with
    ``access``, each request is checked against the ACL first (``mqstore.grpc.access``);
    client streams are bounded by ``streams`` before anything else. Every handler is a
    coroutine (or an async generator) of the server's loop."""
    makers = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }
    handlers = {}
    for m in svc.DESCRIPTOR.services_by_name["MessagingService"].methods:
        make = makers[(m.client_streaming, m.server_streaming)]
        behaviour = getattr(service, m.name)
        if access is not None:
            behaviour = guard(access, m, behaviour)
        if not (m.client_streaming or m.server_streaming):  # streams run on the loop
            behaviour = _unary(m.name, behaviour, service.calls)
        if m.client_streaming:
            behaviour = streams.wrap(behaviour)
        handlers[m.name] = make(
            behaviour,
            request_deserializer=_lenient(getattr(svc, m.input_type.name)),
            response_serializer=getattr(svc, m.output_type.name).SerializeToString,
        )
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)


@dataclass(frozen=True, slots=True)
class GrpcConfig:
    """Where and how the endpoint listens, and the handlers' knobs."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    """0: any free port (see :attr:`GrpcEndpoint.port` once started)."""
    advertised_host: str | None = None
    """The host routes name (default: ``host``, or 127.0.0.1 for a wildcard)."""
    max_workers: int = 16
    """Threads running the store work that may block (SYNC_FLUSH puts, heartbeats,
    EndTransaction, ``mqstore.grpc.calls``); calls that wait hold none."""
    max_request_bytes: int | None = None
    """Largest request accepted (default: the store's max message size + 64 KiB)."""
    limits: ServerLimits = dataclasses.field(default_factory=ServerLimits)
    """Calls, streams, idle connections: the bounds every server shares."""
    keepalive_ms: int = 60_000
    """The server pings a connection quiet this long; no answer within
    ``keepalive_timeout_ms`` closes it."""
    keepalive_timeout_ms: int = 20_000
    service: ServiceConfig = dataclasses.field(default_factory=ServiceConfig)
    acl: AccessControl | None = None
    """The broker's plain ACL: every request must then be signed by one of its accounts
    and hold the permissions its RPC needs (docs/acl.md §6)."""


class GrpcEndpoint(Stoppable):
    """The MessagingService served over ``target``: a :class:`BrokerCore` (the caller
    owns it) or a store (a :class:`~mqstore.store_view.StoreView`, such as an open
    ``MessageStore``: a core is made and shut down with the endpoint). The store must
    stay open while the endpoint runs."""

    def __init__(self, target: BrokerCore | StoreView, config: GrpcConfig | None = None):
        self.config = config or GrpcConfig()
        if isinstance(target, BrokerCore):
            self.core, self._owns_core = target, False
        else:
            self.core, self._owns_core = BrokerCore(target), True
        self.service: MessagingService | None = None
        self.streams: StreamLimits | None = None
        self._server: Any = None
        self._loop: Any = None
        self._thread: Any = None
        self._pool: Any = None
        self.port = 0

    @property
    def address(self) -> str:
        """``host:port`` clients connect to (after :meth:`start`)."""
        return f"{self._advertised}:{self.port}"

    @property
    def _advertised(self) -> str:
        cfg = self.config
        if cfg.advertised_host:
            return cfg.advertised_host
        return "127.0.0.1" if cfg.host in ("0.0.0.0", "", "::") else cfg.host

    def start(self) -> int:
        """Listen and serve; return the port.

        Raises:
            OSError: the address cannot be bound (a busy port among the reasons).
        """
        if self._server is not None:
            return self.port
        cfg = self.config
        if cfg.port:
            _probe(cfg.host, cfg.port)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="mqstore-grpc", daemon=True)
        thread.start()
        try:
            server, port = asyncio.run_coroutine_threadsafe(self._bind(), loop).result()
        except BaseException:
            _end_loop(loop, thread)
            raise
        self._loop, self._thread, self.port = loop, thread, port
        if self._owns_core:
            self.core.start()
        svc_cfg = dataclasses.replace(cfg.service, host=self._advertised, port=self.port)
        puts_block = RequestCode.SEND_MESSAGE_V2 not in inline_codes(self.core)
        self._pool = ThreadPoolExecutor(
            max_workers=cfg.max_workers, thread_name_prefix="mqstore-grpc"
        )
        self.service = MessagingService(self.core, svc_cfg, Calls(self._pool, puts_block))
        access = GrpcAccess(cfg.acl) if cfg.acl is not None else None
        self.streams = StreamLimits(cfg.limits.max_streams_total, cfg.limits.first_message_s)
        server.add_generic_rpc_handlers((_handlers(self.service, access, self.streams),))
        asyncio.run_coroutine_threadsafe(server.start(), loop).result()
        self._server = server
        return self.port

    async def _bind(self) -> tuple[Any, int]:
        cfg = self.config
        limit = cfg.max_request_bytes or self.core.store.cfg.max_message_size + 64 * 1024
        bounds = cfg.limits
        server = grpc.aio.server(
            maximum_concurrent_rpcs=bounds.max_calls_total,
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.so_reuseport", 0),
                ("grpc.max_concurrent_streams", bounds.max_streams_per_connection),
                ("grpc.max_connection_idle_ms", int(bounds.idle_timeout_s * 1000)),
                ("grpc.keepalive_time_ms", cfg.keepalive_ms),
                ("grpc.keepalive_timeout_ms", cfg.keepalive_timeout_ms),
            ],
        )
        try:
            port = server.add_insecure_port(f"{cfg.host}:{cfg.port}")
        except RuntimeError as e:
            raise OSError(f"cannot listen on {cfg.host}:{cfg.port}: {e}") from None
        if port == 0:
            raise OSError(f"cannot listen on {cfg.host}:{cfg.port}")
        return server, int(port)

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving (waiting receives are answered at once, other calls in flight
        get ``grace`` seconds), then shut down an owned core (which saves the POP
        state). Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        loop = self._loop
        service = self.service
        if service is not None:
            loop.call_soon_threadsafe(service.close)
        # bounded: a call gRPC itself failed to end must not hold the broker's shutdown
        # a timeout, or the server failing to stop: the loop still ends
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(server.stop(grace), loop).result(grace + STOP_WAIT_S)
        _end_loop(loop, self._thread)
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._owns_core:
            self.core.shutdown()


def _end_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Stop ``loop`` (run by ``thread``), cancel what still runs on it, and close it."""

    async def cancel_rest() -> None:
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    with contextlib.suppress(Exception):  # tasks that would not end: the loop stops anyway
        asyncio.run_coroutine_threadsafe(cancel_rest(), loop).result(STOP_WAIT_S)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(STOP_WAIT_S)
    if not thread.is_alive():
        loop.close()


def _probe(host: str, port: int) -> None:
    """Fail with a plain OSError when ``host:port`` is taken: gRPC's own bind failure
    prints a C-level log line and says little."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))


def serve_beside(
    core: BrokerCore,
    host: str,
    port: int,
    fifo_groups: Iterable[str] = (),
    acl: AccessControl | None = None,
) -> GrpcEndpoint:
    """Start an endpoint over a running broker's ``core`` (``mqstore broker
    --grpc-port``, ``--grpc-fifo-group``, ``--acl``); the caller stops it before
    shutting the core down.

    Raises:
        OSError: the address cannot be bound.
    """
    service = ServiceConfig(fifo_groups=frozenset(fifo_groups))
    endpoint = GrpcEndpoint(core, GrpcConfig(host=host, port=port, service=service, acl=acl))
    endpoint.start()
    return endpoint
