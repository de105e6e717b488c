"""The CommitLog record codec against RocketMQ's format, byte for byte.

Sources: docs/format.md §1 (record; §1.5 sysflag and compression) and §6 (the worked
example). Damage is done with the LevelDB-style helpers in ``tests/sabotage.py``.
"""

from __future__ import annotations

import struct
import zlib

import pytest

from mqstore import compression
from mqstore.commitlog.format import (
    BLANK_MAGIC,
    BODY_CRC_POS,
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    MAGIC_POS,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    STOREHOST_V6_FLAG,
    SYSFLAG_POS,
    Corrupt,
    CorruptKind,
    EncodeError,
    EndOfSegment,
    Record,
    body_crc,
    decode,
    encode,
    encode_blank,
    encode_raw,
    make_record,
    record_length,
    store_timestamp_pos,
)
from mqstore.compression import CompressionType, UnknownCompressionError
from mqstore.message import (
    hashmap_bucket,
    java_hashmap_order,
    java_string_hash,
    offset_msg_id,
    properties_to_string,
    string_to_properties,
    tags_code,
)
from tests.sabotage import fix_crc, flip_byte, set_bytes, set_int, shrink, zero

# ------------------------------------------------------------------- 12.1 worked example

EXAMPLE_UNIQ_KEY = "7F00000100002A9F0000000000000000"

# As the producer/broker would insert them: the client's TAGS, KEYS, WAIT, then the
# broker's UNIQ_KEY (when missing) and CLUSTER, into a HashMap(128).
EXAMPLE_INSERTIONS = [
    ("TAGS", "TagA"),
    ("KEYS", "KEY1"),
    ("WAIT", "true"),
    ("UNIQ_KEY", EXAMPLE_UNIQ_KEY),
    ("CLUSTER", "DefaultCluster"),
]

# The hexdump of docs/format.md §6, copied verbatim (offsets and comments dropped).
EXAMPLE_HEXDUMP = """
00 00 00 d1 da a3 20 a7 69 c8 65 ed 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 01 8b cf e5 68 00
7f 00 00 01 00 00 d4 31 00 00 01 8b cf e5 68 7b
7f 00 00 01 00 00 2a 9f 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 0e 48 65 6c 6c 6f 20 52 6f
63 6b 65 74 4d 51 09 54 6f 70 69 63 54 65 73 74
00 5f 55 4e 49 51 5f 4b 45 59 01 37 46 30 30 30
30 30 31 30 30 30 30 32 41 39 46 30 30 30 30 30
30 30 30 30 30 30 30 30 30 30 30 02 43 4c 55 53
54 45 52 01 44 65 66 61 75 6c 74 43 6c 75 73 74
65 72 02 54 41 47 53 01 54 61 67 41 02 4b 45 59
53 01 4b 45 59 31 02 57 41 49 54 01 74 72 75 65
02
"""
EXAMPLE_BYTES = bytes.fromhex(EXAMPLE_HEXDUMP)


def example_record(properties_string: str | None = None):
    if properties_string is None:
        properties_string = properties_to_string(java_hashmap_order(EXAMPLE_INSERTIONS))
    return make_record(
        topic="TopicTest",
        body=b"Hello RocketMQ",
        properties_string=properties_string,
        queue_id=0,
        flag=0,
        queue_offset=0,
        physical_offset=0,
        sys_flag=0,
        born_timestamp=1700000000000,
        born_host=("127.0.0.1", 54321),
        store_timestamp=1700000000123,
        store_host=("127.0.0.1", 10911),
    )


def decode_damaged(buf: bytes, pos: int = 0, limit: int | None = None) -> Corrupt:
    """Decode bytes a test damaged: they must come back as :class:`Corrupt` (the test
    checks which kind)."""
    r = decode(buf, pos, limit)
    assert isinstance(r, Corrupt)
    return r


def test_worked_example_12_1_encodes_byte_for_byte():
    """The 12.1 worked example HOLDS: make_record + HashMap(128) property order give
    exactly the 209 bytes of the fact sheet's hexdump, with no byte different."""
    assert len(EXAMPLE_BYTES) == 209
    assert encode(example_record()) == EXAMPLE_BYTES


