"""Admin views of who consumes what and how fast (docs/admin.md §13-15):

====  ===================================  ==========================================
code  request                              answer
====  ===================================  ==========================================
300   QUERY_TOPIC_CONSUME_BY_WHO           ``GroupList``: groups of a topic
315   VIEW_BROKER_STATS_DATA               ``BrokerStatsData``: one stats item
317   GET_BROKER_CONSUME_STATS             ``ConsumeStatsList``: every group's progress
321   QUERY_CONSUME_QUEUE                  ``QueryConsumeQueueResponseBody``: raw units
====  ===================================  ==========================================

Rules
-----
Rule 1. A topic's groups are the online groups subscribed to it plus every group with
committed offsets on it (``ConsumerManager.queryTopicConsumeByWho`` and
``ConsumerOffsetManager.whichGroupByTopic``); ``mqadmin`` reads them for
``topicList -c``, ``statsAll`` and the message track of the ``queryMsgBy*`` commands.

Rule 2. Stats items are ``TOPIC_PUT_NUMS`` (key: topic) and ``GROUP_GET_NUMS`` (key:
``topic@group``), counted from the broker's start (store.broker.traffic); an item never
counted is SYSTEM_ERROR ``The stats <name> <key> not exist``, as a Java broker answers
for an item it has not created yet. Other item names are unknown to us and answered the
same way.

Rule 3. Broker consume stats walk every group of the subscription table, and per group
the topics it committed offsets for, per write queue (the Java broker's loop); with
``isOrder`` only order topics. ``totalDiff`` sums the lags.

Rule 4. QUERY_CONSUME_QUEUE answers the queue's min and max offsets and up to
``count`` units from ``index`` within the file holding ``index`` (RocketMQ
``getIndexBuffer``). A queue the store does not have is SYSTEM_ERROR
``<queueId>@<topic> is not exist!``; an index outside the held units is SUCCESS with
remark ``Index <index> of <queueId>@<topic> is not exist!`` and no body, as the 4.9.8
broker answers (it sets the body after reading the units; its own ``queryCq`` then fails
on the missing body). With a
``consumerGroup`` the group's subscription of the topic is included, or ``filterData``
says it is not online. mqstore keeps no consume-queue extension (no ``bitMap``,
``extendDataJson``, ``eval``), as a Java broker without ``enableConsumeQueueExt``.
"""

from __future__ import annotations

from mqstore.broker.admin import consume_stats, consume_tps, topics_of_group
from mqstore.broker.admin_bodies import consume_stats_body, subscription_bean
from mqstore.broker.context import Processor, RequestContext
from mqstore.broker.core import BrokerCore
from mqstore.broker.offsets import TOPIC_GROUP_SEPARATOR
from mqstore.consumequeue.format import UNIT_SIZE, unpack_unit
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from mqstore.remoting.fastjson import Bean, dumps
from mqstore.remoting.headers import ext_int, ext_str


def _ok(cmd: RemotingCommand, body: bytes, remark: str | None = None) -> RemotingCommand:
    return cmd.make_response(ResponseCode.SUCCESS, remark, None, body)


def groups_of_topic(core: BrokerCore, topic: str) -> list[str]:
    """Rule 1."""
    prefix = topic + TOPIC_GROUP_SEPARATOR
    committed = {k[len(prefix) :] for k in core.offsets.table() if k.startswith(prefix)}
    return sorted(committed | set(core.consumers.groups_of_topic(topic)))


def process_consume_by_who(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """QUERY_TOPIC_CONSUME_BY_WHO (300): header ``topic``."""
    topic = ext_str(cmd.ext_fields, "topic")
    return _ok(cmd, dumps(Bean(groupList=groups_of_topic(ctx.core, topic))).encode())


def process_stats_data(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """VIEW_BROKER_STATS_DATA (315): headers ``statsName``, ``statsKey``; Rule 2."""
    name = ext_str(cmd.ext_fields, "statsName")
    key = ext_str(cmd.ext_fields, "statsKey")
    snaps = ctx.core.traffic.snapshots(name, key)
    if snaps is None:
        remark = f"The stats <{name}> <{key}> not exist"
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark)
    items = [Bean(avgpt=s.avgpt, sum=s.sum, tps=s.tps) for s in snaps]
    body = Bean(statsDay=items[2], statsHour=items[1], statsMinute=items[0])
    return _ok(cmd, dumps(body).encode())


def process_broker_consume_stats(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_BROKER_CONSUME_STATS (317): header ``isOrder``; Rule 3."""
    core = ctx.core
    order_only = cmd.ext_fields.get("isOrder", "false").lower() == "true"
    entries, total_diff = [], 0
    for group in core.groups.all():
        stats = []
        for topic in topics_of_group(core, group):
            config = core.topic_config(topic)
            if config is None or (order_only and not config.order):
                continue
            rows = consume_stats(core, group, topic, write_queues=True)
            if not rows:
                continue
            total_diff += sum(r.broker_offset - r.consumer_offset for r in rows)
            stats.append(consume_stats_body(rows, consume_tps(core, group, rows)).decode())
        entries.append("{" + dumps(group) + ":[" + ",".join(stats) + "]}")
    body = (
        '{"brokerAddr":' + dumps(ctx.broker_addr) + ',"consumeStatsList":['
        + ",".join(entries) + '],"totalDiff":' + str(total_diff) + "}"
    )  # fmt: skip
    return _ok(cmd, body.encode())


def process_query_cq(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """QUERY_CONSUME_QUEUE (321): headers ``topic``, ``queueId``, ``index``, ``count``,
    optional ``consumerGroup``; Rule 4."""
    ext = cmd.ext_fields
    topic, queue_id = ext_str(ext, "topic"), ext_int(ext, "queueId")
    index, count = ext_int(ext, "index"), ext_int(ext, "count")
    group = ext.get("consumerGroup")
    cq = ctx.core.store.consume_queue(topic, queue_id)
    if cq is None:
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
    body = Bean(maxQueueIndex=cq.max_offset, minQueueIndex=cq.min_offset)
    if group is not None:
        info = ctx.core.consumers.group_info(group)
        sub = next((s for s in info.data.subscriptions if s.topic == topic), None) if info else None
        if sub is None:
            body["filterData"] = f"{group}@{topic} is not online!"
        else:
            body["subscriptionData"] = subscription_bean(sub, 0)
    units = cq.units_from(index) if index >= 0 else None
    if units is None:  # the Java broker sets the body only after the units: none here
        remark = f"Index {index} of {queue_id}@{topic} is not exist!"
        return _ok(cmd, b"", remark)
    rows = []
    for pos in range(0, min(len(units), max(0, count) * UNIT_SIZE), UNIT_SIZE):
        phys, size, tags = unpack_unit(units, pos)
        rows.append(Bean(eval=False, physicOffset=phys, physicSize=size, tagsCode=tags))
    body["queueData"] = rows
    return _ok(cmd, dumps(body).encode())


STATS_PROCESSORS: dict[int, Processor] = {
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: process_consume_by_who,
    RequestCode.VIEW_BROKER_STATS_DATA: process_stats_data,
    RequestCode.GET_BROKER_CONSUME_STATS: process_broker_consume_stats,
    RequestCode.QUERY_CONSUME_QUEUE: process_query_cq,
}
"""The codes of this module (registered by ``mqstore.broker.processors``)."""
