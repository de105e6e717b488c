"""Response bodies of the admin requests, in RocketMQ's JSON (fastjson rules).

Each function writes the body of one ``common/.../protocol/body`` class as a Java
broker sends it (docs/admin.md §2-6):

=======================  ==========================================================
``TopicStatsTable``      ``{"offsetTable":{<MessageQueue>:<TopicOffset>}}``
``ConsumeStats``         ``{"consumeTps":<double>,"offsetTable":{<MessageQueue>:<OffsetWrapper>}}``
``ResetOffsetBody``      ``{"offsetTable":{<MessageQueue>:<long>}}``
``KVTable``              ``{"table":{<String>:<String>}}``
``ConsumerConnection``   connectionSet, consumeFromWhere, consumeType, messageModel,
                         subscriptionTable
``ProducerConnection``   ``{"connectionSet":[<Connection>]}``
=======================  ==========================================================

A ``Map<MessageQueue, V>`` is written by fastjson with the *bean* as the key, unquoted:
``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``. That is not standard JSON; a
Java client reads it back with fastjson, so we write exactly that form. Bean fields are
alphabetical (fastjson's order); ``null`` fields are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from mqstore.broker.connections import ClientConnection
from mqstore.remoting.fastjson import Bean, dumps
from mqstore.remoting.values import ConsumerData, MessageQueue, SubscriptionData


@dataclass(frozen=True, slots=True)
class TopicOffset:
    """One queue of ``TopicStatsTable``: first and next offsets, last store time;
    :meth:`bean` is its ``TopicOffset``."""

    queue: MessageQueue
    min_offset: int
    max_offset: int
    last_update_timestamp: int

    def bean(self) -> Bean:
        return Bean(
            lastUpdateTimestamp=self.last_update_timestamp,
            maxOffset=self.max_offset,
            minOffset=self.min_offset,
        )


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """One queue of ``ConsumeStats`` (``OffsetWrapper``): the broker's next offset,
    the group's committed offset and the store time of the last consumed message."""

    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def lag(self) -> int:
        """Messages not yet consumed (what ``consumerProgress`` prints as Diff)."""
        return max(0, self.broker_offset - self.consumer_offset)

    def bean(self) -> Bean:
        """The ``OffsetWrapper``; its ``pullOffset`` (5.x) is the committed offset, since
        the broker keeps no separate pull offset."""
        return Bean(
            brokerOffset=self.broker_offset,
            consumerOffset=self.consumer_offset,
            lastTimestamp=self.last_timestamp,
            pullOffset=self.consumer_offset,
        )


def _mq_key(mq: MessageQueue) -> str:
    return dumps(Bean(brokerName=mq.broker_name, queueId=mq.queue_id, topic=mq.topic))


def _mq_map(pairs: Iterable[tuple[MessageQueue, object]]) -> str:
    return "{" + ",".join(f"{_mq_key(mq)}:{dumps(v)}" for mq, v in pairs) + "}"


def _offset_table(rows: Sequence[TopicOffset | QueueProgress]) -> str:
    """The ``offsetTable`` of the rows' queues, each to its row's bean."""
    return _mq_map((row.queue, row.bean()) for row in rows)


def topic_stats_body(queues: Sequence[TopicOffset]) -> bytes:
    """``TopicStatsTable``."""
    return ('{"offsetTable":' + _offset_table(queues) + "}").encode()


def consume_stats_body(queues: Sequence[QueueProgress], consume_tps: float = 0.0) -> bytes:
    """``ConsumeStats``."""
    tps = dumps(float(consume_tps))
    return ('{"consumeTps":' + tps + ',"offsetTable":' + _offset_table(queues) + "}").encode()


def reset_offset_body(offsets: Mapping[MessageQueue, int]) -> bytes:
    """``ResetOffsetBody``."""
    return ('{"offsetTable":' + _mq_map(sorted(offsets.items())) + "}").encode()


def kv_table_body(table: Mapping[str, str]) -> bytes:
    """``KVTable`` (``HashMap<String, String>``)."""
    return dumps({"table": dict(table)}).encode()


def _connection(c: ClientConnection) -> Bean:
    return Bean(
        clientAddr=c.client_addr, clientId=c.client_id, language=c.language, version=c.version
    )


def producer_connection_body(conns: Sequence[ClientConnection]) -> bytes:
    """``ProducerConnection``."""
    return dumps(Bean(connectionSet=[_connection(c) for c in conns])).encode()


def java_string_hash(text: str) -> int:
    """``String.hashCode`` (the tag codes of ``SubscriptionData.codeSet``)."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def subscription_bean(sub: SubscriptionData, sub_version: int) -> Bean:
    """``SubscriptionData`` for a TAG expression (``*`` -> empty tag sets)."""
    tags = (
        []
        if sub.expression.strip() in ("", "*")
        else [t.strip() for t in sub.expression.split("||") if t.strip()]
    )
    return Bean(
        classFilterMode=False,
        codeSet=[java_string_hash(t) for t in tags],
        expressionType="TAG",
        subString=sub.expression,
        subVersion=sub_version,
        tagsSet=tags,
        topic=sub.topic,
    )


def consumer_connection_body(
    conns: Sequence[ClientConnection], data: ConsumerData, sub_version: int
) -> bytes:
    """``ConsumerConnection``: the group's live clients and its announced consumer data."""
    return dumps(
        Bean(
            connectionSet=[_connection(c) for c in conns],
            consumeFromWhere=data.consume_from_where.value,
            consumeType=data.consume_type.value,
            messageModel=data.message_model.value,
            subscriptionTable={
                s.topic: subscription_bean(s, sub_version) for s in data.subscriptions
            },
        )
    ).encode()
