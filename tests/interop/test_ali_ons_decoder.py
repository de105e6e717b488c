"""Records we encode are read field for field by a third-party decoder: node ali-ons.

ali-ons (``lib/message/message_decoder.js``) is an independent JavaScript
re-implementation of RocketMQ's ``MessageDecoder`` that reads pull-response bodies,
i.e. concatenated store records. It walks the fields one after another and never uses
TOTALSIZE to skip, so a length we get wrong shows up as garbage in a later field or
record. It knows IPv4 hosts and V1 magic only, and inflates COMPRESSED bodies with zlib.

Two quirks of its properties parser are part of the expected values: it splits on
``\\x02`` and keeps the empty segment after the trailing separator as the key ``""``
with value ``""``, and it pre-seeds ``TAGS: null``.
"""

from __future__ import annotations

import base64
import zlib

import pytest

from mqstore.commitlog.format import COMPRESSED_FLAG, MessageRecord, encode, make_record
from mqstore.compression import CompressionType
from mqstore.message import java_hashmap_order, properties_to_string

pytestmark = pytest.mark.interop

BODY = bytes(range(256)) + "消息体 body".encode()
LONG_BODY = b"a zlib body the producer compressed because it is over 4096 bytes. " * 80
UNIQ_KEY = "0A0000017B3C18B4AAC2123456780001"


def plain_record(physical_offset: int = 0) -> MessageRecord:
    props = java_hashmap_order(
        [
            ("TAGS", "TagA"),
            ("KEYS", "order-1 order-2"),
            ("color", "red"),
            ("用户", "值"),
            ("WAIT", "true"),
            ("UNIQ_KEY", UNIQ_KEY),
            ("CLUSTER", "DefaultCluster"),
        ]
    )
    return make_record(
        topic="TopicTest",
        body=BODY,
        properties_string=properties_to_string(props),
        queue_id=3,
        flag=0x5A,
        queue_offset=123_456_789,
        physical_offset=physical_offset,
        born_timestamp=1_700_000_000_000,
        born_host=("192.168.7.9", 54321),
        store_timestamp=1_700_000_000_123,
        store_host=("10.0.0.1", 10911),
        reconsume_times=2,
        prepared_transaction_offset=987_654_321,
    )


def zlib_record(physical_offset: int, type_bits: int = CompressionType.ZLIB.flag) -> MessageRecord:
    return make_record(
        topic="ZipTopic",
        body=zlib.compress(LONG_BODY, 5),
        properties_string=properties_to_string([("UNIQ_KEY", UNIQ_KEY), ("TAGS", "zip")]),
        queue_id=1,
        queue_offset=7,
        physical_offset=physical_offset,
        sys_flag=COMPRESSED_FLAG | type_bits,
        born_timestamp=1_700_000_001_000,
        born_host=("127.0.0.1", 40000),
        store_timestamp=1_700_000_001_001,
        store_host=("10.0.0.1", 10911),
    )


def host(h: tuple[str, int]) -> str:
    return f"{h[0]}:{h[1]}"


def ali_ons_properties(rec: MessageRecord) -> dict:
    """What ali-ons' parser yields for our properties string (see the module docstring)."""
    expected: dict = {"TAGS": None, **rec.properties}
    if rec.properties_string.endswith("\x02"):
        expected[""] = ""
    return expected


def assert_header_fields(msg: dict, rec: MessageRecord, raw: bytes) -> None:
    assert msg["storeSize"] == len(raw)
    assert msg["bodyCRC"] == rec.body_crc
    assert msg["queueId"] == rec.queue_id
    assert msg["flag"] == rec.flag
    assert int(msg["queueOffset"]) == rec.queue_offset
    assert int(msg["commitLogOffset"]) == rec.physical_offset
    assert msg["sysFlag"] == rec.sys_flag
    assert int(msg["bornTimestamp"]) == rec.born_timestamp
    assert msg["bornHost"] == host(rec.born_host)
    assert int(msg["storeTimestamp"]) == rec.store_timestamp
    assert msg["storeHost"] == host(rec.store_host)
    assert msg["reconsumeTimes"] == rec.reconsume_times
    assert int(msg["preparedTransactionOffset"]) == rec.prepared_transaction_offset
    assert msg["topic"] == rec.topic
    assert msg["properties"] == ali_ons_properties(rec)
    assert msg["msgId"] == rec.msg_id


def test_plain_record_decodes_field_for_field(ali_ons_decode):
    rec = plain_record()
    raw = encode(rec)
    [msg] = ali_ons_decode(raw)
    assert_header_fields(msg, rec, raw)
    assert base64.b64decode(msg["bodyBase64"]) == BODY


def test_plain_record_keeps_tags_keys_uniq_key_and_user_properties(ali_ons_decode):
    [msg] = ali_ons_decode(encode(plain_record()))
    props = msg["properties"]
    assert props["TAGS"] == "TagA"
    assert props["KEYS"] == "order-1 order-2"
    assert props["UNIQ_KEY"] == UNIQ_KEY
    assert props["color"] == "red"
    assert props["用户"] == "值"


def test_zlib_record_is_inflated_to_the_original_body(ali_ons_decode):
    rec = zlib_record(0)
    raw = encode(rec)
    [msg] = ali_ons_decode(raw)
    assert_header_fields(msg, rec, raw)
    assert msg["sysFlag"] == COMPRESSED_FLAG | 0x300
    assert base64.b64decode(msg["bodyBase64"]) == LONG_BODY


def test_zlib_record_without_type_bits_is_inflated(ali_ons_decode):
    """4.9.3-and-earlier records carry COMPRESSED with type bits 0, which means zlib."""
    rec = zlib_record(0, type_bits=0)
    [msg] = ali_ons_decode(encode(rec))
    assert msg["sysFlag"] == COMPRESSED_FLAG
    assert base64.b64decode(msg["bodyBase64"]) == LONG_BODY


def test_consecutive_records_decode_in_sequence(ali_ons_decode):
    """ali-ons never skips by TOTALSIZE: every length we write must match the bytes."""
    first = plain_record(physical_offset=0)
    first_raw = encode(first)
    second = zlib_record(physical_offset=len(first_raw))
    third = plain_record(physical_offset=len(first_raw) + second.total_size)
    recs = [first, second, third]
    raws = [encode(r) for r in recs]
    msgs = ali_ons_decode(b"".join(raws))
    assert len(msgs) == 3
    for msg, rec, raw in zip(msgs, recs, raws, strict=True):
        assert_header_fields(msg, rec, raw)
    assert [base64.b64decode(m["bodyBase64"]) for m in msgs] == [BODY, LONG_BODY, BODY]
