"""``RecordEncoder.encode_v1_into`` writes in place exactly what ``encode`` returns."""

from __future__ import annotations

import struct

import pytest

from mqstore.commitlog.format import RecordEncoder


@pytest.mark.parametrize("store_host", [bytes(8), bytes(range(20))], ids=["ipv4", "ipv6"])
def test_in_place_bytes_equal_encode(store_host):
    enc = RecordEncoder(store_host)
    body = b"hello"
    tail, version, total = enc.frame(0, len(body), b"T", b"TAGS\x01a\x02")
    assert version == 1
    born = bytes((10, 0, 0, 1, 0, 0, 0x1F, 0x90))
    want = enc.encode(total, 1, 77, 3, 5, 42, 1000, 0, 111, born, 222, 2, 0, body, tail)
    buf = bytearray(b"\xee" * (total + 16))
    enc.encode_v1_into(buf, 8, total, 77, 3, 5, 42, 1000, 111, born, 222, 2, body, tail)
    assert bytes(buf[8 : 8 + total]) == want
    assert buf[:8] == b"\xee" * 8 and buf[8 + total :] == b"\xee" * 8


@pytest.mark.parametrize("store_host", [bytes(8), bytes(range(20))], ids=["ipv4", "ipv6"])
@pytest.mark.parametrize("topic", [b"T", b"x" * 127], ids=["short", "longest_v1"])
@pytest.mark.parametrize("props", [b"", b"TAGS\x01a\x02", b"K\x01" + b"v" * 5000 + b"\x02"])
def test_v1_framer_gives_frames_tail_and_size(store_host, topic, props):
    enc = RecordEncoder(store_host)
    framer = enc.v1_framer(topic)
    assert framer is not None
    tail, version, total = enc.frame(0, 100, topic, props)
    assert version == 1
    assert framer(100, props) == (tail, total)


def test_v1_framer_declines_a_topic_that_needs_v2():
    assert RecordEncoder(bytes(8)).v1_framer(b"x" * 128) is None


BORN = bytes((10, 0, 0, 1, 0, 0, 0x1F, 0x90))


def _batch(enc: RecordEncoder, flags: list[object]) -> list[tuple[object, ...]]:
    framer = enc.v1_framer(b"T")
    assert framer is not None
    records = []
    for i, flag in enumerate(flags):
        body = bytes([i + 1]) * (i + 3)
        tail, total = framer(len(body), b"TAGS\x01a\x02")
        born_ts = None if i % 2 else 500 + i
        records.append(("T-0", i, flag, born_ts, BORN, i, body, 70 + i, tail, total))
    return records


@pytest.mark.parametrize("store_host", [bytes(8), bytes(range(20))], ids=["ipv4", "ipv6"])
def test_a_batch_in_place_equals_its_records_encoded_one_by_one(store_host):
    enc = RecordEncoder(store_host)
    records = _batch(enc, [0, 7, -1])
    base, pos, ts = 1 << 20, 8, 999
    want, phys = [], base + pos
    for (_k, qid, flag, born_ts, born_host, reconsume, body, crc, tail, total), q in zip(
        records, [4, 5, 6], strict=True
    ):
        born_at = ts if born_ts is None else born_ts  # no born timestamp: the store time
        want.append(enc.encode(total, 1, crc, qid, flag, q, phys, 0, born_at, born_host, ts,
                               reconsume, 0, body, tail))  # fmt: skip
        phys += total
    size = sum(map(len, want))
    buf = bytearray(b"\xee" * (pos + size + 8))
    physs = enc.encode_v1_many_into(buf, pos, base, ts, records, [4, 5, 6])
    assert bytes(buf[pos : pos + size]) == b"".join(want)
    assert buf[:pos] == b"\xee" * pos and buf[pos + size :] == b"\xee" * 8
    assert physs == [
        base + pos,
        base + pos + len(want[0]),
        base + pos + len(want[0]) + len(want[1]),
    ]


def test_a_batch_with_a_field_that_does_not_pack_writes_no_byte():
    enc = RecordEncoder(bytes(8))
    records = _batch(enc, [0, 0.5, 0])  # a float flag: the second record's header cannot pack
    buf = bytearray(b"\xee" * 512)
    with pytest.raises(struct.error):
        enc.encode_v1_many_into(buf, 0, 0, 1, records, [0, 1, 2])
    assert buf == b"\xee" * 512
