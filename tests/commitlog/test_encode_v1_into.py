"""``RecordEncoder.encode_v1_into`` writes in place exactly what ``encode`` returns."""

from __future__ import annotations

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
