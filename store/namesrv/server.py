"""The name server's network front end: RocketMQ remoting on one port, and the scan.

:class:`NameServer` runs an asyncio loop in a background thread; every request is
memory-only (:class:`~mqstore.namesrv.routes.RouteInfoManager`), so it is processed on
the loop thread. Codes served, as RocketMQ's ``DefaultRequestProcessor``:

- REGISTER_BROKER (103): header ``clusterName``, ``brokerName``, ``brokerAddr``,
  ``brokerId``, ``haServerAddr``, ``compressed``; body RegisterBrokerBody. Response
  header ``masterAddr``/``haServerAddr`` (for a slave), body the KV table.
- UNREGISTER_BROKER (104): header ``clusterName``, ``brokerName``, ``brokerAddr``,
  ``brokerId``.
- GET_ROUTEINFO_BY_TOPIC (105): header ``topic``; TOPIC_NOT_EXIST (17) when no live
  broker holds it.
- GET_BROKER_CLUSTER_INFO (106), GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206).
- The admin codes (KV table 100/101/102/219, write perm 205/327, DELETE_TOPIC_IN_NAMESRV
  216, UPDATE/GET_NAMESRV_CONFIG 318/319): :mod:`mqstore.namesrv.admin`.

Anything else gets REQUEST_CODE_NOT_SUPPORTED. A malformed frame closes its connection.
A oneway request (a 4.9.8 broker registers oneway when it creates a topic) is processed
and never answered; it never closes the connection.

With ``acl`` (``mqstore namesrv --acl FILE``), every request is checked first as the
broker checks its own (``mqstore.broker.acl.NAMESRV_PERMISSIONS``, docs/acl.md §8):
REGISTER_BROKER and UNREGISTER_BROKER need an admin account's signature, reads any
account's; a refusal is NO_PERMISSION with the reason.

Limits (``mqstore.limits``, :data:`~mqstore.limits.NAME_SERVER_LIMITS` by default), as
the broker's: a frame is at most ``max_frame_bytes``; the bytes of unfinished frames
over all connections are capped at ``max_buffered_total`` (past it, the connections
holding the most are closed); a connection idle for ``idle_timeout_s`` is closed (a broker
registers every 30 s, a client asks routes every 30 s); a connection runs at most
``frames_per_turn`` requests before the loop serves the others.

Liveness (RocketMQ's ``scanNotActiveBroker``): every ``scan_interval_s`` (10 s) addresses
not registered for ``expiry_s`` (120 s) are dropped. A connection that registered
brokers and closes drops them at once (``BrokerHousekeepingService``); a broker that is
alive but silent (hung, stopped) is dropped only by the scan.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol, cast

from mqstore.closeable import Stoppable
from mqstore.limits import NAME_SERVER_LIMITS, PartialFrames, ServerLimits, close_idle
from mqstore.namesrv import admin, bodies
from mqstore.namesrv.kv import ORDER_TOPIC_CONFIG
from mqstore.namesrv.routes import (
    DEFAULT_EXPIRY_S,
    DEFAULT_SCAN_INTERVAL_S,
    Registration,
    RouteInfoManager,
)
from mqstore.remoting.codec import (
    FrameDecoder,
    ProtocolError,
    RemotingCommand,
    encode,
)
from mqstore.remoting.codes import RemotingFlag, RequestCode, ResponseCode
from mqstore.remoting.errors import BadRequestError
from mqstore.remoting.headers import ext_int, ext_str

log = logging.getLogger(__name__)
_ONEWAY = RemotingFlag.ONEWAY.value

DEFAULT_PORT = 9876
_FAQ = "See http://rocketmq.apache.org/docs/faq/ for further details."

Handler = Callable[["_Connection", RemotingCommand], RemotingCommand]


class _Connection(asyncio.Protocol):
    """One client or broker connection; loop thread only."""

    def __init__(self, server: NameServer) -> None:
        self.server = server
        self.decoder = FrameDecoder(server.limits.max_frame_bytes)
        self.transport: asyncio.Transport | None = None
        self.registered: set[str] = set()
        """Broker addresses registered over this connection (dropped when it closes)."""
        self.last_active = time.monotonic()
        self._pump_scheduled = False

    busy = False
    """Every request is answered at once: nothing is ever pending."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transport has asyncio.Transport's methods but not its class
        self.transport = cast(asyncio.Transport, transport)
        if len(self.server.connections) >= self.server.limits.max_connections:
            log.info(
                "namesrv: %d connections open: closing a new one", len(self.server.connections)
            )
            self.transport.abort()
            return
        self.server.connections.add(self)

    def abort(self) -> None:
        """Close the connection now."""
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        self.decoder.receive_data(data)
        if not self._pump_scheduled:
            self._pump()

    def _pump(self) -> None:
        """Answer up to ``frames_per_turn`` requests; the rest after the others' turns."""
        self._pump_scheduled = False
        try:
            for _ in range(self.server.limits.frames_per_turn):
                cmd = self.decoder.next_command()
                if not isinstance(cmd, RemotingCommand):
                    break
                if cmd.is_response:
                    continue
                if cmd.is_oneway:  # processed, never answered (a 4.9.8 broker's triggered
                    # registrations are oneway); the answer built is dropped
                    self.server.process(self, replace(cmd, flag=cmd.flag & ~_ONEWAY))
                    continue
                resp = self.server.process(self, cmd)
                if self.transport is not None:
                    self.transport.write(encode(resp))
            else:
                self._pump_scheduled = True
                self.server.loop.call_soon(self._pump)
        except ProtocolError as e:
            log.info("namesrv: closing a connection: %s", e)
            self.abort()
        if self.server.partial.account(self, self.decoder.buffered):
            log.warning("namesrv: closed connections holding partial frames over the cap")

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.server.connections.discard(self)
        self.server.partial.account(self, 0)
        for addr in self.registered:
            self.server.routes.channel_closed(addr)


