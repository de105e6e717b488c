"""RemoteTransport's plumbing: one request to one address, and where requests go.

:class:`Router` is owned by :class:`~mqstore.client.remote.RemoteTransport`: it holds
the name server address, the RPC timeout, the remoting client the transport gives it,
and the broker table (broker name -> master address) with its lock. The routing rules
are those of ``mqstore.client.remote`` ("Where requests go"): brokers are learnt from
every route the name server returns, forgotten when a call to them fails, and found
through ``TBW102`` when no topic names them. Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from mqstore.client import wire
from mqstore.client.remoting_client import AsyncCall, RemotingClient, ResponseCallback
from mqstore.client.route import RouteError, TopicRoute, parse_route
from mqstore.client.transport import BrokerError, TransportError
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode


def expect(resp: RemotingCommand, *ok: ResponseCode) -> RemotingCommand:
    """``resp`` when its code is one of ``ok``.

    Raises:
        BrokerError: any other code.
    """
    if resp.code not in ok:
        raise BrokerError(resp.code, resp.remark or "")
    return resp


class Router:
    """Sends requests and finds brokers through one name server."""

    def __init__(self, namesrv_addr: str, client: RemotingClient, timeout_s: float) -> None:
        self.namesrv_addr = namesrv_addr
        self.timeout_s = timeout_s
        self._client = client
        self._brokers: dict[str, str] = {}  # broker name -> master address
        self._lock = threading.Lock()

    def call(
        self,
        addr: str,
        code: RequestCode,
        ext: Mapping[str, object] | None = None,
        body: bytes = b"",
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        """One request to ``addr``, waiting ``timeout_s`` (default: the router's).

        Raises:
            TransportError: no answer; the brokers at ``addr`` are forgotten.
        """
        request = RemotingCommand(code=int(code), ext_fields=wire.ext(ext or {}), body=body)
        wait_s = self.timeout_s if timeout_s is None else timeout_s
        try:
            return self._client.invoke(addr, request, wait_s)
        except TransportError:
            self._forget(addr)
            raise

    def call_async(
        self,
        addr: str,
        code: RequestCode,
        ext: Mapping[str, object],
        callback: ResponseCallback,
    ) -> AsyncCall:
        """One request to ``addr`` whose response goes to ``callback`` (on the reader
        thread); a transport failure forgets the brokers at ``addr`` as :meth:`call`.

        Raises:
            TransportError: cannot connect or write (the callback is not called).
        """
        request = RemotingCommand(code=int(code), ext_fields=wire.ext(ext))

        def done(resp: RemotingCommand | None, error: TransportError | None) -> None:
            if error is not None:
                self._forget(addr)
            callback(resp, error)

        try:
            return self._client.invoke_async(addr, request, done)
        except TransportError:
            self._forget(addr)
            raise

    def _forget(self, addr: str) -> None:
        # A broker that stopped answering may come back elsewhere: forget its
        # address so the next call asks the name server again.
        with self._lock:
            for name in [n for n, a in self._brokers.items() if a == addr]:
                del self._brokers[name]

    def route(self, topic: str) -> TopicRoute | None:
        """The topic's route from the name server; ``None`` for TOPIC_NOT_EXIST.

        Raises:
            BrokerError: any other error code. TransportError: no answer or bad body.
        """
        resp = self.call(self.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        expect(resp, ResponseCode.SUCCESS)
        try:
            route = parse_route(topic, resp.body)
        except RouteError as e:
            raise TransportError(str(e)) from e
        with self._lock:
            for name in route.broker_addrs:
                addr = route.master_addr(name)
                if addr is not None:
                    self._brokers[name] = addr
        return route

    def known_brokers(self) -> dict[str, str]:
        """Broker name -> master address of every broker known (looked up through
        ``TBW102`` when none is).

        Raises:
            TransportError: the name server knows no broker.
        """
        with self._lock:
            if self._brokers:
                return dict(self._brokers)
        route = self.route(wire.DEFAULT_TOPIC)
        with self._lock:
            if not self._brokers:
                raise TransportError(_no_master(self.namesrv_addr, route))
            return dict(self._brokers)

    def addr(self, broker_name: str, topic: str) -> str:
        """The master address of ``broker_name`` (routing ``topic`` first if unknown).

        Raises:
            TransportError: no master address is known for it.
        """
        with self._lock:
            addr = self._brokers.get(broker_name)
        if addr is None:
            self.route(topic)
            addr = self.known_brokers().get(broker_name)
        if addr is None:
            raise TransportError(f"no master address for broker {broker_name!r}")
        return addr

    def any_broker(self) -> str:
        """The address of the first known broker (by name)."""
        brokers = self.known_brokers()
        return brokers[min(brokers)]


def _no_master(namesrv_addr: str, route: TopicRoute | None) -> str:
    """Why no broker takes writes: the name server lists only slaves (read-only), or none."""
    slaves = [
        f"{name} at {addr}"
        for name, addrs in (route.broker_addrs.items() if route is not None else ())
        for addr in addrs.values()
    ]
    if slaves:
        return f"broker {', '.join(slaves)} is a read-only slave: send to its master"
    return f"name server {namesrv_addr} knows no broker"


__all__ = ["Router", "expect"]
