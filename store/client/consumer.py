"""Consumers, by the names RocketMQ users know (facade).

- :class:`PushConsumer` (``DefaultMQPushConsumer``): register a listener.
- :class:`LitePullConsumer` (``DefaultLitePullConsumer``): ``poll()`` or iterate
  ``messages()``.
"""

from mqstore.client.consumer_config import ConsumerConfig
from mqstore.client.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from mqstore.client.lite_pull_consumer import LitePullConsumer
from mqstore.client.push_consumer import PushConsumer
from mqstore.client.transport import ConsumeFromWhere, MessageModel

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