class RequestGate(Protocol):
    """What admits a request before it is handled: the ACL
    (:meth:`mqstore.broker.acl.AccessControl.admit_name_server_request`), given by whoever
    builds the server, so the name server does not import the broker."""

    def admit_name_server_request(
        self, code: int, ext: Mapping[str, str], body: bytes, peer_host: str
    ) -> str | None:
        """None to serve the request, else the remark of its NO_PERMISSION answer."""


class NameServer(Stoppable):
    """A RocketMQ name server on ``host:port`` (0: any free port), with its own tables."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        expiry_s: float = DEFAULT_EXPIRY_S,
        scan_interval_s: float = DEFAULT_SCAN_INTERVAL_S,
        acl: RequestGate | None = None,
        limits: ServerLimits = NAME_SERVER_LIMITS,
    ) -> None:
        if scan_interval_s <= 0:
            raise ValueError("scan_interval_s must be > 0")
        self.host = host
        self.port = port
        self.routes = RouteInfoManager(expiry_s=expiry_s)
        self.scan_interval_s = scan_interval_s
        self.acl = acl
        """With ACL, every request is admitted or refused first."""
        self.limits = limits
        self.partial = PartialFrames(limits.max_buffered_total)
        """Bytes of unfinished frames over all connections (loop thread)."""
        self.loop = asyncio.new_event_loop()
        """The standard loop, not uvloop (``mqstore.eventloop``, the broker's): the name
        server's requests are few and light, and under a flood of half frames from 48
        connections uvloop's reads kept a well-behaved client's route answer waiting
        1.2-3.9 s where this loop answers within the 1 s bound (tests/limits/test_floods.py)."""
        self.connections: set[_Connection] = set()
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self.admin = admin.NamesrvAdmin(self.routes, lambda: self.port, limits.idle_timeout_s)
        """The admin codes, the KV table and the settings (mqstore.namesrv.admin)."""
        self._handlers: dict[int, Handler] = {
            RequestCode.REGISTER_BROKER: self._register,
            RequestCode.UNREGISTER_BROKER: self._unregister,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self._route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self._cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._topic_list,
            **self.admin.handlers(),
        }

    @property
    def address(self) -> str:
        """``host:port`` clients connect to."""
        host = "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
        return f"{host}:{self.port}"

    # ---------------------------------------------------------------- requests

    def process(self, conn: _Connection, cmd: RemotingCommand) -> RemotingCommand:
        """The response to one request (never raises)."""
        if self.acl is not None:
            peer = conn.transport.get_extra_info("peername") if conn.transport else None
            host = str(peer[0]) if peer else ""
            refused = self.acl.admit_name_server_request(cmd.code, cmd.ext_fields, cmd.body, host)
            if refused is not None:
                log.info("refused request code=%d from %s: %s", cmd.code, host, refused)
                return cmd.make_response(ResponseCode.NO_PERMISSION, refused)
        handler = self._handlers.get(cmd.code)
        if handler is None:
            remark = f" request type {cmd.code} not supported"
            return cmd.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark)
        try:
            return handler(conn, cmd)
        except (BadRequestError, bodies.RegisterBodyError) as e:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(e))

    def _register(self, conn: _Connection, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext_fields
        if ext.get("compressed", "false").lower() == "true":
            raise BadRequestError("compressed broker registration is not supported")
        version, topics = bodies.parse_register_body(cmd.body)
        reg = Registration(
            cluster=ext_str(ext, "clusterName"),
            broker_name=ext_str(ext, "brokerName"),
            broker_addr=ext_str(ext, "brokerAddr"),
            broker_id=ext_int(ext, "brokerId"),
            ha_server_addr=ext_str(ext, "haServerAddr", ""),
            data_version=version,
            topics=topics,
        )
        result = self.routes.register(reg)
        conn.registered.add(reg.broker_addr)
        header = {"masterAddr": result.master_addr, "haServerAddr": result.ha_server_addr}
        return cmd.make_response(
            ResponseCode.SUCCESS,
            ext_fields={k: v for k, v in header.items() if v},
            body=bodies.kv_table_body(self.admin.kv.namespace(ORDER_TOPIC_CONFIG)),
        )

    def _unregister(self, conn: _Connection, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext_fields
        addr = ext_str(ext, "brokerAddr")
        self.routes.unregister(
            ext_str(ext, "clusterName"), ext_str(ext, "brokerName"), addr, ext_int(ext, "brokerId")
        )
        conn.registered.discard(addr)
        return cmd.make_response(ResponseCode.SUCCESS)

    def _route(self, conn: _Connection, cmd: RemotingCommand) -> RemotingCommand:
        topic = ext_str(cmd.ext_fields, "topic")
        route = self.routes.route(topic)
        if route is None:
            remark = f"No topic route info in name server for the topic: {topic}\n{_FAQ}"
            return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, remark)
        standard = cmd.ext_fields.get("acceptStandardJsonOnly", "false").lower() == "true"
        body = bodies.route_body(
            route, standard_json=standard, order_topic_conf=self.admin.order_topic_conf(topic)
        )
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    def _cluster_info(self, conn: _Connection, cmd: RemotingCommand) -> RemotingCommand:
        brokers, clusters = self.routes.cluster_info()
        return cmd.make_response(
            ResponseCode.SUCCESS, body=bodies.cluster_info_body(brokers, clusters)
        )

    def _topic_list(self, conn: _Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(
            ResponseCode.SUCCESS, body=bodies.topic_list_body(self.routes.topics())
        )

    # --------------------------------------------------------------- lifecycle

    async def _scan(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval_s)
            for addr in self.routes.scan_not_active():
                log.warning("namesrv: broker %s expired (no registration)", addr)

    def start(self) -> int:
        """Bind and serve in a background thread; returns the bound port.

        Raises:
            OSError: the port could not be bound.
        """
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self._server = self.loop.run_until_complete(
                    self.loop.create_server(lambda: _Connection(self), self.host, self.port)
                )
                self.port = int(self._server.sockets[0].getsockname()[1])
                scan = self.loop.create_task(self._scan())
                idle = self.loop.create_task(
                    close_idle(lambda: self.connections, self.limits.idle_timeout_s, "namesrv")
                )
            except BaseException as e:
                failure.append(e)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()
            scan.cancel()
            idle.cancel()
            self._server.close()
            for conn in list(self.connections):
                if conn.transport is not None:
                    conn.transport.abort()
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.run_until_complete(self._server.wait_closed())
            self.loop.close()

        self._thread = threading.Thread(target=run, name="namesrv", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            raise failure[0]
        return self.port

    def stop(self) -> None:
        """Close the listener and stop the loop."""
        if self._thread is None:
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self._thread = None
