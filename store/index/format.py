"""The IndexFile format: the ONE place that knows its byte layout.

An index file is a fixed-size hash table with chained entries, big-endian
(RocketMQ ``IndexFile`` / ``IndexHeader``)::

    header, 40 bytes
      off  size  field
      0    8     beginTimestamp   store time of the first entry (ms)
      8    8     endTimestamp     store time of the last entry
      16   8     beginPhyOffset   CommitLog offset of the first entry's message
      24   8     endPhyOffset     CommitLog offset of the last entry's message
      32   4     hashSlotCount    slots in use
      36   4     indexCount       next entry number; starts at 1 (entry 0 is unused)
    slots, hashSlotNum x 4 bytes at 40
      int: number of the newest entry in this slot, 0 = empty
    entries, indexNum x 20 bytes at 40 + hashSlotNum x 4
      off  size  field
      0    4     keyHash          abs(String.hashCode(key)), MIN_VALUE -> 0
      4    8     phyOffset        CommitLog offset of the message
      12   4     timeDiff         seconds since beginTimestamp
      16   4     prevIndex        previous entry of the same slot, 0 = end of chain

The key is ``topic + "#" + key``; slot = keyHash % hashSlotNum. A file holds at most
``indexNum - 1`` entries and is named by its creation time ``yyyyMMddHHmmssSSS``.
Only hashes are stored, so a lookup returns false positives that the caller must
filter by the real key.

Worked example (docs/format.md §6): ``TopicTest#KEY1`` hashes to -1656969516, keyHash
1656969516, slot 1969516 of 5,000,000 at byte 40 + 1969516 x 4 = 7,878,104; with
20,000,000 entries the first entry (number 1) sits at 40 + 20,000,000 + 20 =
20,000,060.
"""

from __future__ import annotations

import mmap
import struct
import time
from typing import Final, NamedTuple

from mqstore.message import java_string_hash

HEADER: Final = struct.Struct(">qqqqii")
HEADER_SIZE: Final = HEADER.size
HEADER_FIELDS: Final = struct.Struct(">qqqqi")
"""The header without its last field, ``indexCount`` (written on its own, last)."""
SLOT: Final = struct.Struct(">i")
SLOT_SIZE: Final = SLOT.size
ENTRY: Final = struct.Struct(">iqii")
ENTRY_SIZE: Final = ENTRY.size
NAME_LENGTH: Final = 17
INT_MAX: Final = 0x7FFFFFFF

assert HEADER_SIZE == 40 and ENTRY_SIZE == 20


class Header(NamedTuple):
    """The 40-byte header."""

    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


class Entry(NamedTuple):
    """One 20-byte entry."""

    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int


def file_size(hash_slot_num: int, index_num: int) -> int:
    """Bytes of an index file.

    >>> file_size(5_000_000, 20_000_000)
    420000040
    """
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


def build_key(topic: str, key: str) -> str:
    """The string that is hashed: ``topic#key``."""
    return f"{topic}#{key}"


# ``String.hashCode`` of ASCII text is its value as a base-31 numeral whose "digits"
# are the character codes, mod 2**32. Codes go up to 127, so each code c is split as
# 31 * (c // 31) + c % 31: two numerals of true base-31 digits, which ``int(x, 31)``
# evaluates in C. Digits, and the two bytes.translate tables that map codes to them:
_B31_DIGITS: Final = b"0123456789abcdefghijklmnopqrstu"
_HIGH: Final = bytes(_B31_DIGITS[c // 31] if c < 128 else 48 for c in range(256))
_LOW: Final = bytes(_B31_DIGITS[c % 31] if c < 128 else 48 for c in range(256))
_MAX_FAST: Final = 4000  # int() refuses > 4300 digits in a non-power-of-two base


def key_hash(key: str) -> int:
    """``abs(String.hashCode(key))`` with MIN_VALUE mapped to 0 (``IndexFile.indexKeyHashMethod``).

    Every message indexes two or more keys, so this is the dispatcher's hottest
    function. ASCII keys are hashed as sum(c_i * 31**(n-1-i)) = 31 * H + L, where H
    and L are the base-31 numerals of the codes' high and low base-31 digits (two
    ``bytes.translate`` and two ``int(x, 31)``, all in C), several times cheaper for a
    ``topic#UNIQ_KEY`` than a dot product with a table of powers.

    >>> key_hash("TopicTest#KEY1")
    1656969516
    >>> key_hash("polygenelubricants")  # hashCode is Integer.MIN_VALUE
    0
    """
    if key.isascii() and 0 < len(key) <= _MAX_FAST:
        b = key.encode()
        h = (31 * int(b.translate(_HIGH), 31) + int(b.translate(_LOW), 31)) & 0xFFFFFFFF
        return h if h < 0x80000000 else 0 if h == 0x80000000 else (1 << 32) - h
    h = java_string_hash(key)
    return 0 if h == -(1 << 31) else abs(h)


def slot_position(slot: int) -> int:
    """Byte position of slot ``slot``.

    >>> slot_position(1969516)
    7878104
    """
    return HEADER_SIZE + slot * SLOT_SIZE


def entry_position(hash_slot_num: int, index: int) -> int:
    """Byte position of entry number ``index``.

    >>> entry_position(5_000_000, 1)
    20000060
    """
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index * ENTRY_SIZE


def time_diff_seconds(store_timestamp: int, begin_timestamp: int) -> int:
    """Seconds from the header's begin, clamped to [0, INT_MAX]; 0 with no begin yet."""
    if begin_timestamp <= 0:
        return 0
    diff = int((store_timestamp - begin_timestamp) / 1000)  # Java long division truncates
    return min(max(diff, 0), INT_MAX)


def file_name(timestamp_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in local time (``UtilAll.timeMillisToHumanString``)."""
    t = time.localtime(timestamp_ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{timestamp_ms % 1000:03d}"


def name_to_millis(name: str) -> int:
    """Inverse of :func:`file_name` (local time).

    >>> name_to_millis(file_name(1_700_000_000_123))
    1700000000123
    """
    seconds = time.mktime(time.strptime(name[:14], "%Y%m%d%H%M%S"))
    return int(seconds) * 1000 + int(name[14:17])


def read_header(buf: bytes | bytearray | memoryview | mmap.mmap) -> Header:
    """The header of an index file's bytes (read-only; for checkers)."""
    return Header(*HEADER.unpack_from(buf, 0))
