"""Request processors: one function per request code, from a request command to a
response command, over :class:`~mqstore.broker.core.BrokerCore`.

Every processor is synchronous and may block on the store, so the server runs them on
its thread pool. They never raise for a client's mistake: a malformed header or body
becomes a response with a RocketMQ code (``BadRequestError`` -> SYSTEM_ERROR with the
reason as remark, as a Java broker answers a header it cannot decode). PULL_MESSAGE is
special: it answers through a callback (long polling) and with zero-copy record views,
see :func:`process_pull`.

Header field names are RocketMQ's ``*RequestHeader`` / ``*ResponseHeader`` fields;
SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE use the one-letter names of
``SendMessageRequestHeaderV2`` (docs/protocol.md §1.6).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Final

from mqstore.broker.acl import is_copy_topic
from mqstore.broker.admin import ADMIN_PROCESSORS
from mqstore.broker.admin_stats import STATS_PROCESSORS
from mqstore.broker.admin_tables import TABLE_PROCESSORS
from mqstore.broker.as_stored import as_stored
from mqstore.broker.client_calls import CLIENT_CALL_PROCESSORS
from mqstore.broker.context import Processor, RequestContext
from mqstore.broker.namesrv import cluster_info_body, route_body
from mqstore.broker.pop_processors import POP_PROCESSORS
from mqstore.broker.pulls import PullOutcome, PullRequest
from mqstore.broker.sending import SendOutcome
from mqstore.broker.topics import TopicConfig, check_topic_config, parse_attributes
from mqstore.broker.tx_processors import TX_PROCESSORS
from mqstore.broker.wire import (
    BadRequestError,
    build_message,
    check_client_subscription,
    decode_batch,
    ext_group,
    ext_int,
    ext_str,
    parse_heartbeat,
    parse_lock_body,
    parse_send_header,
    queue_json,
)
from mqstore.commitlog import format as fmt
from mqstore.consumequeue.filter import TAG, is_tag_type, parse_subscription
from mqstore.consumequeue.search import BoundaryType
from mqstore.errors import IllegalTopicError
from mqstore.message import PROPERTY_RETRY_TOPIC, property_of, validate_topic
from mqstore.records import StoredMessage
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import V4_9_8, PullSysFlag, RequestCode, ResponseCode
from mqstore.remoting.fastjson import dumps
from mqstore.remoting.values import PERM_RW, MessageQueue, PullQuery
from mqstore.sql92 import SqlParseError

INVALID_SELECTOR = "Invalid MessageSelector. "
"""The message of RocketMQ's ``MQFilterException`` for an expression that does not
compile (``SelectorParser.parse``), the remark of SUBSCRIPTION_PARSE_FAILED."""

Records = Sequence[memoryview | bytes]
Respond = Callable[[RemotingCommand, Records], None]


def _ok(
    cmd: RemotingCommand, ext: Mapping[str, object] | None = None, body: bytes = b""
) -> RemotingCommand:
    return cmd.make_response(ResponseCode.SUCCESS, None, ext, body)


# ----------------------------------------------------------------------------- send


def _send_response(cmd: RemotingCommand, out: SendOutcome) -> RemotingCommand:
    if out.code is not ResponseCode.SUCCESS and (
        not out.results or not out.results[0].status.stored
    ):
        return cmd.make_response(out.code, out.remark or out.code.name)
    results = out.results
    ext = {
        "msgId": results[0].msg_id if len(results) == 1 else ",".join(r.msg_id for r in results),
        "queueId": str(out.queue_id),
        "queueOffset": str(out.results[0].queue_offset),
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    return cmd.make_response(out.code, out.remark, ext)  # all-str ext: copied, not coerced


def process_send(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320)."""
    h = parse_send_header(cmd.ext_fields, v2=cmd.code != RequestCode.SEND_MESSAGE)
    batch = cmd.code == RequestCode.SEND_BATCH_MESSAGE or h.batch
    entries = decode_batch(cmd.body) if batch else [(h.flag, cmd.body, h.properties)]
    messages = [
        build_message(
            h.topic,
            h.queue_id,
            body,
            props,
            flag=flag,
            sys_flag=h.sys_flag,
            born_timestamp=h.born_timestamp,
            born_host=ctx.peer,
            reconsume_times=h.reconsume_times,
        )
        for flag, body, props in entries
    ]
    sent = [props for _flag, _body, props in entries]
    messages = as_stored(ctx.core.store.cfg, messages, h.properties, batch=batch,
                         sent_properties=sent)  # fmt: skip
    out = ctx.core.sender.send(
        h.topic,
        h.queue_id,
        messages,
        default_topic=h.default_topic,
        default_queue_nums=h.default_topic_queue_nums,
        max_reconsume_times=h.max_reconsume_times,
    )
    return _send_response(cmd, out)


