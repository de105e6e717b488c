"""mqstore: a RocketMQ-compatible message store.

Public API (architecture.md)::

    from store import (MessageStore, StoreConfig, Message, FlushDiskType, BrokerRole,
                       PutStatus, GetStatus)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from store.config import BrokerRole, FlushDiskType, StoreConfig
from store.consumequeue.filter import Subscription, parse_subscription
from store.consumequeue.results import GetRawResult, GetResult, QueryResult, StoredMessage
from store.errors import (
    ConfigError,
    CorruptIndexError,
    CorruptRecordError,
    IllegalMessageError,
    IllegalTopicError,
    OffsetOutOfRangeError,
    SegmentLoadError,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    StorePoisonedError,
)
from store.message import Message
from store.status import GetStatus, PutStatus

if TYPE_CHECKING:
    from store.cleanup import CleanupResult
    from store.consumequeue.dispatch import Arrival
    from store.consumequeue.search import BoundaryType
    from store.message_store import MessageStore

__all__ = [
    "Arrival",
    "BoundaryType",
    "BrokerRole",
    "CleanupResult",
    "ConfigError",
    "CorruptIndexError",
    "CorruptRecordError",
    "FlushDiskType",
    "GetRawResult",
    "GetResult",
    "GetStatus",
    "IllegalMessageError",
    "IllegalTopicError",
    "Message",
    "MessageStore",
    "OffsetOutOfRangeError",
    "PutStatus",
    "QueryResult",
    "SegmentLoadError",
    "StoreClosedError",
    "StoreConfig",
    "StoreError",
    "StoreLockedError",
    "StorePoisonedError",
    "StoredMessage",
    "Subscription",
    "parse_subscription",
]

_LAZY = {
    "MessageStore": ("store.message_store", "MessageStore"),
    "Arrival": ("store.consumequeue.dispatch", "Arrival"),
    "BoundaryType": ("store.consumequeue.search", "BoundaryType"),
    "CleanupResult": ("store.cleanup", "CleanupResult"),
}


def __getattr__(name: str) -> Any:
    # MessageStore pulls in threads and mmap machinery; codecs and tools that only
    # need the record format should not pay for it.
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'store' has no attribute {name!r}")