def test_worked_example_property_buckets_match_the_fact_sheet():
    assert {k: hashmap_bucket(k) for k, _ in EXAMPLE_INSERTIONS} == {
        "UNIQ_KEY": 28,
        "CLUSTER": 28,
        "TAGS": 62,
        "KEYS": 87,
        "WAIT": 93,
    }


def test_worked_example_same_bucket_keeps_insertion_order():
    ordered = [k for k, _ in java_hashmap_order(EXAMPLE_INSERTIONS)]
    assert ordered == ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]
    swapped = [("CLUSTER", "c"), ("UNIQ_KEY", "u")]
    assert [k for k, _ in java_hashmap_order(swapped)] == ["CLUSTER", "UNIQ_KEY"]


def test_worked_example_properties_string_is_95_bytes():
    s = properties_to_string(java_hashmap_order(EXAMPLE_INSERTIONS))
    assert s == (
        f"UNIQ_KEY\x01{EXAMPLE_UNIQ_KEY}\x02CLUSTER\x01DefaultCluster\x02"
        "TAGS\x01TagA\x02KEYS\x01KEY1\x02WAIT\x01true\x02"
    )
    assert len(s.encode("utf-8")) == 95


def test_worked_example_size_and_body_crc():
    rec = example_record()
    assert rec.total_size == record_length(0, 1, 14, 9, 95) == 0xD1  # 209
    assert rec.body_crc == body_crc(b"Hello RocketMQ") == 0x69C865ED  # 1774740973


def test_worked_example_decodes_to_its_fields():
    r = decode(EXAMPLE_BYTES)
    assert isinstance(r, Record)
    assert r.size == 209
    assert r.record == example_record()
    assert r.record.properties == dict(EXAMPLE_INSERTIONS)


def test_worked_example_without_wait_is_the_4_9_record():
    """4.9 drops WAIT before serializing: P = 85, TOTALSIZE = 199, layout otherwise equal."""
    without_wait = [kv for kv in EXAMPLE_INSERTIONS if kv[0] != "WAIT"]
    raw = encode(example_record(properties_to_string(java_hashmap_order(without_wait))))
    assert len(raw) == 0xC7  # 199
    expected = EXAMPLE_BYTES[: -len(b"WAIT\x01true\x02")]
    expected = set_int(expected, 0, 199)
    expected = set_bytes(expected, 0x70, struct.pack(">h", 85))
    assert raw == expected


# ------------------------------------------------------------ CQ-independent derived values


def test_offset_msg_id_of_the_worked_example():
    assert example_record().msg_id == "7F00000100002A9F0000000000000000"
    assert offset_msg_id(("127.0.0.1", 10911), 0) == "7F00000100002A9F0000000000000000"


def test_offset_msg_id_carries_the_physical_offset():
    assert offset_msg_id(("10.1.2.3", 8123), 0x1234_5678_9A) == "0A01020300001FBB000000123456789A"


def test_tags_code_of_the_worked_example():
    assert example_record().tags_code == tags_code("TagA") == 0x27A807  # 2598919


def test_blank_record_for_max_blank_1000():
    assert encode_blank(1000) == bytes.fromhex("000003e8cbd43194")


def test_blank_record_decodes_as_end_of_segment():
    assert decode(encode_blank(1000) + bytes(992)) == EndOfSegment(1000)


def test_index_key_hash_of_the_worked_example():
    assert java_string_hash("TopicTest#KEY1") == -1656969516


# --------------------------------------------------------------------- hosts and versions


def test_ipv6_hosts_add_24_bytes():
    rec = make_record(
        topic="TopicTest",
        body=b"Hello RocketMQ",
        properties_string="TAGS\x01TagA\x02",
        born_host=("2001:db8::1", 54321),
        store_host=("fe80::2", 10911),
    )
    raw = encode(rec)
    assert len(raw) == rec.total_size == 115 + 14 + 9 + len("TAGS\x01TagA\x02")
    assert rec.sys_flag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG) == 0x30


