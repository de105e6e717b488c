"""mqstore: a RocketMQ-compatible message store.

Public API (architecture.md)::

    from store import (MessageStore, StoreConfig, Message, FlushDiskType, BrokerRole,
                       PutStatus, GetStatus)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from store.config import BrokerRole, FlushDiskType, StoreConfig
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
    from store.message_store import MessageStore

__all__ = [
    "BrokerRole",
    "ConfigError",
    "CorruptIndexError",
    "CorruptRecordError",
    "FlushDiskType",
    "GetStatus",
    "IllegalMessageError",
    "IllegalTopicError",
    "Message",
    "MessageStore",
    "OffsetOutOfRangeError",
    "PutStatus",
    "SegmentLoadError",
    "StoreClosedError",
    "StoreConfig",
    "StoreError",
    "StoreLockedError",
    "StorePoisonedError",
]


def __getattr__(name: str) -> Any:
    # MessageStore pulls in threads and mmap machinery; codecs and tools that only
    # need the record format should not pay for it.
    if name == "MessageStore":
        from store.message_store import MessageStore

        return MessageStore
    raise AttributeError(f"module 'store' has no attribute {name!r}")
