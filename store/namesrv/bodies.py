"""The name server's wire bodies (fastjson, as RocketMQ writes and reads them).

In: ``RegisterBrokerBody`` (uncompressed, RocketMQ's default ``compressedRegister=false``)::

    {"filterServerList":[],"topicConfigSerializeWrapper":{
      "dataVersion":{"counter":3,"timestamp":1700000000000},
      "topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,
        "topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}}}}

Out: ``TopicRouteData`` (brokerAddrs with unquoted long keys unless the client asked
``acceptStandardJsonOnly``), ``ClusterInfo``, ``TopicList``; ``topicSynFlag`` (4.x) and
``topicSysFlag`` (5.x) are both written; the route and ClusterInfo encoders are
:mod:`mqstore.remoting.route`'s, which the broker's built-in name server uses too.
"""

from __future__ import annotations

from typing import Any

from mqstore.errors import StoreError
from mqstore.namesrv.routes import DataVersion
from mqstore.remoting.fastjson import Bean, FastjsonError, dumps_body, loads
from mqstore.remoting.route import cluster_info_body as cluster_info_body  # noqa: PLC0414
from mqstore.remoting.route import route_body as route_body  # noqa: PLC0414 (re-export)
from mqstore.remoting.topic_config import TopicConfig


class RegisterBodyError(StoreError, ValueError):
    """A REGISTER_BROKER body that is not a RegisterBrokerBody."""


def register_body(
    topics: list[TopicConfig] | tuple[TopicConfig, ...], version: DataVersion
) -> bytes:
    """The RegisterBrokerBody a broker sends (uncompressed)."""
    wrapper = Bean(
        dataVersion=Bean(counter=version.counter, timestamp=version.timestamp),
        topicConfigTable={t.topic_name: t.to_bean() for t in topics},
    )
    return dumps_body(Bean(filterServerList=[], topicConfigSerializeWrapper=wrapper))


def parse_register_body(body: bytes) -> tuple[DataVersion, tuple[TopicConfig, ...]]:
    """The data version and topic configs of a RegisterBrokerBody; empty body: none.

    Raises:
        RegisterBodyError: not JSON, or not shaped as RegisterBrokerBody.
    """
    if not body:
        return DataVersion(), ()
    try:
        doc: Any = loads(body)
        wrapper = doc.get("topicConfigSerializeWrapper") or {}
        dv = wrapper.get("dataVersion") or {}
        version = DataVersion(int(dv.get("timestamp", 0)), int(dv.get("counter", 0)))
        table = wrapper.get("topicConfigTable") or {}
        topics = tuple(TopicConfig.from_json(str(name), obj) for name, obj in table.items())
    except (FastjsonError, AttributeError, TypeError, ValueError) as e:
        raise RegisterBodyError(f"malformed RegisterBrokerBody: {e}") from None
    return version, topics


def topic_list_body(topics: list[str]) -> bytes:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER response body (``TopicList``)."""
    return dumps_body(Bean(topicList=topics))


def kv_table_body(table: dict[str, str] | None) -> bytes:
    """A ``KVTable`` body (REGISTER_BROKER's answer: the ORDER_TOPIC_CONFIG namespace;
    GET_KVLIST_BY_NAMESPACE); empty (no body) for a namespace without keys, as
    RocketMQ's ``getKVListByNamespace`` answers."""
    return b"" if table is None else dumps_body(Bean(table=table))
