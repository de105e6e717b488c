"""Request headers and JSON bodies the client sends; pull bodies and response fields it reads.

Pure functions, no sockets: :mod:`mqstore.client.remote` sends what these build. Field
names are RocketMQ's (docs/protocol.md §1.6); every header value travels as a string in
``extFields``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from typing import Final

from mqstore.client.allocate import MessageQueue
from mqstore.client.transport import Heartbeat, TransportError
from mqstore.commitlog import format as fmt
from mqstore.consumequeue.filter import parse_subscription
from mqstore.errors import CorruptRecordError
from mqstore.message import (
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    new_uniq_key,
    properties_to_string,
)
from mqstore.records import StoredMessage, stored_message
from mqstore.remoting import values as _values
from mqstore.remoting.batch import encode_batch as _encode_entries
from mqstore.remoting.codec import RemotingCommand, coerce_ext_fields
from mqstore.remoting.fastjson import FastjsonError, loads

UNIQ_KEY = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
DEFAULT_TOPIC = "TBW102"
"""The topic whose route stands in for topics not created yet (``TopicValidator``)."""
DEFAULT_TOPIC_QUEUE_NUMS = 4
"""``DefaultMQProducer.defaultTopicQueueNums``: queues of an auto-created topic."""
SEND_STATUS: Final = _values.SEND_STATUS
"""Send response code -> status (``mqstore.remoting.values``, shared with the broker's
in-process transport)."""
PULL_STATUS: Final = _values.PULL_STATUS
"""Pull response code -> status (``mqstore.remoting.values``)."""


def ext(fields: Mapping[str, object]) -> dict[str, str]:
    """Header fields as extFields strings (booleans as ``true``/``false``)."""
    return coerce_ext_fields(fields)


def with_uniq_key(msg: Message) -> Message:
    """``msg`` with a ``UNIQ_KEY`` property (a copy; ``msg`` itself is left alone)."""
    if msg.properties.get(UNIQ_KEY):
        return msg
    return dataclasses.replace(msg, properties={**msg.properties, UNIQ_KEY: new_uniq_key()})


def properties_of(msg: Message) -> str:
    """The properties string a producer sends: user properties, TAGS, KEYS, DELAY, WAIT."""
    return properties_to_string(msg.all_properties())


_DEFAULT_QUEUE_NUMS_TEXT: Final = str(DEFAULT_TOPIC_QUEUE_NUMS)


def send_header(
    producer_group: str, queue: MessageQueue, msg: Message, *, batch: bool
) -> dict[str, str]:
    """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header (``SendMessageRequestHeaderV2``).

    For a batch, ``msg`` is the batch's first message and the header describes the
    batch, not that message, as the Java client's ``MessageBatch`` does: properties
    only ``WAIT`` (the one setting all messages of a batch share,
    ``MessageBatch.generateFromList``), flag and sysflag 0, reconsume times 0, and
    ``m`` true. A RocketMQ broker (4.9.x, 5.0-5.3.3) appends the header's properties
    to every message of the batch, so anything of one message placed here would
    overwrite the others' values (:func:`batch_properties`).
    """
    born = msg.born_timestamp if msg.born_timestamp is not None else time.time_ns() // 1_000_000
    # Strings already (what extFields carry): no coercion pass on the send path.
    return {
        "a": producer_group,
        "b": queue.topic,
        "c": DEFAULT_TOPIC,
        "d": _DEFAULT_QUEUE_NUMS_TEXT,
        "e": str(queue.queue_id),
        "f": "0" if batch else str(msg.sys_flag),
        "g": str(born),
        "h": "0" if batch else str(msg.flag),
        "i": batch_properties(msg) if batch else properties_of(msg),
        "j": "0" if batch else str(msg.reconsume_times),
        "k": "false",
        "m": "true" if batch else "false",
        "n": queue.broker_name,
    }


def batch_properties(first: Message) -> str:
    """The SEND_BATCH_MESSAGE header's properties: ``WAIT`` of the batch, nothing else.

    The Java client's ``MessageBatch`` is a message of its own whose only property
    is ``WAIT`` (set from the first message; every message of a batch must agree).
    """
    return properties_to_string({PROPERTY_WAIT_STORE_MSG_OK: _bool_text(first.wait_store_msg_ok)})


def _bool_text(value: bool) -> str:
    return "true" if value else "false"


def encode_batch(msgs: Sequence[Message]) -> bytes:
    """SEND_BATCH_MESSAGE body for ``msgs`` (layout: :mod:`mqstore.remoting.batch`)."""
    return _encode_entries([(m.flag, bytes(m.body), properties_of(m)) for m in msgs])


def decode_pull_body(body: bytes, expression: str) -> tuple[StoredMessage, ...]:
    """The messages of a pull response body, bodies decompressed, exact-tag filtered.

    Raises:
        CorruptRecordError: the body is not whole, valid records.
    """
    sub = parse_subscription(expression)
    out: list[StoredMessage] = []
    view = memoryview(body)
    pos, end = 0, len(body)
    while pos < end:
        info = fmt.scan(view, pos)
        if not isinstance(info, fmt.RecordInfo):
            raise CorruptRecordError(f"pull response record at byte {pos}: {info}")
        msg = stored_message(info, view)
        if sub.matches_all or sub.matches_tags(msg.tags):
            out.append(msg)
        pos += info.size
    return tuple(out)


def heartbeat_body(hb: Heartbeat) -> dict[str, object]:
    """HeartbeatData as the Java client serialises it (bean fields alphabetical)."""
    consumers = []
    for c in hb.consumers:
        subs = []
        for s in c.subscriptions:
            parsed = parse_subscription(s.expression)
            subs.append(
                {
                    "classFilterMode": False,
                    "codeSet": sorted(parsed.codes),
                    "expressionType": "TAG",
                    "subString": s.expression or "*",
                    "subVersion": time.time_ns() // 1_000_000,
                    "tagsSet": sorted(parsed.tags),
                    "topic": s.topic,
                }
            )
        consumers.append(
            {
                "consumeFromWhere": c.consume_from_where.value,
                "consumeType": c.consume_type.value,
                "groupName": c.group,
                "messageModel": c.message_model.value,
                "subscriptionDataSet": subs,
                "unitMode": False,
            }
        )
    return {
        "clientID": hb.client_id,
        "consumerDataSet": consumers,
        "producerDataSet": [{"groupName": g} for g in hb.producer_groups],
    }


def lock_body(
    group: str, client_id: str, queues: Sequence[MessageQueue], *, only_this_broker: bool | None
) -> bytes:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body (``onlyThisBroker`` only for locks)."""
    data: dict[str, object] = {
        "clientId": client_id,
        "consumerGroup": group,
        "mqSet": [
            {"brokerName": q.broker_name, "queueId": q.queue_id, "topic": q.topic} for q in queues
        ],
    }
    if only_this_broker is not None:
        data["onlyThisBroker"] = only_this_broker
    return json.dumps(data, separators=(",", ":")).encode()


