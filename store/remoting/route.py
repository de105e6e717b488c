"""Topic route bodies (RocketMQ ``TopicRouteData``) and ``ClusterInfo``: the one encoder
the name server and the broker's built-in name server answer with, and the one decoder
clients read routes with. Pure.

GET_ROUTEINFO_BY_TOPIC's body is fastjson text (bean fields alphabetical; ``brokerAddrs``
with unquoted long keys unless the client asked ``acceptStandardJsonOnly``)::

    {"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a",
      "cluster":"DefaultCluster"}],"filterServerTable":{},
     "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,
      "topicSynFlag":0,"topicSysFlag":0,"writeQueueNums":4}]}

Broker id 0 is the master. ``topicSynFlag`` is 4.x's spelling and ``topicSysFlag`` 5.x's:
both are written and each client reads its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mqstore.remoting.fastjson import Bean, FastjsonError, dumps_body, loads
from mqstore.remoting.values import QueueData


class RouteError(ValueError):
    """A route body that does not have TopicRouteData's shape."""


@dataclass(frozen=True, slots=True)
class BrokerData:
    """One broker name: its cluster and its addresses by broker id."""

    cluster: str
    broker_name: str
    addrs: Mapping[int, str]


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """What GET_ROUTEINFO_BY_TOPIC answers: the queues and the brokers holding them."""

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]


def broker_bean(b: BrokerData) -> Bean:
    """``BrokerData`` as fastjson writes it (routes and ``ClusterInfo``)."""
    return Bean(brokerAddrs=dict(b.addrs), brokerName=b.broker_name, cluster=b.cluster)


def route_body(
    route: TopicRoute, *, standard_json: bool = False, order_topic_conf: str | None = None
) -> bytes:
    """GET_ROUTEINFO_BY_TOPIC response body; ``order_topic_conf`` (the ORDER_TOPIC_CONFIG
    value of the topic, with ``orderMessageEnable``) goes in ``orderTopicConf``."""
    queues = [
        Bean(
            brokerName=q.broker_name,
            perm=q.perm,
            readQueueNums=q.read_queue_nums,
            topicSynFlag=q.topic_sys_flag,
            topicSysFlag=q.topic_sys_flag,
            writeQueueNums=q.write_queue_nums,
        )
        for q in route.queue_datas
    ]
    doc = Bean(
        brokerDatas=[broker_bean(b) for b in route.broker_datas],
        filterServerTable={},
        queueDatas=queues,
    )
    if order_topic_conf is not None:
        doc["orderTopicConf"] = order_topic_conf
    return dumps_body(doc, standard_json=standard_json)


def cluster_info_body(
    brokers: Mapping[str, BrokerData], clusters: Mapping[str, list[str]]
) -> bytes:
    """GET_BROKER_CLUSTER_INFO response body (``ClusterInfo``)."""
    doc = Bean(
        brokerAddrTable={name: broker_bean(b) for name, b in brokers.items()},
        clusterAddrTable=dict(clusters),
    )
    return dumps_body(doc)


def _int(obj: dict[object, object], key: str) -> int:
    value = obj.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RouteError(f"{key} is {value!r}, not an int")
    return value


def parse_route_body(topic: str, body: bytes) -> TopicRoute:
    """Read a TopicRouteData body (fastjson, unquoted integer keys allowed; standard JSON,
    string keys, too). ``topicSysFlag`` is not read (a client uses only the counts and
    ``perm``); broker ids that are not integers are left out.

    Raises:
        RouteError: not JSON, or not TopicRouteData's shape.
    """
    try:
        data = loads(body.decode("utf-8"))
    except (UnicodeDecodeError, FastjsonError) as e:
        raise RouteError(f"route body of {topic!r} does not parse: {e}") from e
    if not isinstance(data, dict):
        raise RouteError(f"route body of {topic!r} is not an object")
    queue_datas: list[QueueData] = []
    for qd in data.get("queueDatas") or []:
        if not isinstance(qd, dict):
            raise RouteError(f"queueDatas entry {qd!r} is not an object")
        queue_datas.append(
            QueueData(
                broker_name=str(qd.get("brokerName")),
                read_queue_nums=_int(qd, "readQueueNums"),
                write_queue_nums=_int(qd, "writeQueueNums"),
                perm=_int(qd, "perm"),
            )
        )
    brokers: list[BrokerData] = []
    for bd in data.get("brokerDatas") or []:
        if not isinstance(bd, dict) or not isinstance(bd.get("brokerAddrs"), dict):
            raise RouteError(f"brokerDatas entry {bd!r} has no brokerAddrs object")
        # Keys are ints when unquoted (fastjson) and strings in standard JSON.
        addrs = {
            int(k): str(v) for k, v in bd["brokerAddrs"].items() if str(k).lstrip("-").isdigit()
        }
        brokers.append(BrokerData(str(bd.get("cluster", "")), str(bd.get("brokerName")), addrs))
    return TopicRoute(tuple(queue_datas), tuple(brokers))