# ----------------------------------------------------------------------------- pull


_COMMIT_OFFSET: Final = PullSysFlag.COMMIT_OFFSET.value
_SUSPEND: Final = PullSysFlag.SUSPEND.value
_SUBSCRIPTION: Final = PullSysFlag.SUBSCRIPTION.value
"""The PULL_MESSAGE sysFlag bits as plain ints: ``int & IntFlag`` builds an enum
member per test, a cost every pull would pay three times."""


def _pull_response(cmd: RemotingCommand, out: PullOutcome) -> RemotingCommand:
    ext = {  # strings already: the response copies them instead of coercing each value
        "suggestWhichBrokerId": str(out.suggest_which_broker_id),
        "nextBeginOffset": str(out.next_begin_offset),
        "minOffset": str(out.min_offset),
        "maxOffset": str(out.max_offset),
    }
    return cmd.make_response(out.code, out.remark, ext)


def pull_request(ctx: RequestContext, cmd: RemotingCommand) -> PullRequest:
    """PullMessageRequestHeader -> PullRequest.

    The queue is named by this broker's name, the header's topic and its queue id as
    sent (the broker judges the id against the topic's config). Without the
    SUBSCRIPTION flag, the subscription the group announced in its heartbeat for the
    topic is used ("*" if none).

    Raises:
        BadRequestError: a required field is missing or malformed, or the queue id is
            outside Java's ``int`` range.
    """
    ext = cmd.ext_fields
    group = ext_group(ext, "consumerGroup")
    topic = ext_str(ext, "topic")
    try:
        queue = MessageQueue(topic, ctx.core.config.broker_name, ext_int(ext, "queueId"))
    except ValueError as e:
        raise BadRequestError(f"the custom field <queueId> is illegal: {e}") from None
    sys_flag = ext_int(ext, "sysFlag", 0)
    expression, expression_type = "*", TAG
    if sys_flag & _SUBSCRIPTION:
        expression = ext.get("subscription") or "*"
        expression_type = ext.get("expressionType") or TAG
    else:
        info = ctx.core.consumers.group_info(group)
        for sub in info.data.subscriptions if info is not None else ():
            if sub.topic == topic:
                expression, expression_type = sub.expression, sub.expression_type
    commit = ext_int(ext, "commitOffset", -1) if sys_flag & _COMMIT_OFFSET else -1
    suspend = ext_int(ext, "suspendTimeoutMillis", 0) if sys_flag & _SUSPEND else 0
    query = PullQuery(
        group=group,
        queue=queue,
        offset=ext_int(ext, "queueOffset"),
        max_count=max(1, ext_int(ext, "maxMsgNums", 32)),
        expression=expression,
        expression_type=expression_type,
        commit_offset=commit if commit >= 0 else None,
        suspend_ms=max(0, suspend),
    )
    return PullRequest(query, client_host=ctx.peer[0])


