"""Message listeners: what user code implements, with RocketMQ's names.

A concurrent listener is ``callback(msgs, context) -> ConsumeConcurrentlyStatus``; an
orderly one ``callback(msgs, context) -> ConsumeOrderlyStatus``. As in RocketMQ, a
listener that raises or returns ``None`` has *failed*: RECONSUME_LATER (concurrent)
or SUSPEND_CURRENT_QUEUE_A_MOMENT (orderly). A silent ``None`` is not success, so a
forgotten ``return`` cannot lose messages.

Messages that come back through ``%RETRY%<group>`` are shown to the listener under
their original topic (the RETRY_TOPIC property), as RocketMQ's
``resetRetryAndNamespace`` does; ``reconsume_times`` tells a retry apart.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mqstore.client.allocate import MessageQueue
from mqstore.client.consumer_config import is_retry_topic
from mqstore.message import PROPERTY_RETRY_TOPIC
from mqstore.records import StoredMessage


class ConsumeConcurrentlyStatus(enum.Enum):
    """RocketMQ ``ConsumeConcurrentlyStatus``."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """RocketMQ ``ConsumeOrderlyStatus`` (the deprecated ROLLBACK/COMMIT omitted)."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """Per-call knobs a concurrent listener may set.

    ``delay_level_when_next_consume``: 0 lets the broker pick (3 + reconsume times),
    -1 sends straight to the DLQ. ``ack_index``: on success, messages after this index
    of the batch are still treated as failed.
    """

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """Per-call knobs of an orderly listener (``suspend_current_queue_time_millis``
    is clamped to 10..30000 ms)."""

    message_queue: MessageQueue
    suspend_current_queue_time_millis: int = -1


ConcurrentListener = Callable[
    [Sequence[StoredMessage], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus | None
]
OrderlyListener = Callable[
    [Sequence[StoredMessage], ConsumeOrderlyContext], ConsumeOrderlyStatus | None
]


def user_view(msg: StoredMessage) -> StoredMessage:
    """The message as the listener sees it: a retry shows its original topic."""
    if is_retry_topic(msg.topic):
        real = msg.properties.get(PROPERTY_RETRY_TOPIC)
        if real:
            return msg._replace(topic=real)
    return msg
