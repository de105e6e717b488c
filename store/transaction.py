"""Transactional messages: the records a broker writes for them, as RocketMQ writes them.

A transactional message is stored twice, and its outcome once more (docs/transactions.md):

1. **Half.** A send whose properties carry ``TRAN_MSG=true`` is stored in
   ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 (:func:`half_message`): its real topic and
   queue in ``REAL_TOPIC`` / ``REAL_QID``, its sysflag's transaction bits reset to
   NOT (so the half topic's consume queue indexes it: RocketMQ's
   ``TransactionalMessageBridge.parseHalfMessageInner``), ``PGROUP`` as the producer
   sent it; 5.x brokers add ``__transactionId__`` = the UNIQ_KEY. Consumers of the real
   topic never see it.
2. **Commit.** END_TRANSACTION with COMMIT re-puts it to its real topic and queue
   (:func:`final_message`): same body, flag, born time and host, reconsume times and
   properties string (``REAL_TOPIC``, ``REAL_QID`` and ``TRAN_MSG`` stay in the
   stored string: RocketMQ serialises the properties before it clears them), sysflag
   transaction type COMMIT, PREPARED TX OFFSET = the half record's physical offset
   (``EndTransactionProcessor.endMessageTransaction``). ROLLBACK re-puts nothing.
3. **Op.** Either outcome appends an op record to ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, in
   the half record's queue id (:func:`op_message`): tags ``d``, body the half record's
   queue offset in decimal (4.9: ``"5"``; 5.x batches them, ``"0,1,3,"``, and writes
   ``"5,"`` alone), properties ``WAIT=true`` and ``TAGS=d`` and nothing else, sysflag
   0, born host = store host.

Check-back (``mqstore.broker.transactions``) re-puts a still-open half record to the
half topic with ``TRANSACTION_CHECK_TIMES`` counted up (:func:`renewed_half`) before it
asks the producer, so the producer's answer names the new copy; past
``transactionCheckMax`` checks the record goes to ``TRANS_CHECK_MAX_TIME_TOPIC``
(:func:`discarded`).

Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from mqstore.commitlog import format as fmt
from mqstore.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    new_uniq_key,
)
from mqstore.property_format import PropertyFormat

HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
"""``TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC``: where half messages wait."""
OP_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
"""``TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC``: one record per outcome."""
CHECK_MAX_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
"""``TopicValidator.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC``: half messages checked too often."""
CHECK_GROUP: Final = "CID_RMQ_SYS_TRANS"
"""``MixAll.CID_SYS_RMQ_TRANS``: the consumer group whose offsets mark how far the
check has read the half and op queues (``config/consumerOffset.json``)."""
REMOVE_TAG: Final = "d"
"""``TransactionalMessageUtil.REMOVETAG``: the tags of an op record."""
OFFSET_SEPARATOR: Final = ","
"""``TransactionalMessageUtil.OFFSET_SEPARATOR`` (5.x op bodies)."""

PROPERTY_TRANSACTION_ID: Final = "__transactionId__"
"""``TransactionalMessageUtil.TRANSACTION_ID`` (5.x half records)."""
PROPERTY_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
"""``MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES``."""
PROPERTY_CHECK_IMMUNITY: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
"""``MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS``: a producer's own first-check
delay for one message."""
PROPERTY_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
"""``MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET``: the original half record's
queue offset, on a copy re-put while its immunity lasts."""


CheckHandler = Callable[[Mapping[str, str], fmt.MessageRecord], None]
"""What a client transport calls with CHECK_TRANSACTION_STATE's header and decoded body,
on its own thread: it must return at once (defined here, below both the broker's
in-process transport and the client's remote one)."""


class TransactionState(enum.IntEnum):
    """``commitOrRollback`` of END_TRANSACTION: the sysflag transaction types."""

    UNKNOWN = fmt.TRANSACTION_NOT_TYPE
    COMMIT = fmt.TRANSACTION_COMMIT_TYPE
    ROLLBACK = fmt.TRANSACTION_ROLLBACK_TYPE


def is_transactional(properties: Mapping[str, str]) -> bool:
    """Whether a send is a half message (``TRAN_MSG`` parses as Java's ``true``)."""
    return properties.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true"


def _with_tx_type(sys_flag: int, tx: int) -> int:
    """``MessageSysFlag.resetTransactionValue``."""
    return (sys_flag & ~fmt.TRANSACTION_MASK) | tx


def half_message(msg: Message, property_format: PropertyFormat) -> Message:
    """The half record to store for transactional send ``msg`` (module docstring, 1).

    A message without UNIQ_KEY gets one here (the id check-back and the op records
    name it by); ``WAIT=true`` is kept in the string, as both broker versions store it.
    """
    props = dict(msg.properties)
    uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or new_uniq_key()
    props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
    if msg.wait_store_msg_ok:
        props[PROPERTY_WAIT_STORE_MSG_OK] = "true"
    if property_format is PropertyFormat.V5:
        props[PROPERTY_TRANSACTION_ID] = uniq
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    return Message(
        topic=HALF_TOPIC,
        body=msg.body,
        tags=msg.tags,
        keys=msg.keys,
        properties=props,
        queue_id=0,
        flag=msg.flag,
        wait_store_msg_ok=msg.wait_store_msg_ok,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        reconsume_times=msg.reconsume_times,
        sys_flag=_with_tx_type(msg.sys_flag, fmt.TRANSACTION_NOT_TYPE),
    )


def end_mismatch(
    rec: fmt.MessageRecord,
    producer_group: str,
    tran_state_table_offset: int,
    commit_log_offset: int,
) -> str | None:
    """Why END_TRANSACTION's header does not name half record ``rec``, as RocketMQ's
    remark (``EndTransactionProcessor.checkPrepareMessage``); None when it does."""
    if rec.properties.get(PROPERTY_PRODUCER_GROUP) != producer_group:
        return "The producer group wrong"
    if rec.queue_offset != tran_state_table_offset:
        return "The transaction state table offset wrong"
    if rec.physical_offset != commit_log_offset:
        return "The commit log offset wrong"
    return None


def real_queue(rec: fmt.MessageRecord) -> tuple[str, int] | None:
    """The (topic, queue id) a half record will be delivered to; None when its
    ``REAL_TOPIC`` / ``REAL_QID`` are missing or not a topic and a number."""
    props = rec.properties
    topic = props.get(PROPERTY_REAL_TOPIC, "")
    qid = props.get(PROPERTY_REAL_QUEUE_ID, "")
    if not topic or not qid.isdigit():
        return None
    return topic, int(qid)


def final_message(rec: fmt.MessageRecord) -> Message | None:
    """The message a COMMIT puts for half record ``rec`` (module docstring, 2); None
    when the record names no real queue."""
    target = real_queue(rec)
    if target is None:
        return None
    return Message(
        topic=target[0],
        body=rec.body,
        properties=rec.properties,
        queue_id=target[1],
        flag=rec.flag,
        born_timestamp=rec.born_timestamp,
        born_host=rec.born_host,
        reconsume_times=rec.reconsume_times,
        sys_flag=_with_tx_type(rec.sys_flag, fmt.TRANSACTION_COMMIT_TYPE),
        stored_properties=rec.properties_string,
        prepared_transaction_offset=rec.physical_offset,
    )


def op_body(half_queue_offset: int, property_format: PropertyFormat) -> bytes:
    """An op record's body naming one half record, as each version writes it.

    >>> op_body(5, PropertyFormat.V4_9), op_body(5, PropertyFormat.V5)
    (b'5', b'5,')
    """
    sep = OFFSET_SEPARATOR if property_format is PropertyFormat.V5 else ""
    return f"{half_queue_offset}{sep}".encode("ascii")


def parse_op_body(body: bytes) -> list[int]:
    """The half queue offsets an op record names (either version's body); parts that
    are not numbers are skipped, as RocketMQ's ``getLong`` gives them -1.

    >>> parse_op_body(b"0,1,3,"), parse_op_body(b"7"), parse_op_body(b"x,2")
    ([0, 1, 3], [7], [2])
    """
    text = body.decode("ascii", errors="replace")
    return [int(p) for p in text.split(OFFSET_SEPARATOR) if p.strip().isdigit()]


def op_message(
    half_queue_id: int,
    half_queue_offset: int,
    store_host: tuple[str, int],
    property_format: PropertyFormat,
    now_ms: int,
) -> Message:
    """The op record for the half record at ``half_queue_offset`` (module docstring, 3)."""
    props = {PROPERTY_WAIT_STORE_MSG_OK: "true", PROPERTY_TAGS: REMOVE_TAG}
    end = "\x02" if property_format.trailing_separator else ""
    return Message(
        topic=OP_TOPIC,
        body=op_body(half_queue_offset, property_format),
        properties=props,
        queue_id=half_queue_id,
        born_timestamp=now_ms,
        born_host=store_host,
        stored_properties=f"WAIT\x01true\x02TAGS\x01{REMOVE_TAG}{end}",  # the Java Message's
    )  # own HashMap(16), WAIT before TAGS, in both versions


def check_times(rec: fmt.MessageRecord) -> int:
    """How often the half record was checked back (``TRANSACTION_CHECK_TIMES``, 0 when
    absent or not a number)."""
    text = rec.properties.get(PROPERTY_CHECK_TIMES, "")
    return int(text) if text.isdigit() else 0


def immunity_ms(rec: fmt.MessageRecord, transaction_timeout_ms: int) -> tuple[int, bool]:
    """How long after its birth the record is left alone, and whether the producer set
    that (``CHECK_IMMUNITY_TIME_IN_SECONDS``; an unparsable value falls back to the
    broker's ``transactionTimeOut``, as ``getImmunityTime`` does)."""
    text = rec.properties.get(PROPERTY_CHECK_IMMUNITY)
    if text is None:
        return transaction_timeout_ms, False
    try:
        return int(text) * 1000, True
    except ValueError:
        return transaction_timeout_ms, True


def _renew(
    rec: fmt.MessageRecord,
    topic: str,
    props: dict[str, str],
    property_format: PropertyFormat,
    sys_flag: int,
) -> Message:
    return Message(
        topic=topic,
        body=rec.body,
        properties=props,
        queue_id=rec.queue_id if topic == HALF_TOPIC else 0,
        flag=rec.flag,
        born_timestamp=rec.born_timestamp,
        born_host=rec.born_host,
        reconsume_times=rec.reconsume_times,
        sys_flag=sys_flag,
        stored_properties=property_format.serialize(props),
    )


def renewed_half(rec: fmt.MessageRecord, property_format: PropertyFormat, **extra: str) -> Message:
    """A copy of half record ``rec`` to re-put to the half topic, with ``extra``
    properties set (``renewHalfMessageInner`` / ``renewImmunityHalfMessageInner``)."""
    props = {**rec.properties, **extra}
    return _renew(rec, HALF_TOPIC, props, property_format, rec.sys_flag)


def discarded(rec: fmt.MessageRecord, property_format: PropertyFormat) -> Message:
    """Half record ``rec``, checked too often, as stored in ``TRANS_CHECK_MAX_TIME_TOPIC``
    queue 0 (``DefaultTransactionalMessageCheckListener.toMessageExtBrokerInner``)."""
    sys_flag = _with_tx_type(rec.sys_flag, fmt.TRANSACTION_NOT_TYPE)
    return _renew(rec, CHECK_MAX_TOPIC, dict(rec.properties), property_format, sys_flag)


@dataclass(frozen=True, slots=True)
class EndTransaction:
    """END_TRANSACTION's header (``EndTransactionRequestHeader``)."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    state: TransactionState
    from_transaction_check: bool = False
    msg_id: str = ""
    transaction_id: str = ""

    def ext(self) -> dict[str, str]:
        """The header's fields as the Java producer writes them."""
        return {
            "producerGroup": self.producer_group,
            "tranStateTableOffset": str(self.tran_state_table_offset),
            "commitLogOffset": str(self.commit_log_offset),
            "commitOrRollback": str(int(self.state)),
            "fromTransactionCheck": "true" if self.from_transaction_check else "false",
            "msgId": self.msg_id,
            "transactionId": self.transaction_id,
        }