def _property_filter(
    ctx: RequestContext, cmd: RemotingCommand, request: PullRequest
) -> tuple[PullRequest, RemotingCommand | None]:
    """RocketMQ ``PullMessageProcessor``'s checks of a non-tag subscription, in its order.

    With the subscription in the request (sysflag 0x4): an empty expression is
    SUBSCRIPTION_PARSE_FAILED; one that does not compile leaves RocketMQ without
    filter data, and its ``ExpressionMessageFilter`` then passes every message (so
    does this). With the heartbeat's subscription: one that did not compile is
    FILTER_DATA_NOT_EXIST. Then a broker without ``enablePropertyFilter`` is
    SYSTEM_ERROR.
    """
    q = request.query
    if is_tag_type(q.expression_type):
        return request, None
    in_request = ext_int(cmd.ext_fields, "sysFlag", 0) & _SUBSCRIPTION
    if in_request and not (cmd.ext_fields.get("subscription") or ""):
        remark = "parse the consumer's subscription failed"
        return request, cmd.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, remark)
    try:
        parse_subscription(q.expression, q.expression_type)
    except SqlParseError:
        if not in_request:
            remark = "The broker's consumer filter data is not exist!Your expression may be wrong!"
            return request, cmd.make_response(ResponseCode.FILTER_DATA_NOT_EXIST, remark)
        # no filter data: every message passes
        request = replace(request, query=replace(q, expression="*", expression_type=TAG))
    if not ctx.core.config.enable_property_filter:
        remark = f"The broker does not support consumer to filter message by {q.expression_type}"
        return request, cmd.make_response(ResponseCode.SYSTEM_ERROR, remark)
    return request, None


def process_pull(ctx: RequestContext, cmd: RemotingCommand, respond: Respond) -> None:
    """PULL_MESSAGE (11): ``respond(response, records)`` exactly once, maybe later
    from another thread. ``records`` are the raw CommitLog records (the body)."""
    try:
        request = pull_request(ctx, cmd)
    except BadRequestError as e:
        respond(cmd.make_response(ResponseCode.SYSTEM_ERROR, str(e)), ())
        return
    request, refusal = _property_filter(ctx, cmd, request)
    if refusal is not None:
        respond(refusal, ())
        return

    def on_done(out: PullOutcome) -> None:
        records = out.buffers if out.code is ResponseCode.SUCCESS else ()
        if records and ctx.checks_reads and is_copy_topic(request.query.queue.topic):
            records = _readable_copies(ctx, request.query.queue.topic, records)
        respond(_pull_response(cmd, out), records)

    ctx.core.pull(request, on_done)


# -------------------------------------------------------------------------- offsets


