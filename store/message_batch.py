"""The body of a SEND_BATCH_MESSAGE request: messages back to back (RocketMQ ``MessageBatch``).

The ONE place that knows this wire layout (``MessageDecoder.encodeMessage`` /
``decodeMessages``). It is not a store record: no hosts, no offsets, no topic (the
request header names the topic). Each message is, big-endian::

    off      size  field
    0        4     TOTALSIZE     this message's bytes, this field included
    4        4     MAGICCODE     0 (the client does not set it)
    8        4     BODYCRC       0 (the broker computes CRCs when it stores)
    12       4     FLAG
    16       4+B   body length, body
    20+B     2+P   properties length (signed short), UTF-8 properties string

    TOTALSIZE = 22 + B + P

Worked example: flag 0, body ``hi``, properties ``K\\x01v\\x02`` (4 bytes), so
TOTALSIZE = 22 + 2 + 4 = 28 = 0x1C:

>>> encode_batch([BatchItem(b"hi", "K\\x01v\\x02")]).hex(" ")
'00 00 00 1c 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 02 68 69 00 04 4b 01 76 02'

:func:`decode_batch` is the inverse and raises
:class:`BatchFormatError` for bytes that do not walk to the end exactly.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from store.errors import StoreError

_HEAD: Final = struct.Struct(">iiiii")  # size, magic, body crc, flag, body length
_SHORT: Final = struct.Struct(">h")
FIXED_SIZE: Final = _HEAD.size + _SHORT.size
"""Bytes of one message besides its body and properties (22)."""


class BatchFormatError(StoreError, ValueError):
    """A batch body whose lengths do not add up (message carries the position)."""


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One message of a batch as it travels: body (compressed or not), properties, flag."""

    body: bytes
    properties: str
    flag: int = 0


def encode_batch(items: Sequence[BatchItem]) -> bytes:
    """The request body for ``items``.

    Raises:
        BatchFormatError: a properties string over 32767 UTF-8 bytes.
    """
    out = bytearray()
    for item in items:
        props = item.properties.encode("utf-8")
        if len(props) > 0x7FFF:
            raise BatchFormatError(f"properties of {len(props)} bytes exceed 32767")
        size = FIXED_SIZE + len(item.body) + len(props)
        out += _HEAD.pack(size, 0, 0, item.flag, len(item.body))
        out += item.body
        out += _SHORT.pack(len(props))
        out += props
    return bytes(out)


def decode_batch(body: bytes | bytearray | memoryview) -> list[BatchItem]:
    """The messages of a batch body, in order.

    Raises:
        BatchFormatError: a length is negative, overruns the body, or disagrees with
            TOTALSIZE; or properties are not UTF-8.
    """
    items: list[BatchItem] = []
    pos, end = 0, len(body)
    while pos < end:
        if end - pos < FIXED_SIZE:
            raise BatchFormatError(f"{end - pos} bytes at {pos} are too few for a message")
        size, _magic, _crc, flag, body_len = _HEAD.unpack_from(body, pos)
        p = pos + _HEAD.size
        if body_len < 0 or size < FIXED_SIZE or pos + size > end or p + body_len + 2 > pos + size:
            raise BatchFormatError(f"message at {pos}: size {size}, body length {body_len}")
        (props_len,) = _SHORT.unpack_from(body, p + body_len)
        if props_len < 0 or FIXED_SIZE + body_len + props_len != size:
            raise BatchFormatError(
                f"message at {pos}: size {size} != 22 + {body_len} + {props_len}"
            )
        props_pos = p + body_len + 2
        try:
            props = bytes(body[props_pos : props_pos + props_len]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise BatchFormatError(f"message at {pos}: properties not UTF-8: {e}") from e
        items.append(BatchItem(bytes(body[p : p + body_len]), props, flag))
        pos += size
    return items