def test_ipv6_hosts_are_written_as_16_byte_addresses():
    rec = make_record(
        topic="T",
        body=b"b",
        born_timestamp=1,
        born_host=("2001:db8::1", 54321),
        store_timestamp=0x0102030405060708,
        store_host=("fe80::2", 10911),
    )
    raw = encode(rec)
    assert raw[48:64] == bytes.fromhex("20010db8000000000000000000000001")
    assert raw[64:68] == struct.pack(">i", 54321)
    ts_pos = store_timestamp_pos(rec.sys_flag)
    assert ts_pos == 68
    assert raw[ts_pos : ts_pos + 8] == bytes.fromhex("0102030405060708")
    assert raw[76:92] == bytes.fromhex("fe800000000000000000000000000002")


def test_ipv6_record_round_trips():
    rec = make_record(
        topic="T", body=b"b", born_host=("::1", 1), store_host=("2001:db8::ff", 10911)
    )
    r = decode(encode(rec))
    assert isinstance(r, Record)
    assert r.record == rec


def test_ipv6_host_text_forms_encode_the_same_bytes():
    a = make_record(topic="T", body=b"b", store_host=("::1:0", 10911))
    b = make_record(topic="T", body=b"b", store_host=("::0.1.0.0", 10911))
    assert encode(a) == encode(b)


def test_ipv6_born_host_only_adds_12_bytes():
    rec = make_record(topic="T", body=b"b", born_host=("::1", 1), store_host=("10.0.0.1", 10911))
    assert len(encode(rec)) == 91 + 12 + 1 + 1
    assert rec.sys_flag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG) == BORNHOST_V6_FLAG


def test_ipv6_offset_msg_id_is_56_hex_chars():
    rec = make_record(topic="T", body=b"b", store_host=("::1", 10911), physical_offset=5)
    assert rec.msg_id == "0" * 31 + "1" + "00002A9F" + "0000000000000005"
    assert len(rec.msg_id) == 56


def test_topic_over_127_bytes_uses_v2_magic():
    topic = "%RETRY%" + "g" * 121  # 128 bytes
    rec = make_record(topic=topic, body=b"body", properties_string="a\x01b\x02")
    raw = encode(rec)
    assert rec.version == 2
    assert raw[MAGIC_POS : MAGIC_POS + 4] == bytes.fromhex("daa320ab")
    assert len(raw) == 92 + 4 + 128 + 4
    topic_len_pos = len(raw) - 4 - 2 - 128 - 2
    assert raw[topic_len_pos : topic_len_pos + 2] == struct.pack(">h", 128)


def test_v2_record_round_trips():
    rec = make_record(topic="%DLQ%" + "x" * 200, body=b"body")
    r = decode(encode(rec))
    assert isinstance(r, Record)
    assert r.record == rec
    assert r.record.version == 2


def test_topic_of_127_bytes_stays_v1():
    rec = make_record(topic="t" * 127, body=b"body")
    raw = encode(rec)
    assert rec.version == 1
    assert struct.unpack_from(">i", raw, MAGIC_POS)[0] == MAGIC_V1


def test_v1_refuses_a_topic_over_127_bytes():
    rec = make_record(topic="t" * 128, body=b"body", version=1)
    with pytest.raises(EncodeError):
        encode(rec)


def test_properties_over_32767_bytes_are_refused():
    rec = make_record(topic="t", body=b"b", properties_string="k\x01" + "v" * 32766)
    with pytest.raises(EncodeError):
        encode(rec)


def test_magic_constants_are_the_on_disk_bytes():
    assert struct.pack(">i", MAGIC_V1) == bytes.fromhex("daa320a7")
    assert struct.pack(">i", MAGIC_V2) == bytes.fromhex("daa320ab")
    assert struct.pack(">i", BLANK_MAGIC) == bytes.fromhex("cbd43194")


def test_smallest_record_is_91_bytes():
    raw = encode(make_record(topic="", body=b""))
    assert len(raw) == MIN_RECORD_SIZE == 91


