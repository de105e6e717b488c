"""RocketMQ 5.x POP (message-level consumption) over a MessageStore.

The store-side service is :class:`PopService` (``mqstore.pop.service``); the records it
writes to the revive topic are in ``mqstore.pop.records``, receipt handles in
``mqstore.pop.receipt``. The spec with the upstream facts relied on is ``docs/pop.md``.
"""

from __future__ import annotations

from mqstore.pop.receipt import ReceiptHandle
from mqstore.pop.records import AckMsg, PopCheckPoint, dlq_topic, pop_retry_topic, revive_topic
from mqstore.pop.service import (
    AckStatus,
    ChangeResult,
    PopConfig,
    PoppedMessage,
    PopResult,
    PopService,
    PopStatus,
)

__all__ = [
    "AckMsg",
    "AckStatus",
    "ChangeResult",
    "PopCheckPoint",
    "PopConfig",
    "PopResult",
    "PopService",
    "PopStatus",
    "PoppedMessage",
    "ReceiptHandle",
    "dlq_topic",
    "pop_retry_topic",
    "revive_topic",
]
