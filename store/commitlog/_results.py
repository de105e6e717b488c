"""What decoding returns: the tagged union ``Record | EndOfSegment | Corrupt``.

Contract: frozen values, never a sentinel size. :class:`RecordInfo` is the scan's
cheap result (header fields, topic and properties, the body left in the buffer);
:class:`Corrupt` carries a :class:`CorruptKind` and a detail for the log. Nothing here
reads bytes; :mod:`mqstore.commitlog._decode` does. Import these names from
:mod:`mqstore.commitlog.format`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from mqstore.commitlog._derived import (
    KEYS,
    PROPERTIES,
    TAGS,
    TAGS_CODE,
    UNIQ_KEY,
)
from mqstore.commitlog._layout import TRANSACTION_MASK, TransactionType
from mqstore.commitlog._record import MessageRecord


class CorruptKind(enum.StrEnum):
    """Why bytes at a position are not a valid record; each value is the member's name in
    lower case (the word reports and damage lists carry)."""

    ZEROED = enum.auto()
    """Size and magic are zero: a never-written region (end of data, not damage)."""
    TRUNCATED = enum.auto()
    """The record claims more bytes than the buffer holds (a torn tail)."""
    BAD_MAGIC = enum.auto()
    """The magic is neither a record's nor a blank record's (garbage or another format)."""
    BAD_SIZE = enum.auto()
    """TOTALSIZE is below the smallest record, or a blank record's size overruns the buffer."""
    LENGTH_MISMATCH = enum.auto()
    """The body, topic or properties lengths overrun the record or disagree with TOTALSIZE."""
    BAD_CRC = enum.auto()
    """The body's CRC32 is not the stored BODYCRC (when the reader checks CRCs)."""
    BAD_TEXT = enum.auto()
    """The topic or properties are not UTF-8."""


@dataclass(frozen=True, slots=True)
class Record:
    """A valid record at the decoded position; the next one starts at ``pos + size``."""

    record: MessageRecord
    size: int


@dataclass(frozen=True, slots=True)
class EndOfSegment:
    """A blank record: the rest of this segment (``size`` bytes) holds no data."""

    size: int


@dataclass(frozen=True, slots=True)
class Corrupt:
    """Bytes that are not a valid record. ``size`` is TOTALSIZE as read (may be bogus)."""

    kind: CorruptKind
    detail: str
    size: int


DecodeResult = Record | EndOfSegment | Corrupt


def _bad(kind: CorruptKind, detail: str, size: int = 0) -> Corrupt:
    return Corrupt(kind, detail, size)


class _RecordInfoFields(NamedTuple):
    """The fields of :class:`RecordInfo`, in scan order."""

    size: int
    version: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host_raw: bytes
    store_timestamp: int
    store_host_raw: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body_pos: int
    body_len: int
    topic: str
    properties_string: str


class RecordInfo(_RecordInfoFields):
    """A validated record's header fields, topic and properties, without copying its body.

    What recovery, reput and audits need per record, at a fraction of the cost of a
    :class:`MessageRecord` (a NamedTuple built with ``tuple.__new__`` against a
    16-field frozen dataclass; much faster scans). The body is at
    ``buf[body_pos : body_pos + body_len]`` of the scanned buffer.
    """

    __slots__ = ()

    properties, tags, keys, uniq_key, tags_code = PROPERTIES, TAGS, KEYS, UNIQ_KEY, TAGS_CODE

    @property
    def transaction_type(self) -> TransactionType:
        """Transaction type from SYSFLAG bits 2-3."""
        return TransactionType(self.sys_flag & TRANSACTION_MASK)

    @property
    def msg_id(self) -> str:
        """The offset message id (store host + physical offset)."""
        return (
            self.store_host_raw.hex().upper() + f"{self.physical_offset & 0xFFFFFFFFFFFFFFFF:016X}"
        )


ScanResult = RecordInfo | EndOfSegment | Corrupt
