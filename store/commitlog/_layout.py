"""The CommitLog record layout: the ONE place that knows its bytes.

Every record is big-endian, laid out as below (``b`` = 12 when the born host is IPv6
else 0, ``s`` likewise for the store host, ``t`` = 1 for V1 and 2 for V2 magic)::

    off        size  field
    0          4     TOTALSIZE        whole record, this field included
    4          4     MAGICCODE        V1 DA A3 20 A7 | V2 DA A3 20 AB | BLANK CB D4 31 94
    8          4     BODYCRC          zlib CRC-32 of the stored body & 0x7FFFFFFF
    12         4     QUEUEID
    16         4     FLAG
    20         8     QUEUEOFFSET      index in the consume queue
    28         8     PHYSICALOFFSET   this record's own CommitLog offset
    36         4     SYSFLAG          compression, transaction type, IPv6 bits
    40         8     BORNTIMESTAMP    ms
    48         8+b   BORNHOST         4|16-byte address + int port
    56+b       8     STORETIMESTAMP   ms, set under the put lock
    64+b       8+s   STOREHOST
    72+b+s     4     RECONSUMETIMES
    76+b+s     8     PREPARED TX OFFSET
    84+b+s     4+B   body length, body (compressed bytes if SYSFLAG bit 0)
    ..         t+T   topic length (signed byte V1 / signed short V2), UTF-8 topic
    ..         2+P   properties length (signed short), UTF-8 properties string

    TOTALSIZE = 91 + b + s + (t - 1) + B + T + P

End of a segment: when a record (or a whole batch) plus 8 bytes does not fit in the
bytes left, the writer puts an 8-byte blank record ``[int maxBlank][BLANK magic]``
at the write position and the rest of the file stays zero; the reader treats it as
"continue at the next segment". An exact fit (record + 8 == left) is allowed, so 8
bytes always remain for the blank.

Worked example (docs/format.md §6): topic ``TopicTest``, body ``Hello RocketMQ``,
properties of 95 bytes, IPv4 hosts give TOTALSIZE 91 + 14 + 9 + 95 = 209 = 0xD1 and
BODYCRC 0x69C865ED; ``tests/commitlog/test_format.py`` checks those exact bytes.

Compatibility notes: 4.9 accepts only V1; 5.1+ writes V2 only for topics over 127
chars. Brokers up to 4.9.0 end properties with a trailing ``0x02``, which parses the
same. The 5.2 ``__CRC32#`` property is an ordinary property to this decoder.

Contract: this module is the specification and its constants (derived byte positions,
``struct`` formats, SYSFLAG bits, the length formula); it does no I/O and builds no
record. The codec modules beside it read the layout only from here, and every name is
re-exported by :mod:`mqstore.commitlog.format`, the package's public facade.
"""

from __future__ import annotations

import enum
import struct
import zlib
from typing import Final

MAGIC_V1: Final = -626843481
MAGIC_V2: Final = -626843477
BLANK_MAGIC: Final = -875286124
END_FILE_MIN_BLANK_LENGTH: Final = 8

# SYSFLAG bits (MessageSysFlag)
COMPRESSED_FLAG: Final = 0x1
MULTI_TAGS_FLAG: Final = 0x2
TRANSACTION_NOT_TYPE: Final = 0x0
TRANSACTION_PREPARED_TYPE: Final = 0x4
TRANSACTION_COMMIT_TYPE: Final = 0x8
TRANSACTION_ROLLBACK_TYPE: Final = 0xC
TRANSACTION_MASK: Final = 0xC
BORNHOST_V6_FLAG: Final = 0x10
STOREHOST_V6_FLAG: Final = 0x20
NEED_UNWRAP_FLAG: Final = 0x40
INNER_BATCH_FLAG: Final = 0x80

MAX_PROPERTIES_LENGTH: Final = 32767
MAX_TOPIC_LENGTH_V1: Final = 127

_INT: Final = struct.Struct(">i")
_SIZE_MAGIC: Final = struct.Struct(">ii")
_SHORT: Final = struct.Struct(">h")
_BYTE_VALUES: Final = tuple(bytes((i,)) for i in range(256))

