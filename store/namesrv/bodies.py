"""The name server's wire bodies (fastjson, as RocketMQ writes and reads them).

In: ``RegisterBrokerBody``, whose codec both ends share (:mod:`mqstore.remoting.register`).

Out: ``TopicRouteData`` (brokerAddrs with unquoted long keys unless the client asked
``acceptStandardJsonOnly``), ``ClusterInfo``, ``TopicList``; ``topicSynFlag`` (4.x) and
``topicSysFlag`` (5.x) are both written; the route and ClusterInfo encoders are
:mod:`mqstore.remoting.route`'s, which the broker's built-in name server uses too.
"""

from __future__ import annotations

from mqstore.remoting.fastjson import Bean, dumps_body
from mqstore.remoting.register import RegisterBodyError as RegisterBodyError  # noqa: PLC0414
from mqstore.remoting.register import parse_register_body as parse_register_body  # noqa: PLC0414
from mqstore.remoting.register import register_body as register_body  # noqa: PLC0414
from mqstore.remoting.route import cluster_info_body as cluster_info_body  # noqa: PLC0414
from mqstore.remoting.route import route_body as route_body  # noqa: PLC0414 (re-export)


def topic_list_body(topics: list[str]) -> bytes:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER response body (``TopicList``)."""
    return dumps_body(Bean(topicList=topics))


def kv_table_body(table: dict[str, str] | None) -> bytes:
    """A ``KVTable`` body (REGISTER_BROKER's answer: the ORDER_TOPIC_CONFIG namespace;
    GET_KVLIST_BY_NAMESPACE); empty (no body) for a namespace without keys, as
    RocketMQ's ``getKVListByNamespace`` answers."""
    return b"" if table is None else dumps_body(Bean(table=table))
