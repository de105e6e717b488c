"""A broker's name-server client: register with name servers every 30 s and at once
when a topic is created, unregister on shutdown. It lives with the clients (it is one:
it speaks to the name server over :class:`~mqstore.client.remoting_client.RemotingClient`),
so neither the broker nor the name server imports the other's side.

As RocketMQ 4.9.8's ``BrokerController.registerBrokerAll``: REGISTER_BROKER to every
name server of ``--namesrv`` (a ``;``-separated list), at start, then every
``interval_s`` (RocketMQ's ``registerNameServerPeriod`` = 30 s), with the broker's whole
topic table. The data version changes whenever the table does, so a name server reads
the body only then. :meth:`BrokerRegistrar.topics_changed` (a topic created by
UPDATE_AND_CREATE_TOPIC, auto-created by a send, a retry/DLQ topic) registers at once,
oneway, on the registrar's thread, as a 4.9.8 broker does after auto-creating a topic:
routes then carry a new topic within milliseconds rather than at the next period.

Every request carries remoting version 409 (V4_9_8) and the header's ``bodyCrc32``
(CRC32 of the body, masked to 31 bits as ``UtilAll.crc32``), as a 4.9.8 broker sends
them: a 4.9.8 name server reads the body as ``RegisterBrokerBody`` only for versions
from V3_0_11 on and refuses a body whose non-zero ``bodyCrc32`` does not match.

A name server that cannot be reached is logged once per kind of failure and tried
again next round; the broker keeps serving.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable, Sequence

from mqstore.client.acl_hook import RpcHook
from mqstore.client.remoting_client import RemotingClient
from mqstore.client.transport import TransportError
from mqstore.failures import FailureCounter
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import V4_9_8, RequestCode, ResponseCode
from mqstore.remoting.register import DataVersion, register_body
from mqstore.remoting.topic_config import TopicConfig
from mqstore.service import ServiceThread

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 30.0
"""RocketMQ's ``registerNameServerPeriod``."""


def parse_namesrv_addrs(text: str) -> list[str]:
    """``host:port;host:port`` -> addresses (RocketMQ's ``namesrvAddr`` syntax).

    Raises:
        ValueError: empty, or an entry without a numeric port.
    """
    addrs = [a.strip() for a in text.split(";") if a.strip()]
    if not addrs:
        raise ValueError("no name server address given")
    for a in addrs:
        host, sep, port = a.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad name server address {a!r} (want HOST:PORT)")
    return addrs


class BrokerRegistrar(ServiceThread):
    """Registers one broker address with name servers, every ``interval_s``."""

    name = "namesrv-register"

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        *,
        cluster: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        ha_server_addr: str,
        topics: Callable[[], dict[str, TopicConfig]],
        interval_s: float = DEFAULT_INTERVAL_S,
        timeout_s: float = 3.0,
        rpc_hook: RpcHook | None = None,
    ) -> None:
        super().__init__(interval_s)
        self.namesrv_addrs = list(namesrv_addrs)
        self.cluster = cluster
        self.broker_name = broker_name
        self.broker_id = broker_id
        self.broker_addr = broker_addr
        self.ha_server_addr = ha_server_addr
        self._topics = topics
        self.timeout_s = timeout_s
        self.client = RemotingClient(rpc_hook=rpc_hook)
        """Signs the registrations with ``rpc_hook`` (an admin account's ``AclSigner``)
        for name servers with ACL."""
        self.failures = FailureCounter(log, self.name)
        self.registrations = 0
        """Successful REGISTER_BROKER answers so far (all name servers)."""
        self._snapshot: dict[str, TopicConfig] | None = None
        self._version = DataVersion()
        self._changed = threading.Event()

    def _header(self) -> dict[str, str]:
        return {
            "brokerAddr": self.broker_addr,
            "brokerId": str(self.broker_id),
            "brokerName": self.broker_name,
            "clusterName": self.cluster,
        }

    def _current_version(self, topics: dict[str, TopicConfig]) -> DataVersion:
        if topics != self._snapshot:
            self._snapshot = dict(topics)
            self._version = DataVersion(int(time.time() * 1000), self._version.counter + 1)
        return self._version

    def _request(self) -> RemotingCommand:
        topics = self._topics()
        body = register_body(list(topics.values()), self._current_version(topics))
        ext = self._header() | {
            "haServerAddr": self.ha_server_addr,
            "compressed": "false",
            "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        }
        return RemotingCommand(
            code=RequestCode.REGISTER_BROKER, version=V4_9_8, ext_fields=ext, body=body
        )

    def topics_changed(self) -> None:
        """A topic was created or changed: register at once (oneway), off the caller's
        thread; safe from any thread, never blocks."""
        self._changed.set()
        self.wakeup()

    def register_oneway(self) -> None:
        """Register with every name server now, oneway (no answer awaited)."""
        cmd = self._request()
        for addr in self.namesrv_addrs:
            try:
                self.client.invoke_oneway(addr, cmd)
            except TransportError as e:
                self.failures.record(f"registering with {addr}", e)

    def register_once(self) -> int:
        """Register with every name server now; returns how many accepted."""
        cmd = self._request()
        ok = 0
        for addr in self.namesrv_addrs:
            try:
                resp = self.client.invoke(addr, cmd, self.timeout_s)
            except TransportError as e:
                self.failures.record(f"registering with {addr}", e)
                continue
            if resp.code != ResponseCode.SUCCESS:
                self.failures.record(f"registering with {addr}", RuntimeError(resp.remark))
                continue
            ok += 1
        self.registrations += ok
        return ok

    def run_once(self) -> None:
        if self._changed.is_set():
            self._changed.clear()
            self.register_oneway()
        else:
            self.register_once()

    def start(self) -> None:
        """Register at once, then every ``interval_s`` on the thread."""
        self.register_once()
        super().start()

    def shutdown(self) -> None:
        """Stop registering, UNREGISTER_BROKER from every name server, close sockets."""
        self.stop()
        for addr in self.namesrv_addrs:
            cmd = RemotingCommand(
                code=RequestCode.UNREGISTER_BROKER, version=V4_9_8, ext_fields=self._header()
            )
            try:
                self.client.invoke(addr, cmd, self.timeout_s)
            except TransportError as e:
                log.info("unregistering from %s: %s", addr, e)
        self.client.close()
