"""The SEND_BATCH_MESSAGE body: several messages in one request, both ways.

RocketMQ ``MessageDecoder.encodeMessages``: the messages one after another, each
big-endian: total size of the entry, magic (unused), body CRC (unused: the broker
computes it), flag, body length, body, properties length (2 bytes), properties string.
The client encodes, the broker decodes; pure functions, no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from mqstore.remoting.errors import BadRequestError

_ENTRY_HEAD: Final = struct.Struct(">iiiii")  # size, magic, crc, flag, body_len
_SHORT: Final = struct.Struct(">h")


BatchEntry = tuple[int, bytes, str]
"""(flag, body, properties string) of one message of a batch."""


def encode_batch(entries: Sequence[BatchEntry]) -> bytes:
    """The SEND_BATCH_MESSAGE body for ``entries`` (client side; used by tests)."""
    out = bytearray()
    for flag, body, props in entries:
        p = props.encode("utf-8")
        size = _ENTRY_HEAD.size + len(body) + _SHORT.size + len(p)
        out += _ENTRY_HEAD.pack(size, 0, 0, flag, len(body)) + body + _SHORT.pack(len(p)) + p
    return bytes(out)


def decode_batch(body: bytes) -> list[BatchEntry]:
    """Split a SEND_BATCH_MESSAGE body.

    Raises:
        BadRequestError: an entry's sizes do not fit the body.
    """
    entries: list[BatchEntry] = []
    pos, end = 0, len(body)
    while pos < end:
        if pos + _ENTRY_HEAD.size > end:
            raise BadRequestError(f"batch entry at {pos}: truncated head")
        size, _magic, _crc, flag, body_len = _ENTRY_HEAD.unpack_from(body, pos)
        b0 = pos + _ENTRY_HEAD.size
        if body_len < 0 or b0 + body_len + _SHORT.size > end:
            raise BadRequestError(f"batch entry at {pos}: body length {body_len} out of range")
        (props_len,) = _SHORT.unpack_from(body, b0 + body_len)
        p0 = b0 + body_len + _SHORT.size
        if props_len < 0 or p0 + props_len > end:
            raise BadRequestError(f"batch entry at {pos}: properties length {props_len}")
        try:
            props = body[p0 : p0 + props_len].decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadRequestError(f"batch entry at {pos}: properties not UTF-8") from e
        entries.append((flag, bytes(body[b0 : b0 + body_len]), props))
        pos = p0 + props_len
        if size != pos - (b0 - _ENTRY_HEAD.size):
            raise BadRequestError(f"batch entry at {b0 - _ENTRY_HEAD.size}: size {size} mismatch")
    return entries