def parse_queues(items: object) -> set[MessageQueue]:
    """``[{"topic","brokerName","queueId"}, ...]`` (a lock response) to queues.

    Raises:
        TransportError: ``items`` is not a list of such objects.
    """
    if not isinstance(items, list):
        raise TransportError(f"lock response queue set is not a list: {items!r}")
    try:
        return {
            MessageQueue(str(d["topic"]), str(d["brokerName"]), int(d["queueId"])) for d in items
        }
    except (TypeError, KeyError, ValueError) as e:
        raise TransportError(f"lock response queue set {items!r} is malformed: {e!r}") from None


def ext_int(resp: RemotingCommand, name: str, default: int = 0) -> int:
    """An int response header field (``default`` when absent).

    Raises:
        TransportError: the field is not an int.
    """
    value = resp.ext_fields.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise TransportError(f"response code {resp.code}: {name}={value!r} is not an int") from None


def json_body(resp: RemotingCommand) -> dict[object, object]:
    """A response body that is a (fastjson) object; ``{}`` when empty.

    Raises:
        TransportError: the body is not a JSON object.
    """
    try:
        data = loads(resp.body.decode("utf-8")) if resp.body else {}
    except (UnicodeDecodeError, FastjsonError) as e:
        raise TransportError(f"response body of code {resp.code} does not parse: {e}") from e
    if not isinstance(data, dict):
        raise TransportError(f"response body of code {resp.code} is not a JSON object")
    return data
