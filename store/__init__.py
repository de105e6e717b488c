"""mqstore: a RocketMQ-compatible message store.

Public API (README.md, "Embedded store")::

    from mqstore import (MessageStore, StoreConfig, Message, FlushDiskType, BrokerRole,
                       PutStatus, GetStatus)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mqstore.config import BrokerRole, FlushDiskType, StoreConfig
from mqstore.consumequeue.filter import Subscription, parse_subscription
from mqstore.consumequeue.results import GetRawResult, GetResult, QueryResult
from mqstore.errors import (
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
from mqstore.message import Message
from mqstore.records import StoredMessage
from mqstore.status import GetStatus, PutStatus

if TYPE_CHECKING:
    from mqstore.cleanup import CleanupResult
    from mqstore.consumequeue.dispatch import Arrival
    from mqstore.consumequeue.search import BoundaryType
    from mqstore.message_store import MessageStore

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
    "MessageStore": ("mqstore.message_store", "MessageStore"),
    "Arrival": ("mqstore.consumequeue.dispatch", "Arrival"),
    "BoundaryType": ("mqstore.consumequeue.search", "BoundaryType"),
    "CleanupResult": ("mqstore.cleanup", "CleanupResult"),
}


def __getattr__(name: str) -> Any:
    # MessageStore pulls in threads and mmap machinery; codecs and tools that only
    # need the record format should not pay for it.
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'store' has no attribute {name!r}")
