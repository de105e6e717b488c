"""The bulk scan's body CRC: ISA-L's CRC-32 where installed, always zlib's values."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt


def test_the_bulk_scan_hashes_bodies_with_isal_when_it_is_installed():
    isal_zlib = pytest.importorskip("isal.isal_zlib", reason="isal (an engine dependency) absent")
    assert bulk.crc32 is isal_zlib.crc32


@given(st.binary(max_size=5000))
def test_the_bulk_crc_gives_zlibs_value_for_any_body(body):
    assert bulk.crc32(body) == zlib.crc32(body)
    assert bulk.crc32(memoryview(body)) == zlib.crc32(body)


@given(st.binary(min_size=1, max_size=3000), st.integers(0, 7))
def test_a_flipped_body_bit_fails_the_bulk_crc_verdict(body, bit):
    """A record whose body lost one bit after its BODYCRC was written is not crc_ok."""
    host = (127 << 24 | 1).to_bytes(4, "big") + (10911).to_bytes(4, "big")
    record = bytearray(
        fmt.encode_raw(
            queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0,
            born_timestamp=1, born_host=host, store_timestamp=1, store_host=host,
            reconsume_times=0, prepared_transaction_offset=0, body=body,
            crc=fmt.body_crc(body), topic=b"t", properties=b"", version=1,
        )
    )  # fmt: skip
    clean = bulk.scan(bytes(record), 0, len(record)).records
    body_at = int(clean.body_pos[0])
    record[body_at + len(body) // 2] ^= 1 << bit
    damaged = bulk.scan(bytes(record), 0, len(record)).records
    assert bool(clean.crc_ok[0]) and not bool(damaged.crc_ok[0])
