"""Messages between the protobuf ``apache.rocketmq.v2.Message`` and the store.

Send (proxy ``SendMessageActivity.buildMessage``; docs/grpc.md, "What each request
does here"):

- ``system_properties.message_id`` (the client's id) -> ``UNIQ_KEY``, so a remoting
  consumer sees the same message id; tag -> ``TAGS``; keys -> ``KEYS``;
  ``message_group`` -> ``__SHARDINGKEY``; user properties as they are (a name the
  store reserves is refused with ILLEGAL_MESSAGE_PROPERTY_KEY).
- A GZIP body is inflated (at most ``max_body`` bytes, refused as soon as it passes them:
  MESSAGE_BODY_TOO_LARGE) and stored as is (the store keeps its own compression flag).
- ``delivery_timestamp`` -> ``TIMER_DELIVER_MS``, which makes the store's put a timer
  message (docs/timer.md §1). More than ``ProxyConfig.maxDelayTimeMills`` (one day) ahead:
  ILLEGAL_DELIVERY_TIME with the proxy's message (``SendMessageActivity.validateDelayTime``).
- Message types: NORMAL, FIFO (needs a message group), DELAY and TRANSACTION (a half
  message: ``mqstore.grpc.transactions``); LITE and PRIORITY get NOT_IMPLEMENTED with a
  message saying so.

Receive: the stored record back as a protobuf message with the receipt handle,
delivery attempt and invisible duration of the pop, body digest MD5 in upper-case hex
(what the proxy's ``GrpcConverter.buildSystemProperties`` sends, and the one digest every
official client checks alike: the Node client writes CRC32 in decimal, the Python one in
hex), and the user properties without the store's system ones.

Limits of a message (the proxy's defaults, ``ProxyConfig``; refused as
``SendMessageActivity`` refuses them): a message group of :data:`MAX_MESSAGE_GROUP_BYTES`
UTF-8 bytes or more, or blank, or with a control character: ILLEGAL_MESSAGE_GROUP; more
than :data:`MAX_USER_PROPERTIES` user properties, or more than
:data:`MAX_USER_PROPERTY_BYTES` in the names and values of the user properties plus the
tag and the keys: MESSAGE_PROPERTIES_TOO_LARGE.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Any

from mqstore.compression import InflateLimitError, Stream, decompress, inflate
from mqstore.errors import IllegalMessageError, IllegalTopicError, StoreError
from mqstore.grpc.protocol import Code, MessageType, pb
from mqstore.message import (
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Message,
)
from mqstore.pop.service import PoppedMessage
from mqstore.transaction import PROPERTY_CHECK_IMMUNITY

PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
"""``MessageConst.PROPERTY_SHARDING_KEY``: a FIFO message's group."""
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
"""``MessageConst.PROPERTY_TIMER_DELIVER_MS``: the delivery time asked for."""
MAX_MESSAGE_GROUP_BYTES = 64
"""``ProxyConfig.maxMessageGroupSize``: a message group must be shorter (UTF-8 bytes)."""
MAX_USER_PROPERTY_BYTES = 16 * 1024
"""``ProxyConfig.maxUserPropertySize``: user property names and values, tag and keys."""
MAX_USER_PROPERTIES = 128
"""``ProxyConfig.userPropertyMaxNum``."""
MAX_DELAY_MS = 86_400_000
"""``ProxyConfig.maxDelayTimeMills``: how far ahead a ``delivery_timestamp`` may be."""
PROPERTY_MSG_TYPE = "__MSG_TYPE_GRPC"
"""Ours: the 5.x message type the producer declared (NORMAL/FIFO/DELAY)."""

