"""The built-in name server: route data for this one broker's topics.

RocketMQ clients first ask a name server where a topic lives (GET_ROUTEINFO_BY_TOPIC)
and then talk to the brokers it names. Our broker answers those questions itself, on
its own port, so a client's ``namesrvAddr`` can simply be the broker address.

Route body (``TopicRouteData``, fastjson: bean fields alphabetical, ``brokerAddrs``
with unquoted long keys; brokerId 0 is the master)::

    {"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a",
      "cluster":"DefaultCluster"}],"filterServerTable":{},
     "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,
      "topicSynFlag":0,"topicSysFlag":0,"writeQueueNums":4}]}

``topicSynFlag`` is 4.x's spelling, ``topicSysFlag`` 5.x's; both are written and each
client reads its own. With ``acceptStandardJsonOnly`` (5.x) the keys are quoted.
"""

from __future__ import annotations

from mqstore.remoting.fastjson import Bean, dumps_body
from mqstore.remoting.route import BrokerData, TopicRoute, broker_bean
from mqstore.remoting.route import route_body as encode_route
from mqstore.remoting.topic_config import TopicConfig
from mqstore.remoting.values import QueueData


def route_body(
    topic: TopicConfig,
    *,
    cluster: str,
    broker_name: str,
    broker_id: int,
    addr: str,
    standard_json: bool = False,
) -> bytes:
    """GET_ROUTEINFO_BY_TOPIC response body for ``topic`` on this broker."""
    queue = QueueData(
        broker_name, topic.read_queue_nums, topic.write_queue_nums, topic.perm,
        topic.topic_sys_flag,
    )  # fmt: skip
    broker = BrokerData(cluster, broker_name, {broker_id: addr})
    return encode_route(TopicRoute((queue,), (broker,)), standard_json=standard_json)


def cluster_info_body(*, cluster: str, broker_name: str, broker_id: int, addr: str) -> bytes:
    """GET_BROKER_CLUSTER_INFO response body (``ClusterInfo``)."""
    doc = Bean(
        brokerAddrTable={
            broker_name: broker_bean(BrokerData(cluster, broker_name, {broker_id: addr}))
        },
        clusterAddrTable={cluster: [broker_name]},
    )
    return dumps_body(doc)
