"""Client side of mqstore: producers, consumers and the transports they use.

Public names are re-exported here lazily (PEP 562 ``__getattr__``): ``import
mqstore.client`` loads nothing, and ``from mqstore.client import PushConsumer`` imports
only the modules that name needs, so tools that import one submodule stay cheap.

Module map (one job each):

- ``allocate``: ``MessageQueue`` (ordered and printed exactly as RocketMQ's) and the
  queue-allocation strategies, one pure function per RocketMQ strategy, so Python,
  Java and JS consumers in one group agree on who owns which queue.
- ``transport``: the client/broker contract (``Transport`` protocol; the result types
  and ``BrokerError``/``TransportError`` come from ``mqstore.remoting``); ``remote``
  (``RemoteTransport``, RocketMQ remoting over TCP, with ``remoting_client``, ``wire``
  and ``route``) implements it, and so does the broker side's
  ``mqstore.broker.inprocess.InProcessTransport`` (calls a ``BrokerCore`` directly).
- ``producer``: ``Producer`` (send, batch, queue selectors); ``transaction_producer``:
  ``TransactionProducer`` (half message, local transaction, END_TRANSACTION, check-back).
- ``consumer``: the consumer facade; ``push_consumer`` (``PushConsumer``) and
  ``lite_pull_consumer`` (``LitePullConsumer``) over ``consumer_base`` (identity,
  heartbeats, offset persistence, rebalance service, route poll).
- ``rebalance``: which queues this member owns and their process queues;
  ``process_queue`` and ``flow_control``: fetched messages and pull throttling;
  ``pull_service``: one thread pulling every owned queue (async long polls).
- ``consume_concurrently`` / ``consume_orderly``: the consume services (retry via
  send-back, DLQ; broker queue locks); ``listener``: statuses and contexts.
- ``offset_store``: broker (CLUSTERING) and local-file (BROADCASTING) offsets.
- ``consumer_config``: ``ConsumerConfig`` and RocketMQ's client constants;
  ``scheduler``, ``client_instance``, ``brokers``: threads, client ids and
  notifications, transports by broker name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mqstore.client.consumer_config import ConsumerConfig
    from mqstore.client.listener import (
        ConsumeConcurrentlyContext,
        ConsumeConcurrentlyStatus,
        ConsumeOrderlyContext,
        ConsumeOrderlyStatus,
    )
    from mqstore.client.lite_pull_consumer import LitePullConsumer
    from mqstore.client.producer import Producer
    from mqstore.client.push_consumer import PushConsumer
    from mqstore.client.remote import RemoteTransport
    from mqstore.client.transaction_producer import LocalTransactionState, TransactionProducer
    from mqstore.client.transport import ConsumeFromWhere, MessageModel

_EXPORTS: dict[str, str] = {
    "ConsumeConcurrentlyContext": "mqstore.client.listener",
    "ConsumeConcurrentlyStatus": "mqstore.client.listener",
    "ConsumeFromWhere": "mqstore.client.transport",
    "ConsumeOrderlyContext": "mqstore.client.listener",
    "ConsumeOrderlyStatus": "mqstore.client.listener",
    "ConsumerConfig": "mqstore.client.consumer_config",
    "LitePullConsumer": "mqstore.client.lite_pull_consumer",
    "LocalTransactionState": "mqstore.client.transaction_producer",
    "MessageModel": "mqstore.client.transport",
    "Producer": "mqstore.client.producer",
    "PushConsumer": "mqstore.client.push_consumer",
    "RemoteTransport": "mqstore.client.remote",
    "TransactionProducer": "mqstore.client.transaction_producer",
}
"""Public name -> the module that defines it."""

__all__ = [
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumerConfig",
    "LitePullConsumer",
    "LocalTransactionState",
    "MessageModel",
    "Producer",
    "PushConsumer",
    "RemoteTransport",
    "TransactionProducer",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use (and cache it in the package).

    Raises:
        AttributeError: not a public name. Submodule imports (``from store.client
        import wire``) rely on this to fall back to the import system.
    """
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