def process_query_offset(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """QUERY_CONSUMER_OFFSET (14)."""
    ext = cmd.ext_fields
    offset = ctx.core.queries.query_offset(
        ext_group(ext, "consumerGroup"), ext_str(ext, "topic"), ext_int(ext, "queueId")
    )
    if offset is None:
        return cmd.make_response(
            ResponseCode.QUERY_NOT_FOUND, "Not found, maybe this group consumer boot first"
        )
    return _ok(cmd, {"offset": offset})


def process_update_offset(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """UPDATE_CONSUMER_OFFSET (15); an illegal topic name is TOPIC_NOT_EXIST (no such
    topic can exist) and commits nothing."""
    ext = cmd.ext_fields
    topic = ext_str(ext, "topic")
    try:
        ctx.core.queries.update_offset(
            ext_group(ext, "consumerGroup"),
            topic,
            ext_int(ext, "queueId"),
            ext_int(ext, "commitOffset"),
        )
    except IllegalTopicError:
        return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} not exist!")
    return _ok(cmd)


def process_max_offset(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_MAX_OFFSET (30)."""
    ext = cmd.ext_fields
    return _ok(
        cmd, {"offset": ctx.core.queries.max_offset(ext_str(ext, "topic"), ext_int(ext, "queueId"))}
    )


def process_min_offset(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_MIN_OFFSET (31)."""
    ext = cmd.ext_fields
    return _ok(
        cmd, {"offset": ctx.core.queries.min_offset(ext_str(ext, "topic"), ext_int(ext, "queueId"))}
    )


def process_search_offset(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """SEARCH_OFFSET_BY_TIMESTAMP (29); 5.x ``boundaryType`` LOWER/UPPER honoured."""
    ext = cmd.ext_fields
    boundary = BoundaryType.UPPER if ext.get("boundaryType") == "UPPER" else BoundaryType.LOWER
    offset = ctx.core.queries.search_offset(
        ext_str(ext, "topic"), ext_int(ext, "queueId"), ext_int(ext, "timestamp"), boundary
    )
    return _ok(cmd, {"offset": offset})


def process_earliest_time(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_EARLIEST_MSG_STORETIME (32)."""
    ext = cmd.ext_fields
    t = ctx.core.queries.earliest_message_time(ext_str(ext, "topic"), ext_int(ext, "queueId"))
    return _ok(cmd, {"timestamp": t})


# ------------------------------------------------------------------------- messages


def process_view_message(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """VIEW_MESSAGE_BY_ID (33): header ``offset`` (physical) -> the raw record, if the
    sender may read its topic (``ctx.read_refusal``; else NO_PERMISSION)."""
    found = ctx.core.queries.record_at(ext_int(cmd.ext_fields, "offset"))
    if found is None:
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, "can not find message by the offset")
    refusal = _record_refusal(ctx, found[0])
    if refusal is not None:
        return cmd.make_response(ResponseCode.NO_PERMISSION, refusal)
    return _ok(cmd, body=found[1])


def _readable_copies(
    ctx: RequestContext, topic: str, records: Sequence[memoryview]
) -> tuple[memoryview, ...]:
    """The records of retry or dead-letter ``topic`` the sender may read: a copy of a
    topic the account may not SUB (its ``RETRY_TOPIC``) is left out, as a record a
    filter rejects is (the consumer moves past it by the answer's next offset). The
    group's own SUB lets an account pull the group's retry topic, but not read the
    copies of a topic it is denied that another member's consumption put there."""
    kept = []
    for raw in records:
        info = fmt.scan(raw, 0, len(raw), check_crc=False)
        origin = (
            property_of(info.properties_string, PROPERTY_RETRY_TOPIC)
            if isinstance(info, fmt.RecordInfo)
            else None
        )
        if ctx.read_refusal(topic, origin) is None:
            kept.append(raw)
    return tuple(kept)


def _record_refusal(ctx: RequestContext, msg: StoredMessage) -> str | None:
    """Why the sender may not read ``msg`` (its topic, and the topic a retry or
    dead-letter copy came from), or None."""
    return ctx.read_refusal(msg.topic, msg.properties.get(PROPERTY_RETRY_TOPIC))


def process_query_message(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """QUERY_MESSAGE (12): by key/UNIQ_KEY; body = the matching raw records, if the
    sender may read each (``ctx.read_refusal``: a retry or dead-letter topic holds
    copies of other topics' records; else NO_PERMISSION)."""
    ext = cmd.ext_fields
    core = ctx.core
    result = core.queries.query_message(
        ext_str(ext, "topic"),
        ext_str(ext, "key"),
        ext_int(ext, "maxNum", 32),
        ext_int(ext, "beginTimestamp", 0),
        ext_int(ext, "endTimestamp", (1 << 63) - 1),
    )
    for m in result.messages:
        refusal = _record_refusal(ctx, m)
        if refusal is not None:
            return cmd.make_response(ResponseCode.NO_PERMISSION, refusal)
    raws = [core.queries.raw_message_at(m.physical_offset) for m in result.messages]
    body = b"".join(r for r in raws if r)
    ext_out = {
        "indexLastUpdateTimestamp": result.index_last_update_timestamp,
        "indexLastUpdatePhyoffset": result.index_last_update_phy_offset,
    }
    if not body:
        return cmd.make_response(
            ResponseCode.QUERY_NOT_FOUND,
            "can not find message, maybe time range not correct",
            ext_out,
        )
    return _ok(cmd, ext_out, body)


def process_send_back(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """CONSUMER_SEND_MSG_BACK (36): the record at ``offset`` is copied only if the sender
    may read its topic (``ctx.read_refusal``)."""
    ext = cmd.ext_fields
    max_times = ext.get("maxReconsumeTimes")
    reply = ctx.core.sender.send_back(
        ext_group(ext, "group"),
        ext_int(ext, "offset"),
        ext_int(ext, "delayLevel", 0),
        ext.get("originMsgId", ""),
        ext_int(ext, "maxReconsumeTimes") if max_times else None,
        read_refusal=ctx.read_refusal,
    )
    return cmd.make_response(reply.code, reply.remark)


# ------------------------------------------------------------------------ consumers


def process_heartbeat(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """HEART_BEAT (34). The response carries the broker's remoting version (V4_9_8), as
    every response of a RocketMQ broker does: a Java client records it per broker
    (``MQClientInstance.brokerVersionTable``) and refuses to pull with a SQL92
    subscription from a broker below V4_1_0_SNAPSHOT (``PullAPIWrapper.pullKernelImpl``),
    so with version 0 a ``MessageSelector.bySql`` push consumer never pulls."""
    hb = parse_heartbeat(cmd.body)
    ctx.core.heartbeat(hb, ctx.channel)
    ctx.core.connections.heartbeat(hb.client_id, hb.producer_groups, ctx.channel,
                                   f"{ctx.peer[0]}:{ctx.peer[1]}", cmd.language.name,
                                   cmd.version)  # fmt: skip
    return cmd.make_response(ResponseCode.SUCCESS, version=V4_9_8)


def process_check_client_config(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """CHECK_CLIENT_CONFIG (46), which a Java push consumer sends at start for each
    non-tag subscription (``checkClientInBroker``; the start fails unless SUCCESS): a
    broker without ``enablePropertyFilter`` is SYSTEM_ERROR, an expression that does
    not compile SUBSCRIPTION_PARSE_FAILED (``ClientManageProcessor.checkClientConfig``)."""
    sub = check_client_subscription(cmd.body)
    if sub is None or is_tag_type(sub.expression_type):
        return _ok(cmd)
    if not ctx.core.config.enable_property_filter:
        remark = f"The broker does not support consumer to filter message by {sub.expression_type}"
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark)
    try:
        parse_subscription(sub.expression, sub.expression_type)
    except SqlParseError:
        return cmd.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, INVALID_SELECTOR)
    return _ok(cmd)


def process_unregister(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """UNREGISTER_CLIENT (35): leaves the named consumer group."""
    ext = cmd.ext_fields
    if ext.get("consumerGroup"):
        ctx.core.unregister(ext_str(ext, "clientID"), ext_group(ext, "consumerGroup"))
    return _ok(cmd)


def process_consumer_list(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_CONSUMER_LIST_BY_GROUP (38); SYSTEM_ERROR for a group with no member, as
    RocketMQ answers."""
    group = ext_group(cmd.ext_fields, "consumerGroup")
    ids = ctx.core.consumer_ids(group)
    if not ids:
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
    return _ok(cmd, body=dumps({"consumerIdList": ids}).encode())


def process_lock(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """LOCK_BATCH_MQ (41): body ``{"lockOKMQSet":[...]}``."""
    group, client_id, queues = parse_lock_body(cmd.body)
    locked = ctx.core.lock_batch(group, client_id, queues)
    body = dumps({"lockOKMQSet": [queue_json(q) for q in sorted(locked)]})
    return _ok(cmd, body=body.encode())


def process_unlock(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """UNLOCK_BATCH_MQ (42)."""
    group, client_id, queues = parse_lock_body(cmd.body)
    ctx.core.unlock_batch(group, client_id, queues)
    return _ok(cmd)


# --------------------------------------------------------------------- name server


def process_route(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC (105)."""
    ext = cmd.ext_fields
    topic = ext_str(ext, "topic")
    config = ctx.core.topic_config(topic)
    if config is None:
        remark = f"No topic route info in name server for the topic: {topic}"
        return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, remark)
    bc = ctx.core.config
    body = route_body(
        config,
        cluster=bc.cluster_name,
        broker_name=bc.broker_name,
        broker_id=bc.broker_id,
        addr=ctx.broker_addr,
        standard_json=ext.get("acceptStandardJsonOnly") == "true",
    )
    return _ok(cmd, body=body)


def process_cluster_info(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_BROKER_CLUSTER_INFO (106)."""
    bc = ctx.core.config
    body = cluster_info_body(
        cluster=bc.cluster_name, broker_name=bc.broker_name, broker_id=bc.broker_id,
        addr=ctx.broker_addr,
    )  # fmt: skip
    return _ok(cmd, body=body)


def process_topic_list(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): body ``{"topicList":[...]}``."""
    return _ok(cmd, body=dumps({"topicList": sorted(ctx.core.topics.all())}).encode())


def process_kv_config(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_KV_CONFIG (101): we keep no KV config, so QUERY_NOT_FOUND, as a name server
    without the item answers (clients treat it as "no order-topic config")."""
    ext = cmd.ext_fields
    remark = f"No config item, Namespace: {ext.get('namespace')} Key: {ext.get('key')}"
    return cmd.make_response(ResponseCode.QUERY_NOT_FOUND, remark)


def _attributes(ctx: RequestContext, topic: str, text: str) -> tuple[tuple[str, str], ...]:
    """The topic's attributes after an update: the existing ones, those given replacing
    theirs (RocketMQ 5 ``AttributeUtil.alterCurrentAttributes``)."""
    old = ctx.core.topics.get(topic)
    merged = dict(old.attributes if old is not None else ()) | dict(parse_attributes(text))
    return tuple(sorted(merged.items()))


def process_create_topic(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC (17)."""
    ext = cmd.ext_fields
    topic = ext_str(ext, "topic")
    try:
        validate_topic(topic)
    except IllegalTopicError as e:
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(e))
    config = TopicConfig(
        topic,
        ext_int(ext, "readQueueNums", 8),
        ext_int(ext, "writeQueueNums", 8),
        ext_int(ext, "perm", PERM_RW),
        ext.get("topicFilterType", "SINGLE_TAG"),
        ext_int(ext, "topicSysFlag", 0),
        ext.get("order") == "true",
        _attributes(ctx, topic, ext.get("attributes") or ""),
    )
    ctx.core.create_topic(check_topic_config(config))  # BadRequestError: SYSTEM_ERROR
    return _ok(cmd)


PROCESSORS: dict[int, Processor] = {
    RequestCode.SEND_MESSAGE: process_send,
    RequestCode.SEND_MESSAGE_V2: process_send,
    RequestCode.SEND_BATCH_MESSAGE: process_send,
    RequestCode.QUERY_MESSAGE: process_query_message,
    RequestCode.QUERY_CONSUMER_OFFSET: process_query_offset,
    RequestCode.UPDATE_CONSUMER_OFFSET: process_update_offset,
    RequestCode.UPDATE_AND_CREATE_TOPIC: process_create_topic,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: process_search_offset,
    RequestCode.GET_MAX_OFFSET: process_max_offset,
    RequestCode.GET_MIN_OFFSET: process_min_offset,
    RequestCode.GET_EARLIEST_MSG_STORETIME: process_earliest_time,
    RequestCode.VIEW_MESSAGE_BY_ID: process_view_message,
    RequestCode.HEART_BEAT: process_heartbeat,
    RequestCode.UNREGISTER_CLIENT: process_unregister,
    RequestCode.CHECK_CLIENT_CONFIG: process_check_client_config,
    RequestCode.CONSUMER_SEND_MSG_BACK: process_send_back,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: process_consumer_list,
    RequestCode.LOCK_BATCH_MQ: process_lock,
    RequestCode.UNLOCK_BATCH_MQ: process_unlock,
    **POP_PROCESSORS,  # 5.x POP codes (mqstore.broker.pop_processors)
    **ADMIN_PROCESSORS,  # mqadmin / dashboard codes (mqstore.broker.admin)
    **TABLE_PROCESSORS,  # broker config and group table (mqstore.broker.admin_tables)
    **STATS_PROCESSORS,  # who consumes, stats, consume queues (mqstore.broker.admin_stats)
    **CLIENT_CALL_PROCESSORS,  # relayed to a client (mqstore.broker.client_calls)
    **TX_PROCESSORS,  # END_TRANSACTION (mqstore.broker.tx_processors)
}
"""Broker request codes (PULL_MESSAGE is handled by :func:`process_pull`)."""

NAME_SERVER_PROCESSORS: dict[int, Processor] = {
    RequestCode.GET_ROUTEINFO_BY_TOPIC: process_route,
    RequestCode.GET_BROKER_CLUSTER_INFO: process_cluster_info,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: process_topic_list,
    RequestCode.GET_KV_CONFIG: process_kv_config,
}
"""Name-server request codes, served on the broker port when enabled."""


def process(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """Run the processor of ``cmd.code`` (not PULL_MESSAGE); REQUEST_CODE_NOT_SUPPORTED
    for unknown codes, SYSTEM_ERROR with the reason for a malformed request."""
    handler = PROCESSORS.get(cmd.code)
    if handler is None and ctx.serve_name_server:
        handler = NAME_SERVER_PROCESSORS.get(cmd.code)
    if handler is None:
        return cmd.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
        )
    try:
        return handler(ctx, cmd)
    except BadRequestError as e:
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(e))
