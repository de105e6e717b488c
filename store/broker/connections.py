"""Who is connected: client address, language and version per client id, and the
producer groups each client announced (RocketMQ ``ProducerManager`` plus the
``ClientChannelInfo`` both managers keep).

A heartbeat (HEART_BEAT) refreshes the client's entry: its address is the peer of the
connection it came on, its language and version are the request header's. The entry
goes when that connection closes, or when the client has sent no heartbeat for
``channel_expired_ms`` (:meth:`ConnectionTable.scan_expired`, the broker's housekeeping,
as ``ClientHousekeepingService`` expires producers). GET_PRODUCER_CONNECTION_LIST and
GET_CONSUMER_CONNECTION_LIST (``mqstore.broker.admin``) read it. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mqstore.broker.consumers import ClientChannel


@dataclass(frozen=True, slots=True)
class ClientConnection:
    """One client as RocketMQ's ``Connection`` body describes it."""

    client_id: str
    client_addr: str
    language: str
    version: int
    producer_groups: tuple[str, ...]
    channel: ClientChannel
    last_update_ms: int = 0


class ConnectionTable:
    """Client id -> its latest connection; producer groups -> their client ids."""

    def __init__(self, clock: Callable[[], int] = lambda: time.monotonic_ns() // 1_000_000) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._clients: dict[str, ClientConnection] = {}

    def heartbeat(
        self,
        client_id: str,
        producer_groups: tuple[str, ...],
        channel: ClientChannel,
        client_addr: str,
        language: str,
        version: int,
    ) -> None:
        """Record or refresh ``client_id`` as seen on ``channel``."""
        conn = ClientConnection(
            client_id, client_addr, language, version, producer_groups, channel, self._clock()
        )
        with self._lock:
            self._clients[client_id] = conn

    def channel_closed(self, channel: ClientChannel) -> None:
        """Forget every client whose latest heartbeat came on ``channel``."""
        with self._lock:
            for cid in [c for c, v in self._clients.items() if v.channel is channel]:
                del self._clients[cid]

    def scan_expired(self, expired_ms: int) -> list[str]:
        """Forget clients silent for longer than ``expired_ms``; returns their ids."""
        limit = self._clock() - expired_ms
        with self._lock:
            gone = [c for c, v in self._clients.items() if v.last_update_ms < limit]
            for cid in gone:
                del self._clients[cid]
        return gone

    def clients(self, client_ids: Iterable[str]) -> list[ClientConnection]:
        """The latest connections of the known ones of ``client_ids``, in their order."""
        with self._lock:
            found = [self._clients.get(c) for c in client_ids]
        return [c for c in found if c is not None]

    def now_ms(self) -> int:
        """The table's clock (``last_update_ms`` is on it)."""
        return self._clock()

    def producer_groups(self) -> list[str]:
        """Every producer group a live client announced, sorted."""
        with self._lock:
            return sorted({g for c in self._clients.values() for g in c.producer_groups})

    def producers(self, group: str) -> list[ClientConnection]:
        """The live clients that announced producer ``group``, sorted by client id."""
        with self._lock:
            found = [c for c in self._clients.values() if group in c.producer_groups]
        return sorted(found, key=lambda c: c.client_id)
