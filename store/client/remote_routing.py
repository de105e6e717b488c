"""RemoteTransport's plumbing: one request to one address, and where requests go.

A mixin: :class:`~mqstore.client.remote.RemoteTransport` inherits :class:`RoutingMixin`
and provides the name server address, the timeout, the remoting client, the broker
table (broker name -> master address) with its lock, and the consumer-ids-changed
handler. The routing rules are those of ``mqstore.client.remote`` ("Where requests
go"): brokers are learnt from every route the name server returns, forgotten when a
call to them fails, and found through ``TBW102`` when no topic names them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from mqstore.client import wire
from mqstore.client.remoting_client import RemotingClient
from mqstore.client.route import RouteError, TopicRoute, parse_route
from mqstore.client.transport import BrokerError, ConsumerIdsChanged, TransportError
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode


class RoutingMixin:
    """Request plumbing and broker lookup (mixed into RemoteTransport)."""

    namesrv_addr: str
    timeout_s: float
    _client: RemotingClient
    _brokers: dict[str, str]
    _lock: threading.Lock
    _ids_changed: ConsumerIdsChanged | None

    def _call(
        self,
        addr: str,
        code: RequestCode,
        ext: Mapping[str, object] | None = None,
        body: bytes = b"",
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        request = RemotingCommand(code=int(code), ext_fields=wire.ext(ext or {}), body=body)
        wait_s = self.timeout_s if timeout_s is None else timeout_s
        try:
            return self._client.invoke(addr, request, wait_s)
        except TransportError:
            # A broker that stopped answering may come back elsewhere: forget its
            # address so the next call asks the name server again.
            with self._lock:
                for name in [n for n, a in self._brokers.items() if a == addr]:
                    del self._brokers[name]
            raise

    @staticmethod
    def _expect(resp: RemotingCommand, *ok: ResponseCode) -> RemotingCommand:
        if resp.code not in ok:
            raise BrokerError(resp.code, resp.remark or "")
        return resp

    def route(self, topic: str) -> TopicRoute | None:
        """The topic's route from the name server; ``None`` for TOPIC_NOT_EXIST.

        Raises:
            BrokerError: any other error code. TransportError: no answer or bad body.
        """
        resp = self._call(self.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        self._expect(resp, ResponseCode.SUCCESS)
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

    def _known_brokers(self) -> dict[str, str]:
        with self._lock:
            if self._brokers:
                return dict(self._brokers)
        route = self.route(wire.DEFAULT_TOPIC)
        with self._lock:
            if not self._brokers:
                raise TransportError(_no_master(self.namesrv_addr, route))
            return dict(self._brokers)

    def _addr(self, broker_name: str, topic: str) -> str:
        with self._lock:
            addr = self._brokers.get(broker_name)
        if addr is None:
            self.route(topic)
            addr = self._known_brokers().get(broker_name)
        if addr is None:
            raise TransportError(f"no master address for broker {broker_name!r}")
        return addr

    def _any_broker(self) -> str:
        brokers = self._known_brokers()
        return brokers[min(brokers)]

    def _on_broker_request(self, addr: str, request: RemotingCommand) -> RemotingCommand | None:
        if request.code != RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            return None  # REQUEST_CODE_NOT_SUPPORTED, as the Java client answers
        handler = self._ids_changed
        if handler is not None:
            handler(request.ext_fields.get("consumerGroup", ""))
        return None if request.is_oneway else request.make_response(ResponseCode.SUCCESS)


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