def test_encode_raw_matches_encode():
    rec = example_record()
    raw = encode_raw(
        queue_id=0,
        flag=0,
        queue_offset=0,
        physical_offset=0,
        sys_flag=0,
        born_timestamp=1700000000000,
        born_host=bytes.fromhex("7f000001") + struct.pack(">i", 54321),
        store_timestamp=1700000000123,
        store_host=bytes.fromhex("7f000001") + struct.pack(">i", 10911),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body=b"Hello RocketMQ",
        crc=rec.body_crc,
        topic=b"TopicTest",
        properties=rec.properties_string.encode(),
    )
    assert raw == EXAMPLE_BYTES


def test_decode_reads_a_record_in_the_middle_of_a_buffer():
    buf = b"\xaa" * 10 + EXAMPLE_BYTES + b"\xbb" * 5
    r = decode(buf, 10)
    assert isinstance(r, Record)
    assert r.record == example_record()


def test_decode_respects_the_limit():
    buf = EXAMPLE_BYTES + encode_blank(8)
    r = decode_damaged(buf, 0, limit=200)
    assert r.kind is CorruptKind.TRUNCATED


# ----------------------------------------------------------------------- corrupt records


def test_zeroed_region_is_zeroed_not_damage():
    r = decode_damaged(bytes(300))
    assert r.kind is CorruptKind.ZEROED


def test_zeroed_record_header_is_zeroed():
    r = decode_damaged(zero(EXAMPLE_BYTES, 0, 8))
    assert r.kind is CorruptKind.ZEROED


def test_fewer_than_8_zero_bytes_left_is_zeroed():
    r = decode_damaged(bytes(5))
    assert r.kind is CorruptKind.ZEROED


def test_truncated_tail_is_not_corruption():
    r = decode_damaged(shrink(EXAMPLE_BYTES, 10))
    assert r.kind is CorruptKind.TRUNCATED
    assert r.size == 209


def test_header_cut_after_4_bytes_is_truncated():
    r = decode_damaged(shrink(EXAMPLE_BYTES, 209 - 6))
    assert r.kind is CorruptKind.TRUNCATED


def test_flipped_magic_is_bad_magic():
    r = decode_damaged(flip_byte(EXAMPLE_BYTES, MAGIC_POS + 3))
    assert r.kind is CorruptKind.BAD_MAGIC


def test_total_size_below_the_minimum_is_bad_size():
    r = decode_damaged(set_int(EXAMPLE_BYTES, 0, MIN_RECORD_SIZE - 1))
    assert r.kind is CorruptKind.BAD_SIZE


