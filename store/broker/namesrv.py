"""The built-in name server: route data for this one broker's topics.

RocketMQ clients first ask a name server where a topic lives (GET_ROUTEINFO_BY_TOPIC)
and then talk to the brokers it names. Our broker answers those questions itself, on
its own port, so a client's ``namesrvAddr`` can simply be the broker address.

The bodies are :mod:`mqstore.remoting.route`'s, as the stand-alone name server writes them.
"""

from __future__ import annotations

from mqstore.remoting.route import BrokerData, TopicRoute
from mqstore.remoting.route import cluster_info_body as encode_cluster_info
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
    """GET_BROKER_CLUSTER_INFO response body (``ClusterInfo``) of this one broker."""
    broker = BrokerData(cluster, broker_name, {broker_id: addr})
    return encode_cluster_info({broker_name: broker}, {cluster: [broker_name]})
