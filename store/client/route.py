"""Topic routes as a name server returns them (RocketMQ ``TopicRouteData``).

The body is read by :func:`mqstore.remoting.route.parse_route_body`.

Broker id 0 is the master. A broker's queues are readable when ``perm`` has bit 0x4
and writable with bit 0x2 (``PermName``); a broker without a master address is left
out, as the Java client's ``topicRouteData2TopicSubscribeInfo`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqstore.client.allocate import MessageQueue, sort_queues
from mqstore.remoting.route import RouteError as RouteError  # noqa: PLC0414 (re-export)
from mqstore.remoting.route import parse_route_body
from mqstore.remoting.values import PERM_READ, PERM_WRITE, QueueData

MASTER_ID = 0


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """Which brokers serve a topic, and where their masters listen."""

    topic: str
    queue_datas: tuple[QueueData, ...]
    broker_addrs: dict[str, dict[int, str]]
    """broker name -> broker id -> ``host:port``."""

    def master_addr(self, broker_name: str) -> str | None:
        """The master address of ``broker_name``, if the route names one."""
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def read_queues(self) -> list[MessageQueue]:
        """Readable queues on brokers with a master, sorted as RocketMQ sorts them."""
        return self._queues(PERM_READ, read=True)

    def write_queues(self) -> list[MessageQueue]:
        """Writable queues on brokers with a master, sorted."""
        return self._queues(PERM_WRITE, read=False)

    def _queues(self, perm_bit: int, *, read: bool) -> list[MessageQueue]:
        out: list[MessageQueue] = []
        for qd in self.queue_datas:
            if not qd.perm & perm_bit or self.master_addr(qd.broker_name) is None:
                continue
            n = qd.read_queue_nums if read else qd.write_queue_nums
            out.extend(MessageQueue(self.topic, qd.broker_name, i) for i in range(n))
        return sort_queues(out)


def parse_route(topic: str, body: bytes) -> TopicRoute:
    """Parse a TopicRouteData body (:func:`mqstore.remoting.route.parse_route_body`).

    Raises:
        RouteError: not JSON, or not TopicRouteData's shape.
    """
    route = parse_route_body(topic, body)
    addrs = {b.broker_name: dict(b.addrs) for b in route.broker_datas}
    return TopicRoute(topic, route.queue_datas, addrs)