def test_total_size_too_small_for_ipv6_hosts_is_bad_size():
    raw = set_int(EXAMPLE_BYTES, SYSFLAG_POS, BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    raw = set_int(raw, 0, 100)
    r = decode_damaged(raw)
    assert r.kind is CorruptKind.BAD_SIZE


def test_blank_record_larger_than_the_buffer_is_bad_size():
    r = decode_damaged(encode_blank(1000) + bytes(100))
    assert r.kind is CorruptKind.BAD_SIZE


def test_total_size_disagreeing_with_lengths_is_length_mismatch():
    raw = set_int(EXAMPLE_BYTES, 0, 210) + b"\x00"
    r = decode_damaged(raw)
    assert r.kind is CorruptKind.LENGTH_MISMATCH
    assert r.size == 210


def test_properties_length_too_long_is_length_mismatch():
    raw = set_bytes(EXAMPLE_BYTES, 0x70, struct.pack(">h", 96))
    r = decode_damaged(raw)
    assert r.kind is CorruptKind.LENGTH_MISMATCH


def test_body_length_overrunning_the_record_is_length_mismatch():
    raw = set_int(EXAMPLE_BYTES, 0x54, 1000)
    r = decode_damaged(raw)
    assert r.kind is CorruptKind.LENGTH_MISMATCH


def test_negative_v1_topic_length_is_length_mismatch():
    raw = set_bytes(EXAMPLE_BYTES, 0x66, b"\x89")  # 0x89 is -119 as Java's signed byte
    r = decode_damaged(raw)
    assert r.kind is CorruptKind.LENGTH_MISMATCH


def test_flipped_body_byte_is_bad_crc():
    r = decode_damaged(flip_byte(EXAMPLE_BYTES, 0x58, 0x01))
    assert r.kind is CorruptKind.BAD_CRC


def test_flipped_crc_byte_is_bad_crc():
    r = decode_damaged(flip_byte(EXAMPLE_BYTES, BODY_CRC_POS + 3, 0x10))
    assert r.kind is CorruptKind.BAD_CRC


def test_bad_crc_is_accepted_when_not_checked():
    r = decode(flip_byte(EXAMPLE_BYTES, 0x58, 0x01), check_crc=False)
    assert isinstance(r, Record)
    assert r.record.body == b"Iello RocketMQ"
    assert not r.record.valid_crc


def test_fixed_crc_makes_a_changed_body_decode():
    r = decode(fix_crc(flip_byte(EXAMPLE_BYTES, 0x58, 0x01)))
    assert isinstance(r, Record)
    assert r.record.body == b"Iello RocketMQ"
    assert r.record.valid_crc


def test_invalid_utf8_topic_is_bad_text():
    r = decode_damaged(set_bytes(EXAMPLE_BYTES, 0x67, b"\xff"))
    assert r.kind is CorruptKind.BAD_TEXT


def test_invalid_utf8_properties_is_bad_text():
    r = decode_damaged(set_bytes(EXAMPLE_BYTES, 0xD0, b"\xc3"))  # a lead byte with no continuation
    assert r.kind is CorruptKind.BAD_TEXT


def test_body_is_not_text_checked():
    raw = fix_crc(set_bytes(EXAMPLE_BYTES, 0x58, b"\xff\xfe"))
    r = decode(raw)
    assert isinstance(r, Record)
    assert r.record.body == b"\xff\xfello RocketMQ"


# ------------------------------------------------------------------- Java String.hashCode


@pytest.mark.parametrize(
    ("text", "expected"),
    [("TagA", 2598919), ("TAG1", 2567159), ("abc", 96354), ("", 0), ("a", 97)],
)
def test_java_string_hash_vectors(text, expected):
    assert java_string_hash(text) == expected


def test_java_string_hash_wraps_to_negative_int32():
    assert java_string_hash("TopicTest#KEY1") == -1656969516
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE


def test_java_string_hash_counts_utf16_units_of_non_bmp_chars():
    # U+1F600 is the surrogate pair D83D DE00 in Java: h = 0xD83D * 31 + 0xDE00.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00 == 1772899
    assert java_string_hash("a\U0001f600") == (97 * 31 + 0xD83D) * 31 + 0xDE00


def test_java_string_hash_of_bmp_non_ascii_uses_the_char_value():
    assert java_string_hash("é") == 0xE9
    assert java_string_hash("中") == 0x4E2D


def test_tags_code_is_zero_without_tags():
    assert tags_code(None) == 0
    assert tags_code("") == 0


def test_tags_code_keeps_the_sign():
    assert tags_code("polygenelubricants") == -(2**31)


# ------------------------------------------------------------------- properties parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("k1\x01", {}),
        ("\x01v1", {}),
        ("1\x011", {"1": "1"}),
        ("k\x01v\x02", {"k": "v"}),
        ("k\x01v\x02\x02\x02", {"k": "v"}),
        ("\x02\x02k\x01v", {"k": "v"}),
        ("k\x01v1\x02k\x01v2\x02", {"k": "v2"}),
        ("k\x01v\x01w\x02", {"k": "v\x01w"}),
        ("kv\x02a\x01b\x02", {"a": "b"}),
        ("", {}),
    ],
    ids=[
        "empty-value",
        "empty-key",
        "shortest-pair",
        "one-pair",
        "trailing-separators",
        "leading-separators",
        "duplicate-last-wins",
        "value-keeps-later-separator",
        "segment-without-separator-skipped",
        "empty",
    ],
)
def test_properties_parse_edge_cases(text, expected):
    assert string_to_properties(text) == expected


