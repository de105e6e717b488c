"""Broker side of RocketMQ 5.x POP: the request processors over a :class:`BrokerPop`.

Codes (``RequestCode`` in RocketMQ): POP_MESSAGE 200050, ACK_MESSAGE 200051,
PEEK_MESSAGE 200052, CHANGE_MESSAGE_INVISIBLETIME 200053, NOTIFICATION 200054,
BATCH_ACK_MESSAGE 200151, QUERY_ASSIGNMENT 400, SET_MESSAGE_REQUEST_MODE 401. Header
fields are the upstream ``*RequestHeader`` / ``*ResponseHeader`` names:

- POP_MESSAGE ``consumerGroup topic queueId maxMsgNums invisibleTime pollTime bornTime
  initMode exp expType order`` -> SUCCESS, body = the records, header ``popTime
  invisibleTime reviveQid restNum startOffsetInfo msgOffsetInfo orderCountInfo`` (and
  ``brokerName``, ours, so a client needs no route to build receipt handles), remark
  ``FOUND``; no message (``maxMsgNums`` 0 included) -> POLLING_TIMEOUT, remark
  ``NO_MESSAGE_IN_QUEUE``, header ``popTime invisibleTime reviveQid restNum`` and empty
  offset infos, as RocketMQ 5.3.3 answers both (``restNum``: the messages left past the
  group's offsets in the queues looked at; tests/oracle/test_pop_533.py). The client
  builds each message's receipt handle from the header as
  ``MQClientAPIImpl.processPopResponse`` does (``mqstore.pop.wire``).
- ACK_MESSAGE ``consumerGroup topic queueId extraInfo offset`` -> SUCCESS, or
  NO_MESSAGE when the handle's message is no longer in flight.
- BATCH_ACK_MESSAGE: body ``{"consumerGroup":..,"topic":..,"extraInfoList":[..]}``
  (ours: RocketMQ's ``BatchAckMessageRequestBody`` carries bit sets) -> body
  ``{"statusList":["OK"|"NO_EXIST",..]}``.
- CHANGE_MESSAGE_INVISIBLETIME ``consumerGroup topic queueId extraInfo offset
  invisibleTime`` -> header ``popTime reviveQid invisibleTime``.
- PEEK_MESSAGE ``consumerGroup topic queueId maxMsgNums`` -> body = the records.
- NOTIFICATION ``consumerGroup topic queueId pollTime`` -> header ``hasMsg``.
- QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE: bodies and rules in
  ``mqstore.broker.pop_assignment``.

Long polling (``pollTime``, at most :data:`MAX_POLL_MS`): the broker server runs
POP_MESSAGE and NOTIFICATION through ``mqstore.broker.pop_polling``, which suspends a
request that finds nothing without holding a thread; the processors here, called with
``pollTime`` > 0 directly, wait on the calling thread.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from mqstore.broker.acl import is_copy_topic
from mqstore.broker.context import Processor, RequestContext
from mqstore.broker.names import RETRY_GROUP_TOPIC_PREFIX
from mqstore.broker.pop_assignment import RequestMode, assign
from mqstore.broker.pop_polling import MAX_POLL_MS, Respond, suspend
from mqstore.broker.wire import BadRequestError
from mqstore.consumequeue.filter import TAG, parse_subscription
from mqstore.errors import InvalidReceiptHandleError
from mqstore.message import PROPERTY_RETRY_TOPIC
from mqstore.pop import wire as pop_wire
from mqstore.pop.records import MAX_BATCH
from mqstore.pop.service import AckStatus, PopResult, PopService
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import ResponseCode
from mqstore.remoting.fastjson import dumps, loads
from mqstore.remoting.headers import ext_int, ext_str
from mqstore.sql92 import SqlParseError

if TYPE_CHECKING:
    from mqstore.broker.broker_pop import BrokerPop
    from mqstore.broker.core import BrokerCore


class PopCode(enum.IntEnum):
    """The request codes of 5.x message-level consumption (RocketMQ ``RequestCode``)."""

    QUERY_ASSIGNMENT = 400
    SET_MESSAGE_REQUEST_MODE = 401
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    NOTIFICATION = 200054
    BATCH_ACK_MESSAGE = 200151


def broker_pop(core: BrokerCore) -> BrokerPop:
    """The POP service of ``core``, started on first use (``BrokerCore.pop``)."""
    return core.pop


def _service(ctx: RequestContext) -> PopService:
    return broker_pop(ctx.core).service


def _poll_ms(ext: dict[str, str]) -> int:
    return max(0, min(ext_int(ext, "pollTime", 0), MAX_POLL_MS))


FOUND, NO_MESSAGE_IN_QUEUE = "FOUND", "NO_MESSAGE_IN_QUEUE"
"""POP_MESSAGE's remarks (RocketMQ 5.3.3 names its ``GetMessageStatus`` there)."""


