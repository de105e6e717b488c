"""LevelDB-style sabotage helpers: damage record bytes in memory, one way at a time.

Modelled on the helpers in LevelDB's ``log_test.cc`` (``IncrementByte``/``SetByte``,
``ShrinkSize``, ``FixChecksum``). Every helper takes bytes and returns new ``bytes``;
nothing is mutated in place, so one encoded record can be sabotaged many ways.

The record layout is not restated here: positions come from ``mqstore.commitlog.format``
and :func:`fix_crc` finds the body by decoding, so these helpers follow the codec.
"""

from __future__ import annotations

import struct

from mqstore.commitlog.format import BODY_CRC_POS, Record, body_crc, decode


def flip_byte(buf: bytes, offset: int, mask: int = 0xFF) -> bytes:
    """``buf`` with the byte at ``offset`` XORed with ``mask`` (all bits by default)."""
    if not 0 < mask <= 0xFF:
        raise ValueError(f"mask must be 1..255, got {mask}")
    out = bytearray(buf)
    out[offset] ^= mask
    return bytes(out)


def set_bytes(buf: bytes, offset: int, data: bytes) -> bytes:
    """``buf`` with ``data`` written over the bytes at ``offset`` (same length)."""
    if offset + len(data) > len(buf):
        raise ValueError(f"{len(data)} bytes at {offset} overrun a {len(buf)}-byte buffer")
    return buf[:offset] + data + buf[offset + len(data) :]


def set_int(buf: bytes, offset: int, value: int) -> bytes:
    """``buf`` with a big-endian int32 ``value`` written at ``offset``."""
    return set_bytes(buf, offset, struct.pack(">i", value))


def zero(buf: bytes, offset: int = 0, length: int | None = None) -> bytes:
    """``buf`` with ``length`` bytes from ``offset`` (default: to the end) set to zero."""
    n = len(buf) - offset if length is None else length
    return set_bytes(buf, offset, bytes(n))


def shrink(buf: bytes, n: int) -> bytes:
    """``buf`` without its last ``n`` bytes: a torn write at the end of the log."""
    if not 0 <= n <= len(buf):
        raise ValueError(f"cannot shrink {len(buf)} bytes by {n}")
    return buf[: len(buf) - n]


def fix_crc(buf: bytes, pos: int = 0) -> bytes:
    """``buf`` with BODYCRC of the record at ``pos`` recomputed over its current body.

    Use after changing body bytes, to prove that a later check (not the CRC) is what
    rejects the record, or that a record with a fixed-up CRC decodes again.
    """
    r = decode(buf, pos, check_crc=False)
    if not isinstance(r, Record):
        raise ValueError(f"no record with sane lengths at {pos}: {r}")
    return set_int(buf, pos + BODY_CRC_POS, body_crc(r.record.body))