def test_properties_serialize_skips_none_values():
    assert properties_to_string([("a", "1"), ("b", None), ("c", "3")]) == "a\x011\x02c\x013\x02"


def test_properties_parse_none_is_empty():
    assert string_to_properties(None) == {}


def test_record_properties_parse_the_stored_string():
    props = "TAGS\x01A\x02KEYS\x01k1 k2\x02TAGS\x01B"
    rec = make_record(topic="t", body=b"b", properties_string=props)
    assert rec.tags == "B"
    assert rec.keys == ["k1", "k2"]


# ----------------------------------------------------------------------------- compression

LONG_BODY = b"RocketMQ compresses bodies over 4096 bytes. " * 120


def test_zlib_level_5_header_is_78_5e():
    out = compression.compress(LONG_BODY, CompressionType.ZLIB)
    assert out[:2] == bytes.fromhex("785e")
    assert out == zlib.compress(LONG_BODY, 5)


def test_lz4_frame_header_is_what_lz4_java_writes():
    out = compression.compress(b"Hello RocketMQ", CompressionType.LZ4)
    assert out[:7] == bytes.fromhex("04224d18607073")


def test_lz4_frame_header_of_a_large_body_says_4mb_blocks():
    out = compression.compress(LONG_BODY * 20, CompressionType.LZ4)
    assert out[:7] == bytes.fromhex("04224d18607073")


def test_lz4_frame_ends_with_the_end_mark():
    assert compression.compress(b"x" * 100, CompressionType.LZ4)[-4:] == bytes(4)


def test_zstd_body_is_a_zstd_frame():
    assert compression.compress(LONG_BODY, CompressionType.ZSTD)[:4] == bytes.fromhex("28b52ffd")


@pytest.mark.parametrize("ctype", list(CompressionType), ids=lambda c: c.name)
def test_compressed_record_decompresses_to_the_original_body(ctype):
    stored = compression.compress(LONG_BODY, ctype)
    rec = make_record(topic="t", body=stored, sys_flag=COMPRESSED_FLAG | ctype.flag)
    r = decode(encode(rec))
    assert isinstance(r, Record)
    assert r.record.body == stored
    assert r.record.decompressed_body() == LONG_BODY


@pytest.mark.parametrize("ctype", list(CompressionType), ids=lambda c: c.name)
def test_body_crc_covers_the_compressed_bytes(ctype):
    stored = compression.compress(LONG_BODY, ctype)
    rec = make_record(topic="t", body=stored, sys_flag=COMPRESSED_FLAG | ctype.flag)
    assert rec.body_crc == zlib.crc32(stored) & 0x7FFFFFFF


def test_type_bits_zero_mean_zlib():
    assert compression.compression_type_of(COMPRESSED_FLAG) is CompressionType.ZLIB
    stored = zlib.compress(LONG_BODY, 5)
    assert compression.decompress(stored, COMPRESSED_FLAG) == LONG_BODY


@pytest.mark.parametrize("type_bits", [4, 5, 6, 7])
def test_type_bits_4_to_7_are_an_error(type_bits):
    with pytest.raises(UnknownCompressionError):
        compression.decompress(zlib.compress(b"x"), COMPRESSED_FLAG | type_bits << 8)


def test_uncompressed_body_is_returned_as_is():
    assert compression.decompress(b"plain", CompressionType.ZLIB.flag) == b"plain"


@pytest.mark.parametrize("ctype", list(CompressionType), ids=lambda c: c.name)
def test_truncated_compressed_body_is_an_error(ctype):
    stored = compression.compress(LONG_BODY, ctype)
    with pytest.raises(ValueError, match=ctype.name):
        compression.decompress(stored[: len(stored) // 2], COMPRESSED_FLAG | ctype.flag)


@pytest.mark.parametrize("ctype", list(CompressionType), ids=lambda c: c.name)
def test_garbage_compressed_body_is_an_error(ctype):
    with pytest.raises(ValueError):
        compression.decompress(b"\x00not a compressed stream", COMPRESSED_FLAG | ctype.flag)