def process_pop(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """POP_MESSAGE (200050)."""
    ext = cmd.ext_fields
    group, topic = ext_str(ext, "consumerGroup"), ext_str(ext, "topic")
    if ctx.core.topics.get(topic) is None:
        return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    max_nums = ext_int(ext, "maxMsgNums", 32)
    if max_nums > MAX_BATCH:
        host = ctx.broker_addr.rpartition(":")[0]
        remark = f"the broker[{host}] pop message's num is greater than {MAX_BATCH}"
        return cmd.make_response(ResponseCode.INVALID_PARAMETER, remark)
    try:  # PopMessageProcessor: a non-tag expression that does not compile
        sub = parse_subscription(ext_str(ext, "exp", "*") or "*", ext.get("expType") or TAG)
    except SqlParseError:
        remark = "parse the consumer's subscription failed"
        return cmd.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, remark)
    svc = _service(ctx)
    r = svc.pop(
        group, topic, max_nums, pop_wire.pop_invisible_time(ext),
        queue_id=ext_int(ext, "queueId", -1), subscription=sub,
        fifo=ext_str(ext, "order", "false") == "true", wait_ms=_poll_ms(ext),
    )  # fmt: skip
    if r.messages and ctx.checks_reads and is_copy_topic(topic):
        r = _readable_copies(ctx, topic, r)
    header = pop_wire.response_header(r, svc.config.broker_name)
    if not r.messages:
        return cmd.make_response(ResponseCode.POLLING_TIMEOUT, NO_MESSAGE_IN_QUEUE, header)
    store = ctx.core.store
    records = []
    for m in r.messages:
        raw = store.record_bytes(m.message.physical_offset, m.message.size)
        if raw is None:
            raise BadRequestError(f"record at {m.message.physical_offset} is gone")
        records.append(raw)
    return cmd.make_response(ResponseCode.SUCCESS, FOUND, header, b"".join(records))


def _readable_copies(ctx: RequestContext, topic: str, r: PopResult) -> PopResult:
    """``r`` without the copies of a topic the sender may not SUB, popped from retry
    or dead-letter ``topic`` (see ``processors._readable_copies``). They stay in flight
    and come back when their invisible time ends, for a member that may read them."""
    kept = tuple(
        m for m in r.messages
        if ctx.read_refusal(topic, m.message.properties.get(PROPERTY_RETRY_TOPIC)) is None
    )  # fmt: skip
    return r if len(kept) == len(r.messages) else replace(r, messages=kept)


