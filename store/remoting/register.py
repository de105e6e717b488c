"""REGISTER_BROKER's body, ``RegisterBrokerBody`` (fastjson), as both ends read it.

A broker's registrar writes it and the name server parses it; neither end imports
the other, so the codec and the version it carries live here. Uncompressed, as
RocketMQ's default ``compressedRegister=false``::

    {"filterServerList":[],"topicConfigSerializeWrapper":{
      "dataVersion":{"counter":3,"timestamp":1700000000000},
      "topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,
        "topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}}}}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.errors import StoreError
from mqstore.remoting.fastjson import Bean, FastjsonError, dumps_body, loads
from mqstore.remoting.topic_config import TopicConfig


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A broker's topic-config version (``DataVersion``): changes when its topics do.
    The name server compares the whole value."""

    timestamp: int = 0
    """When the broker's topics last changed (epoch ms)."""
    counter: int = 0
    """Changes counted since the broker's registrar started (from 0 again after a
    restart, when ``timestamp`` is what tells the versions apart)."""


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