SYSTEM_PROPERTIES = frozenset({
    PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, PROPERTY_SHARDING_KEY,
    PROPERTY_TIMER_DELIVER_MS, PROPERTY_MSG_TYPE, "WAIT", "DELAY", "REAL_TOPIC", "REAL_QID",
    "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "RECONSUME_TIME", "MAX_RECONSUME_TIMES", "CLUSTER",
    "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "POP_CK", "POP_CK_OFFSET",
    "1ST_POP_TIME", "__STARTDELIVERTIME", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_OUT_MS",
    "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_DEL_UNIQKEY",
    "TRACE_ON", "MSG_REGION", "__CRC32#", "__transactionId__", "TRANSACTION_CHECK_TIMES",
    "CHECK_IMMUNITY_TIME_IN_SECONDS", "TRAN_PREPARED_QUEUE_OFFSET",
})  # fmt: skip
"""Properties the store or RocketMQ set: not user properties (``MessageConst.STRING_HASH_SET``
in spirit); a producer may not set them and a consumer does not see them as its own."""


class RequestRefusedError(StoreError):
    """A request the endpoint answers with a non-OK ``Status`` (``code``: a ``Code``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message to store, with what picking its queue needs."""

    message: Message
    message_id: str
    message_group: str | None

    @property
    def transactional(self) -> bool:
        """A TRANSACTION message: stored as a half message (``mqstore.grpc.transactions``)."""
        return self.message.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true"


def _millis(ts: Any) -> int:
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def check_delivery_time(at_ms: int, now_ms: int) -> None:
    """The proxy's ``validateDelayTime``: at most :data:`MAX_DELAY_MS` ahead.

    Raises:
        RequestRefusedError: ILLEGAL_DELIVERY_TIME.

    >>> check_delivery_time(86_400_000, 0)
    """
    if at_ms - now_ms > MAX_DELAY_MS:
        raise RequestRefusedError(
            Code.ILLEGAL_DELIVERY_TIME,
            f"the max delay time of message is too large, max is {MAX_DELAY_MS}",
        )


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _has_control(text: str) -> bool:
    """Java's ``CharMatcher.javaIsoControl``: U+0000..U+001F and U+007F..U+009F."""
    return any(c < " " or "\x7f" <= c <= "\x9f" for c in text)


def _user_properties(msg: Any) -> dict[str, str]:
    """The user properties of ``msg``, refused as the proxy's ``buildMessageProperty``
    refuses them (the size counts the tag and the keys too)."""
    users = msg.user_properties
    if len(users) > MAX_USER_PROPERTIES:
        raise RequestRefusedError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"too many user properties ({len(users)}), max is {MAX_USER_PROPERTIES}",
        )
    props: dict[str, str] = {}
    size = 0
    for k, v in users.items():
        if k in SYSTEM_PROPERTIES:
            raise RequestRefusedError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {k!r} is reserved"
            )
        size += _utf8_len(k) + _utf8_len(v)
        props[k] = v
    sp = msg.system_properties
    size += _utf8_len(sp.tag) + sum(_utf8_len(k) for k in sp.keys)
    if size > MAX_USER_PROPERTY_BYTES:
        raise RequestRefusedError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the user properties, tag and keys take {size} bytes, max is "
            f"{MAX_USER_PROPERTY_BYTES}",
        )
    return props


def _check_group(group: str) -> None:
    """Refuse a message group as the proxy's ``validateMessageGroup`` does."""
    why = None
    if not group.strip():
        why = "cannot be whitespace only"
    elif _utf8_len(group) >= MAX_MESSAGE_GROUP_BYTES:
        why = f"takes {_utf8_len(group)} bytes, it must be under {MAX_MESSAGE_GROUP_BYTES}"
    elif _has_control(group):
        why = "cannot contain a control character"
    if why is not None:
        raise RequestRefusedError(Code.ILLEGAL_MESSAGE_GROUP, f"message group {why}")


def body_digest(body: bytes) -> str:
    """The body digest a received message carries: MD5, upper-case hex.

    >>> body_digest(b"")
    'D41D8CD98F00B204E9800998ECF8427E'
    """
    return hashlib.md5(body, usedforsecurity=False).hexdigest().upper()