# Fields before the born host: TOTALSIZE..BORNTIMESTAMP.
_PREFIX: Final = struct.Struct(">iiiiiqqiq")
TOTAL_SIZE_POS: Final = 0
MAGIC_POS: Final = TOTAL_SIZE_POS + 4
BODY_CRC_POS: Final = MAGIC_POS + 4
QUEUE_ID_POS: Final = BODY_CRC_POS + 4
FLAG_POS: Final = QUEUE_ID_POS + 4
QUEUE_OFFSET_POS: Final = FLAG_POS + 4
PHYSICAL_OFFSET_POS: Final = QUEUE_OFFSET_POS + 8
SYSFLAG_POS: Final = PHYSICAL_OFFSET_POS + 8
BORN_TIMESTAMP_POS: Final = SYSFLAG_POS + 4
BORN_HOST_POS: Final = BORN_TIMESTAMP_POS + 8
assert _PREFIX.size == BORN_HOST_POS

IPV4_HOST_LEN: Final = 8
IPV6_HOST_LEN: Final = 20


def _header(born_len: int, store_len: int) -> struct.Struct:
    # prefix | born host | store ts | store host | reconsume | prepared tx | body length
    return struct.Struct(f">iiiiiqqiq{born_len}sq{store_len}siqi")


_HEADERS: Final = {
    (b, s): _header(b, s)
    for b in (IPV4_HOST_LEN, IPV6_HOST_LEN)
    for s in (IPV4_HOST_LEN, IPV6_HOST_LEN)
}
_TAIL: Final = struct.Struct(">iqi")  # reconsume, prepared tx offset, body length
MIN_RECORD_SIZE: Final = _HEADERS[(IPV4_HOST_LEN, IPV4_HOST_LEN)].size + 1 + 2
"""91: the smallest possible record (IPv4 hosts, V1, empty body/topic/properties)."""


def store_timestamp_pos(sys_flag: int) -> int:
    """Byte position of STORETIMESTAMP, which depends on the born-host width."""
    return BORN_HOST_POS + (IPV6_HOST_LEN if sys_flag & BORNHOST_V6_FLAG else IPV4_HOST_LEN)


def header_struct(born_len: int, store_len: int) -> struct.Struct:
    """The struct of a record's fixed fields (TOTALSIZE through the body length) for
    these host widths: packed with the 15 field values in layout order."""
    return _HEADERS[(born_len, store_len)]


def header_length(born_len: int, store_len: int) -> int:
    """Bytes before the body (TOTALSIZE through the body length field) for these host
    widths: TOTALSIZE is this, the body, and the topic/properties tail with its length
    fields (``version`` + 2 bytes)."""
    return _HEADERS[(born_len, store_len)].size


def record_length(
    sys_flag: int, version: int, body_len: int, topic_len: int, props_len: int
) -> int:
    """TOTALSIZE for these lengths (RocketMQ ``calMsgLength``).

    >>> record_length(0, 1, 14, 9, 95)
    209
    """
    born = IPV6_HOST_LEN if sys_flag & BORNHOST_V6_FLAG else IPV4_HOST_LEN
    store = IPV6_HOST_LEN if sys_flag & STOREHOST_V6_FLAG else IPV4_HOST_LEN
    return header_length(born, store) + body_len + version + topic_len + 2 + props_len


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """BODYCRC: CRC-32 (IEEE, zlib's polynomial) masked with 0x7FFFFFFF.

    zlib.crc32 is used rather than crcmod: same values, and faster at every size.
    """
    return zlib.crc32(body) & 0x7FFFFFFF


class TransactionType(enum.IntEnum):
    """SYSFLAG bits 2-3."""

    NOT = TRANSACTION_NOT_TYPE
    PREPARED = TRANSACTION_PREPARED_TYPE
    COMMIT = TRANSACTION_COMMIT_TYPE
    ROLLBACK = TRANSACTION_ROLLBACK_TYPE
