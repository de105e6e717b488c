"""Consumers, by the names RocketMQ users know (facade).

- :class:`PushConsumer` (``DefaultMQPushConsumer``): register a listener.
- :class:`LitePullConsumer` (``DefaultLitePullConsumer``): ``poll()`` or iterate
  ``messages()``.
"""

from store.client.consumer_config import ConsumerConfig
from store.client.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from store.client.lite_pull_consumer import LitePullConsumer
from store.client.push_consumer import PushConsumer
from store.client.transport import ConsumeFromWhere, MessageModel

__all__ = [
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumerConfig",
    "LitePullConsumer",
    "MessageModel",
    "PushConsumer",
]
