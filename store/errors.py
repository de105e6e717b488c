"""The store's exception hierarchy: one small tree, each error carrying its context.

Statuses (``mqstore.status``) report expected outcomes; these exceptions report broken
invariants, bad input that cannot be expressed as a status, and I/O failures.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every error raised by mqstore."""


class ConfigError(StoreError, ValueError):
    """A configuration value is out of range or inconsistent."""


class GeometryError(ConfigError):
    """A store's file sizes cannot be told for sure (``mqstore.geometry``): sources that
    disagree, files that contradict each other, or files that do not show them."""


class IllegalTopicError(StoreError, ValueError):
    """A topic name is not allowed (it would become a directory name)."""


class IllegalMessageError(StoreError, ValueError):
    """A message cannot be stored as given (missing body, bad queue id, ...)."""


class CorruptRecordError(StoreError):
    """A CommitLog record failed a structural or CRC check where a valid one was required."""


class CorruptIndexError(StoreError):
    """A ConsumeQueue or index file contradicts itself or the CommitLog."""


class SegmentLoadError(StoreError):
    """A segment file on disk has an unexpected name or size and cannot be loaded."""


class OffsetOutOfRangeError(StoreError, IndexError):
    """A physical or queue offset lies outside what the store holds."""


class NotAStoreError(StoreError, FileNotFoundError):
    """A path given as a store directory holds no store (no ``commitlog/`` directory)."""


class StoreLockedError(StoreError):
    """Another process (or another open store in this process) holds the store's lock."""


class StorePoisonedError(StoreError):
    """An earlier flush (fsync) failed: the store refuses writes until it is reopened."""


class StoreClosedError(StoreError):
    """The store has been closed."""


class InvalidReceiptHandleError(StoreError, ValueError):
    """A POP receipt handle does not parse (RocketMQ ``ExtraInfoUtil`` format)."""
