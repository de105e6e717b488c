"""The validating decoder at the edges of its checks (``mqstore.commitlog._decode``):
each case one byte past a bound, where a check off by one would accept, or index out
of the buffer instead of answering :class:`Corrupt`."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from mqstore.commitlog.format import (
    BORNHOST_V6_FLAG,
    MAGIC_POS,
    STOREHOST_V6_FLAG,
    SYSFLAG_POS,
    Corrupt,
    CorruptKind,
    RecordInfo,
    encode,
    make_record,
    scan,
)

_INT = struct.Struct(">i")
BODY_LEN_POS_V4 = 84
"""BODYLENGTH of a record with IPv4 hosts (the header before the body is 88 bytes)."""


def _ipv6_record(body: bytes = b"b", topic: str = "T") -> bytes:
    return encode(make_record(topic=topic, body=body, born_host=("::1", 1),
                              store_host=("2001:db8::ff", 10911)))  # fmt: skip


def _with_int(raw: bytes, pos: int, value: int) -> bytes:
    return raw[:pos] + _INT.pack(value) + raw[pos + 4 :]


def test_a_record_one_byte_short_of_the_ipv6_minimum_is_bad_size() -> None:
    raw = _ipv6_record(b"", "")
    flags = _INT.unpack_from(raw, SYSFLAG_POS)[0]
    assert flags & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    smallest = len(raw)  # empty body, topic and properties: the least an IPv6 record is
    assert isinstance(scan(raw), RecordInfo)
    short = _with_int(raw, 0, smallest - 1)[: smallest - 1]
    r = scan(short)
    assert isinstance(r, Corrupt) and r.kind is CorruptKind.BAD_SIZE, r


@given(st.integers(1, 8))
def test_a_body_length_overrunning_the_record_by_a_few_bytes_is_a_mismatch(over: int) -> None:
    raw = encode(make_record(topic="T", body=b"abcd"))
    body_len = _INT.unpack_from(raw, BODY_LEN_POS_V4)[0]
    assert body_len == 4
    topic_and_props = len(raw) - (BODY_LEN_POS_V4 + 4) - body_len
    bad = _with_int(raw, BODY_LEN_POS_V4, body_len + topic_and_props - 3 + over)
    r = scan(bad)  # the buffer ends where the record does: nothing to read past it
    assert isinstance(r, Corrupt) and r.kind is CorruptKind.LENGTH_MISMATCH, r


def test_a_zero_magic_with_a_size_is_bad_magic_not_zeroed() -> None:
    raw = encode(make_record(topic="T", body=b"b"))
    r = scan(_with_int(raw, MAGIC_POS, 0))
    assert isinstance(r, Corrupt) and r.kind is CorruptKind.BAD_MAGIC, r
    zeros = scan(bytes(len(raw)))
    assert isinstance(zeros, Corrupt) and zeros.kind is CorruptKind.ZEROED
