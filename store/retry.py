"""The properties of a copy of a message sent back for another delivery.

Two paths store such a copy: CONSUMER_SEND_MSG_BACK (``mqstore.broker.sendback``,
RocketMQ ``SendMessageProcessor.consumerSendMsgBack``) and the POP revive
(``mqstore.pop.writer``, ``PopReviveService.reviveRetry``). Both keep the original's
properties (tags, keys, UNIQ_KEY: the consumer sees the same message id) and change the
same ones, which :func:`retry_properties` states once.
"""

from __future__ import annotations

from collections.abc import Mapping

from mqstore.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from mqstore.records import StoredMessage


def retry_properties(
    original: StoredMessage,
    retry_topic: str,
    origin_msg_id: str,
    kept: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The properties of the retry copy of ``original``.

    The delay level and WAIT_STORE_MSG_OK are dropped; ``RETRY_TOPIC`` and
    ``ORIGIN_MESSAGE_ID`` keep the original's value when it has one (so they name the
    first topic and message across retries), else take ``retry_topic`` and
    ``origin_msg_id``; so does each of ``kept``; ``RECONSUME_TIME`` is one more than the
    original's reconsume times. A new property is added in that order.
    """
    props = original.properties
    props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    props.pop(PROPERTY_WAIT_STORE_MSG_OK, None)
    props.setdefault(PROPERTY_RETRY_TOPIC, retry_topic)
    props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, origin_msg_id)
    for name, value in (kept or {}).items():
        props.setdefault(name, value)
    props[PROPERTY_RECONSUME_TIME] = str(original.reconsume_times + 1)
    return props


__all__ = ["retry_properties"]
