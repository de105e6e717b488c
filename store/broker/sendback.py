"""CONSUMER_SEND_MSG_BACK: a message a consumer failed to process goes back for retry.

The broker re-reads the original from the CommitLog by physical offset and stores a
copy (docs/store.md §5.2, ``SendMessageProcessor.consumerSendMsgBack``):

- to ``%RETRY%<group>`` through the schedule topic, at delay level
  ``3 + reconsumeTimes`` when the consumer asked for level 0 (10 s, then 30 s, 1 min,
  ...), else at the requested level;
- to ``%DLQ%<group>`` (one queue, no delay) once ``reconsumeTimes`` reaches the maximum
  (the request's ``maxReconsumeTimes``, else the group's ``retryMaxTimes`` = 16) or when
  the requested level is negative.

The copy keeps body, flag, tags, keys and UNIQ_KEY (so the message id stays the same
for the consumer), gains ``RETRY_TOPIC`` (the original topic, kept across retries),
``ORIGIN_MESSAGE_ID`` (the first offset message id, kept across retries) and
``RECONSUME_TIME``, and its ``reconsumeTimes`` field is one more than the original's.
This module only builds the message; the core stores it.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqstore.compression import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK
from mqstore.consumequeue.results import StoredMessage
from mqstore.message import Message
from mqstore.retry import retry_properties

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
DLQ_NUMS_PER_GROUP = 1


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``."""
    return DLQ_GROUP_TOPIC_PREFIX + group


@dataclass(frozen=True, slots=True)
class SendBackPlan:
    """Where the copy goes: ``dlq`` True means the dead-letter queue, no delay."""

    topic: str
    delay_level: int
    dlq: bool


def plan(
    group: str, reconsume_times: int, delay_level: int, max_reconsume_times: int
) -> SendBackPlan:
    """The retry-or-DLQ decision.

    >>> plan("g", 0, 0, 16)
    SendBackPlan(topic='%RETRY%g', delay_level=3, dlq=False)
    >>> plan("g", 16, 0, 16)
    SendBackPlan(topic='%DLQ%g', delay_level=0, dlq=True)
    """
    if reconsume_times >= max_reconsume_times or delay_level < 0:
        return SendBackPlan(dlq_topic(group), 0, True)
    return SendBackPlan(retry_topic(group), delay_level or 3 + reconsume_times, False)


def retry_message(
    original: StoredMessage, target: SendBackPlan, queue_id: int, origin_msg_id: str
) -> Message:
    """The copy of ``original`` to store per ``target`` (see the module docstring); a
    compressed body is copied as it is, with its compression sysflag bits."""
    props = retry_properties(original, original.topic, origin_msg_id or original.msg_id)
    return Message(
        topic=target.topic,
        body=original.body,
        properties=props,
        queue_id=queue_id,
        flag=original.flag,
        delay_level=target.delay_level,
        wait_store_msg_ok=False,
        born_timestamp=original.born_timestamp,
        born_host=original.born_host,
        reconsume_times=original.reconsume_times + 1,
        sys_flag=original.sys_flag & (COMPRESSED_FLAG | COMPRESSION_TYPE_MASK),
    )
