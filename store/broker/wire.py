"""Request bodies and headers of the remoting protocol, as Python values.

Pure functions, no I/O: the processors call them to turn a request into arguments for
:class:`~mqstore.broker.core.BrokerCore`, and back.

Batch body (SEND_BATCH_MESSAGE, RocketMQ ``MessageDecoder.encodeMessages``): the
messages one after another, each big-endian::

    off       size   field
    0         4      total size of this entry (20 + body_len + 2 + props_len)
    4         4      magic code (0: unused)
    8         4      body CRC (0: unused; the broker computes it)
    12        4      flag
    16        4      body_len
    20        blen   body
    20+blen   2      props_len
    22+blen   plen   properties string (name \\x01 value \\x02 ...)

>>> body = encode_batch([(0, b"hi", "TAGS\\x01A\\x02")])
>>> body.hex(" ")
'00 00 00 1f 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 02 68 69 00 07 54 41 47 53 01 41 02'
>>> decode_batch(body)
[(0, b'hi', 'TAGS\\x01A\\x02')]

Heartbeat and lock bodies are fastjson objects (see docs/protocol.md §1.6); unknown
enum names fall back to RocketMQ's defaults rather than failing the heartbeat.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from mqstore.broker.names import validate_group
from mqstore.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    string_to_properties,
)
from mqstore.remoting.batch import BatchEntry, decode_batch, encode_batch
from mqstore.remoting.errors import BadRequestError
from mqstore.remoting.fastjson import loads
from mqstore.remoting.headers import ext_int, ext_str
from mqstore.remoting.values import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    Heartbeat,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)

__all__ = [
    "BadRequestError",
    "BatchEntry",
    "SendHeader",
    "build_message",
    "decode_batch",
    "encode_batch",
    "ext_group",
    "ext_int",
    "ext_str",
    "parse_heartbeat",
    "parse_lock_body",
    "parse_send_header",
    "queue_json",
]


def build_message(
    topic: str,
    queue_id: int,
    body: bytes,
    properties: str,
    *,
    flag: int = 0,
    sys_flag: int = 0,
    born_timestamp: int | None = None,
    born_host: tuple[str, int] = ("127.0.0.1", 0),
    reconsume_times: int = 0,
) -> Message:
    """A store :class:`Message` from wire fields: DELAY and WAIT become fields (the
    store re-adds them), every other property is kept as sent (TAGS, KEYS, UNIQ_KEY)."""
    props = string_to_properties(properties)
    delay = props.pop(PROPERTY_DELAY_TIME_LEVEL, "0")
    wait = props.pop(PROPERTY_WAIT_STORE_MSG_OK, "true")
    props.pop("", None)  # an empty name cannot be stored
    digits = delay != "0" and delay.strip().lstrip("-").isdigit()  # "0": no parsing
    delay_level = int(delay) if digits else 0
    return Message(
        topic=topic,
        body=body,
        properties=props,
        queue_id=queue_id,
        flag=flag,
        delay_level=delay_level,
        wait_store_msg_ok=wait != "false",
        born_timestamp=born_timestamp,
        born_host=born_host,
        reconsume_times=reconsume_times,
        sys_flag=sys_flag,
    )


@dataclass(frozen=True, slots=True)
class SendHeader:
    """SendMessageRequestHeader (V1 long names or V2 one-letter names)."""

    topic: str
    queue_id: int
    sys_flag: int
    born_timestamp: int | None
    flag: int
    properties: str
    reconsume_times: int
    default_topic: str
    default_topic_queue_nums: int | None
    max_reconsume_times: int | None
    batch: bool


_V2_NAMES: Final = {
    "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d", "queueId": "e",
    "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i",
    "reconsumeTimes": "j", "maxReconsumeTimes": "l", "batch": "m",
}  # fmt: skip
"""SendMessageRequestHeader field -> its SendMessageRequestHeaderV2 letter."""


_V1_KEYS: Final = tuple(_V2_NAMES)
_V2_KEYS: Final = tuple(_V2_NAMES.values())


def _int_or(value: str | None, default: int) -> int:
    return default if value is None or value == "" else int(value)


def parse_send_header(ext: Mapping[str, str], v2: bool) -> SendHeader:
    """Read a send request's header (``v2``: one-letter names).

    One pass of direct lookups for a well-formed header (every send pays for it); a
    malformed one is read again by the checking parser for its error message.

    Raises:
        BadRequestError: no topic, or a malformed number.
    """
    g = ext.get
    topic, dtopic, dnums, qid, sysflag, born, flag, props, recons, maxr, batch = (
        _V2_KEYS if v2 else _V1_KEYS
    )
    t = g(topic)
    if t is not None:
        try:
            max_times = g(maxr)
            return SendHeader(
                t,
                _int_or(g(qid), -1),
                _int_or(g(sysflag), 0),
                _int_or(g(born), 0) or None,
                _int_or(g(flag), 0),
                g(props, ""),
                _int_or(g(recons), 0),
                g(dtopic) or "TBW102",
                _int_or(g(dnums), 0) or None,
                int(max_times) if max_times else None,
                g(batch) == "true",
            )
        except ValueError:
            pass
    return _parse_send_header_checked(ext, v2)


def _parse_send_header_checked(ext: Mapping[str, str], v2: bool) -> SendHeader:
    if v2:
        ext = {name: ext[letter] for name, letter in _V2_NAMES.items() if letter in ext}
    max_times = ext.get("maxReconsumeTimes")
    return SendHeader(
        topic=ext_str(ext, "topic"),
        queue_id=ext_int(ext, "queueId", -1),
        sys_flag=ext_int(ext, "sysFlag", 0),
        born_timestamp=ext_int(ext, "bornTimestamp", 0) or None,
        flag=ext_int(ext, "flag", 0),
        properties=ext.get("properties", ""),
        reconsume_times=ext_int(ext, "reconsumeTimes", 0),
        default_topic=ext.get("defaultTopic") or "TBW102",
        default_topic_queue_nums=ext_int(ext, "defaultTopicQueueNums", 0) or None,
        max_reconsume_times=ext_int(ext, "maxReconsumeTimes") if max_times else None,
        batch=ext.get("batch") == "true",
    )


def ext_group(ext: Mapping[str, str], name: str) -> str:
    """A group name field, checked with :func:`~mqstore.broker.names.validate_group`.

    Raises:
        BadRequestError: missing, or not a legal group name.
    """
    return validate_group(ext_str(ext, name))


def _json_object(body: bytes, what: str) -> dict[str, Any]:
    try:
        obj = loads(body)
    except ValueError as e:
        raise BadRequestError(f"{what} body: {e}") from None
    if not isinstance(obj, dict):
        raise BadRequestError(f"{what} body is not an object")
    return obj


def _enum(cls: Any, value: object, default: Any) -> Any:
    try:
        return cls(value)
    except ValueError:
        return default


def check_client_subscription(body: bytes | None) -> SubscriptionData | None:
    """The subscription of a CHECK_CLIENT_CONFIG body (``CheckClientRequestBody``:
    ``{clientId, group, subscriptionData}``), None when it has none.

    Raises:
        BadRequestError: the body is not a JSON object.
    """
    s = _json_object(body or b"{}", "check client").get("subscriptionData")
    if not isinstance(s, dict):
        return None
    return SubscriptionData(
        str(s.get("topic")), str(s.get("subString") or ""), str(s.get("expressionType") or "TAG")
    )


def parse_heartbeat(body: bytes) -> Heartbeat:
    """HeartbeatData JSON to :class:`Heartbeat`.

    Raises:
        BadRequestError: not a JSON object, no clientID, or a group name that
            :func:`~mqstore.broker.names.validate_group` refuses.
    """
    obj = _json_object(body, "heartbeat")
    client_id = obj.get("clientID")
    if not isinstance(client_id, str) or not client_id:
        raise BadRequestError("heartbeat without clientID")
    consumers = []
    for c in obj.get("consumerDataSet") or []:
        if not isinstance(c, dict) or not isinstance(c.get("groupName"), str):
            continue
        subs = tuple(
            SubscriptionData(
                str(s.get("topic")),
                str(s.get("subString") or "*"),
                str(s.get("expressionType") or "TAG"),
            )
            for s in c.get("subscriptionDataSet") or []
            if isinstance(s, dict) and s.get("topic")
        )
        consumers.append(
            ConsumerData(
                validate_group(c["groupName"]),
                _enum(ConsumeType, c.get("consumeType"), ConsumeType.CONSUME_PASSIVELY),
                _enum(MessageModel, c.get("messageModel"), MessageModel.CLUSTERING),
                _enum(
                    ConsumeFromWhere,
                    c.get("consumeFromWhere"),
                    ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                ),
                subs,
            )
        )
    producers = tuple(
        validate_group(p["groupName"])
        for p in obj.get("producerDataSet") or []
        if isinstance(p, dict) and isinstance(p.get("groupName"), str)
    )
    return Heartbeat(client_id, tuple(consumers), producers)


def parse_lock_body(body: bytes) -> tuple[str, str, list[MessageQueue]]:
    """LOCK/UNLOCK_BATCH_MQ body to (group, client id, queues).

    Raises:
        BadRequestError: malformed body.
    """
    obj = _json_object(body, "lock batch")
    try:
        queues = [
            MessageQueue(str(q["topic"]), str(q["brokerName"]), int(q["queueId"]))
            for q in obj.get("mqSet") or []
        ]
        return validate_group(obj["consumerGroup"]), str(obj["clientId"]), queues
    except (KeyError, TypeError, ValueError) as e:
        raise BadRequestError(f"lock batch body: {e}") from None


def queue_json(mq: MessageQueue) -> dict[str, object]:
    """A MessageQueue as RocketMQ's bean JSON (alphabetical fields)."""
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}