_MESSAGE_TYPES = frozenset(MessageType.values())
_ENCODINGS = frozenset(pb.Encoding.values())
_TYPE_NAMES = {int(v): str(MessageType.Name(v)) for v in MessageType.values() if v}
"""A declared message type's ``__MSG_TYPE_GRPC`` value (UNSPECIFIED is stored as NORMAL)."""
_FIFO, _TRANSACTION = int(MessageType.FIFO), int(MessageType.TRANSACTION)
_UNSERVED = {int(MessageType.LITE): "lite topics", int(MessageType.PRIORITY): "priority messages"}
_GZIP = int(pb.Encoding.GZIP)
# the enum wrappers build a list per values() and look names up per attribute: a send
# reads these once per message, so they are taken once here


def to_store(msg: Any, now_ms: int, max_body: int, queue_id: int = 0) -> Outgoing:
    """The store message for one protobuf ``Message`` of a SendMessageRequest, for
    queue ``queue_id`` of its topic.

    Raises:
        RequestRefusedError: the message cannot be stored (the code says why).
    """
    sp = msg.system_properties
    topic = msg.topic.name
    mtype = sp.message_type
    if mtype not in _MESSAGE_TYPES:
        raise RequestRefusedError(Code.BAD_REQUEST, f"unknown message type {mtype}")
    encoding = sp.body_encoding
    if encoding not in _ENCODINGS:
        raise RequestRefusedError(Code.BAD_REQUEST, f"unknown body encoding {encoding}")
    lite = sp.HasField("lite_topic")
    if lite or mtype in _UNSERVED:
        name = "lite topics" if lite else _UNSERVED[mtype]
        raise RequestRefusedError(Code.NOT_IMPLEMENTED, f"{name} are not supported by mqstore")
    body = bytes(msg.body)
    if encoding == _GZIP:
        try:  # bounded: a GZIP bomb is refused at max_body + 1 inflated bytes
            body = inflate(body, Stream.GZIP, max_body)
        except InflateLimitError:
            raise RequestRefusedError(
                Code.MESSAGE_BODY_TOO_LARGE, f"GZIP body inflates to more than {max_body} bytes"
            ) from None
        except ValueError as e:
            raise RequestRefusedError(Code.MESSAGE_CORRUPTED, f"bad GZIP body: {e}") from None
    if not body:
        raise RequestRefusedError(Code.MESSAGE_BODY_EMPTY, "message body is empty")
    if len(body) > max_body:
        raise RequestRefusedError(
            Code.MESSAGE_BODY_TOO_LARGE, f"message body of {len(body)} bytes > {max_body}"
        )
    props = _user_properties(msg)
    message_id = sp.message_id
    if not message_id:
        raise RequestRefusedError(Code.ILLEGAL_MESSAGE_ID, "message_id is required")
    props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = message_id
    group = sp.message_group if sp.HasField("message_group") else None
    if mtype == _FIFO and not group:
        raise RequestRefusedError(Code.ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a group")
    if group:
        _check_group(group)
        props[PROPERTY_SHARDING_KEY] = group
    if sp.HasField("delivery_timestamp"):
        at = _millis(sp.delivery_timestamp)
        check_delivery_time(at, now_ms)
        props[PROPERTY_TIMER_DELIVER_MS] = str(at)
    props[PROPERTY_MSG_TYPE] = _TYPE_NAMES.get(mtype, "NORMAL")
    if mtype == _TRANSACTION:
        props.update(transaction_properties(msg.topic.name, sp))
    born = _millis(sp.born_timestamp) if sp.HasField("born_timestamp") else now_ms
    try:
        out = Message(
            topic=topic, body=body, tags=sp.tag if sp.HasField("tag") else None,
            keys=list(sp.keys) or None, properties=props, born_timestamp=born,
            queue_id=queue_id,
        )  # fmt: skip
        out.validate()
    except IllegalTopicError as e:
        raise RequestRefusedError(Code.ILLEGAL_TOPIC, str(e)) from None
    except IllegalMessageError as e:
        raise RequestRefusedError(Code.BAD_REQUEST, str(e)) from None
    return Outgoing(out, message_id, group)


def transaction_properties(topic: str, sp: Any) -> dict[str, str]:
    """A TRANSACTION message's half-message properties, as the proxy sets them: the
    topic is the producer group, the orphaned-transaction recovery duration the first
    check's delay (``SendMessageActivity.buildMessageProperty``)."""
    return {
        PROPERTY_TRANSACTION_PREPARED: "true",
        PROPERTY_PRODUCER_GROUP: topic,
        PROPERTY_CHECK_IMMUNITY: str(int(sp.orphaned_transaction_recovery_duration.seconds)),
    }


def actual_type(out: Outgoing) -> str:
    """The ``TopicMessageType`` of a message to store, as upstream's
    ``TopicMessageType.parseFromMessageProperty`` reads it from the properties (not from
    the declared type): a delivery time makes it DELAY, else a message group FIFO, else
    NORMAL; a half message is TRANSACTION."""
    props = out.message.properties
    if out.transactional:
        return "TRANSACTION"
    if PROPERTY_TIMER_DELIVER_MS in props:
        return "DELAY"
    return "FIFO" if PROPERTY_SHARDING_KEY in props else "NORMAL"


def check_topic_type(topic_type: str, out: Outgoing) -> None:
    """Refuse a message the topic's ``message.type`` does not take, as the proxy's
    ``DefaultTopicMessageTypeValidator`` does (a MIXED topic takes every type).

    Raises:
        RequestRefusedError: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE.
    """
    actual = actual_type(out)
    if topic_type not in (actual, "MIXED"):
        raise RequestRefusedError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"TopicMessageType validate failed, the expected type is {topic_type}, but actual "
            f"type is {actual}",
        )