def process_ack(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """ACK_MESSAGE (200051)."""
    ext = cmd.ext_fields
    try:
        st = _service(ctx).ack(
            ext_str(ext, "consumerGroup"), ext_str(ext, "topic"), ext_str(ext, "extraInfo")
        )
    except InvalidReceiptHandleError as e:
        return cmd.make_response(ResponseCode.INVALID_PARAMETER, str(e))
    if st is AckStatus.OK:
        return cmd.make_response(ResponseCode.SUCCESS)
    return cmd.make_response(ResponseCode.NO_MESSAGE, "receipt handle expired or acked")


def process_batch_ack(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """BATCH_ACK_MESSAGE (200151)."""
    try:
        body = loads(cmd.body)
        group, topic = str(body["consumerGroup"]), str(body["topic"])
        handles = [str(h) for h in body["extraInfoList"]]
        statuses = _service(ctx).batch_ack(group, topic, handles)
    except (ValueError, KeyError, TypeError) as e:
        return cmd.make_response(ResponseCode.INVALID_PARAMETER, f"bad batch ack body: {e}")
    out = dumps({"statusList": [s.value for s in statuses]}).encode()
    return cmd.make_response(ResponseCode.SUCCESS, None, None, out)


def _change_invisible_time(ext: dict[str, str]) -> int:
    """The ``invisibleTime`` of CHANGE_MESSAGE_INVISIBLETIME: any Java long (negative
    too, as RocketMQ 5.3.3 takes it); one it cannot parse is refused (5.3.3's field is a
    ``Long`` left null, and the processor fails: SYSTEM_ERROR)."""
    value = pop_wire.java_long_text(ext.get("invisibleTime"))
    if value is None:
        text = ext.get("invisibleTime")
        raise BadRequestError(f"the custom field <invisibleTime> is not a 64-bit integer: {text!r}")
    return value


def process_change_invisible(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """CHANGE_MESSAGE_INVISIBLETIME (200053)."""
    ext = cmd.ext_fields
    try:
        r = _service(ctx).change_invisible_time(
            ext_str(ext, "consumerGroup"), ext_str(ext, "topic"), ext_str(ext, "extraInfo"),
            _change_invisible_time(ext),
        )  # fmt: skip
    except InvalidReceiptHandleError as e:
        return cmd.make_response(ResponseCode.INVALID_PARAMETER, str(e))
    if r.status is not AckStatus.OK:
        return cmd.make_response(ResponseCode.NO_MESSAGE, "receipt handle expired or acked")
    h = pop_wire.parse_handle(r.receipt_handle)
    header = {"popTime": r.pop_time, "invisibleTime": r.invisible_time, "reviveQid": h.revive_qid}
    return cmd.make_response(ResponseCode.SUCCESS, None, header)


def process_peek(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """PEEK_MESSAGE (200052)."""
    ext = cmd.ext_fields
    msgs = _service(ctx).peek(
        ext_str(ext, "consumerGroup"), ext_str(ext, "topic"), ext_int(ext, "maxMsgNums", 32),
        queue_id=ext_int(ext, "queueId", -1),
    )  # fmt: skip
    if not msgs:
        return cmd.make_response(ResponseCode.PULL_NOT_FOUND, "no new message")
    store = ctx.core.store
    raws = [store.record_bytes(m.physical_offset, m.size) or b"" for m in msgs]
    return cmd.make_response(ResponseCode.SUCCESS, None, None, b"".join(raws))


def process_notification(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """NOTIFICATION (200054): long polling without taking anything."""
    ext = cmd.ext_fields
    has = _service(ctx).wait_for_messages(
        ext_str(ext, "consumerGroup"), ext_str(ext, "topic"), ext_int(ext, "queueId", -1),
        _poll_ms(ext),
    )  # fmt: skip
    return cmd.make_response(ResponseCode.SUCCESS, None, {"hasMsg": "true" if has else "false"})


def process_query_assignment(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """QUERY_ASSIGNMENT (400): the queues a client should consume, and how."""
    try:
        body = loads(cmd.body)
        topic, group = str(body["topic"]), str(body["consumerGroup"])
        client_id = str(body.get("clientId", ""))
        broadcasting = str(body.get("messageModel", "CLUSTERING")) == "BROADCASTING"
        strategy = str(body.get("strategyName") or "AVG")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        return cmd.make_response(ResponseCode.INVALID_PARAMETER, f"bad assignment query: {e}")
    core = ctx.core
    tc = core.topics.get(topic)
    mode = (
        RequestMode(topic, group)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        else broker_pop(core).modes.get(topic, group)
    )
    ids = None
    if tc is not None:
        queues = list(range(tc.read_queue_nums))
        ids = assign(mode, queues, core.consumer_ids(group), client_id,
                     broadcasting=broadcasting, strategy=strategy)  # fmt: skip
    name = core.config.broker_name
    assignments = None if ids is None else [
        {"messageQueue": {"topic": topic, "brokerName": name, "queueId": q},
         "mode": mode.mode, "attachments": {}}
        for q in ids
    ]  # fmt: skip
    out = dumps({"messageQueueAssignments": assignments}).encode()
    return cmd.make_response(ResponseCode.SUCCESS, None, None, out)


def process_set_request_mode(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """SET_MESSAGE_REQUEST_MODE (401): PULL or POP for a (topic, group)."""
    try:
        mode = RequestMode.from_json(loads(cmd.body))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        return cmd.make_response(ResponseCode.INVALID_PARAMETER, f"bad request mode: {e}")
    if mode.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return cmd.make_response(
            ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode"
        )
    broker_pop(ctx.core).modes.set(mode)
    return cmd.make_response(ResponseCode.SUCCESS)


POP_PROCESSORS: dict[int, Processor] = {
    PopCode.POP_MESSAGE: process_pop,
    PopCode.ACK_MESSAGE: process_ack,
    PopCode.BATCH_ACK_MESSAGE: process_batch_ack,
    PopCode.CHANGE_MESSAGE_INVISIBLETIME: process_change_invisible,
    PopCode.PEEK_MESSAGE: process_peek,
    PopCode.NOTIFICATION: process_notification,
    PopCode.QUERY_ASSIGNMENT: process_query_assignment,
    PopCode.SET_MESSAGE_REQUEST_MODE: process_set_request_mode,
}
"""Merged into the broker's processor table (``mqstore.broker.processors``)."""


def suspend_pop(ctx: RequestContext, cmd: RemotingCommand, respond: Respond) -> None:
    """POP_MESSAGE (200050), long polling without holding a thread (module docstring)."""
    once = replace(cmd, ext_fields={**cmd.ext_fields, "pollTime": "0"})
    fifo = cmd.ext_fields.get("order", "false") == "true"
    suspend(ctx.core.pop.polling, cmd, respond, lambda: process_pop(ctx, once),
             lambda r: r.code != ResponseCode.POLLING_TIMEOUT, fifo)  # fmt: skip


def suspend_notification(ctx: RequestContext, cmd: RemotingCommand, respond: Respond) -> None:
    """NOTIFICATION (200054): ``hasMsg`` as soon as a message may be popped."""
    once = replace(cmd, ext_fields={**cmd.ext_fields, "pollTime": "0"})
    suspend(ctx.core.pop.polling, cmd, respond, lambda: process_notification(ctx, once),
             lambda r: r.ext_fields.get("hasMsg") != "false", True)  # fmt: skip


SUSPENDING: dict[int, Callable[[RequestContext, RemotingCommand, Respond], None]] = {
    200050: suspend_pop,
    200054: suspend_notification,
}
"""The request codes the server runs with a ``respond`` callback instead of a return."""