_TYPE_VALUES = {name: int(v) for name, v in MessageType.items()}
_NORMAL = int(MessageType.NORMAL)
_MD5 = int(pb.DigestType.MD5)
_IDENTITY = int(pb.Encoding.IDENTITY)


def _stored_type(props: dict[str, str]) -> int:
    declared = props.get(PROPERTY_MSG_TYPE)
    if declared:
        known = _TYPE_VALUES.get(declared)
        if known is not None:
            return known
    return _FIFO if PROPERTY_SHARDING_KEY in props else _NORMAL


@functools.lru_cache(maxsize=1024)
def _host(raw: bytes) -> str:
    """``ip:port`` of a record's 8-byte host field (a message's hosts repeat: cached)."""
    if len(raw) == 8:
        return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}:{int.from_bytes(raw[4:], 'big')}"
    return raw.hex()


def to_proto(p: PoppedMessage, invisible_ms: int) -> Any:
    """The protobuf ``Message`` for a popped message (see the module docstring)."""
    m = p.message
    props = m.properties
    body = decompress(m.body, m.sys_flag)
    out = pb.Message()
    out.topic.name = p.topic
    out.body = body
    for k, v in props.items():
        if k not in SYSTEM_PROPERTIES:
            out.user_properties[k] = v
    sp = out.system_properties
    tags = props.get(PROPERTY_TAGS)
    if tags:
        sp.tag = tags
    sp.keys.extend(m.keys)
    sp.message_id = p.msg_id
    sp.body_digest.type = _MD5
    sp.body_digest.checksum = body_digest(body)
    sp.body_encoding = _IDENTITY
    sp.message_type = _stored_type(props)
    sp.born_timestamp.FromMilliseconds(m.born_timestamp)
    sp.born_host = _host(m.born_host_raw)
    sp.store_timestamp.FromMilliseconds(m.store_timestamp)
    sp.store_host = _host(m.store_host_raw)
    deliver = props.get(PROPERTY_TIMER_DELIVER_MS)
    if deliver and deliver.isdigit():
        sp.delivery_timestamp.FromMilliseconds(int(deliver))
    sp.receipt_handle = p.receipt_handle
    sp.queue_id = m.queue_id
    sp.queue_offset = m.queue_offset
    sp.invisible_duration.FromMilliseconds(invisible_ms)
    sp.delivery_attempt = p.delivery_attempt
    group = props.get(PROPERTY_SHARDING_KEY)
    if group:
        sp.message_group = group
    return out
