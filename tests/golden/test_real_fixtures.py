"""Files written by Apache RocketMQ itself decode exactly as the fixture README says.

``tests/fixtures/rocketmq-real/README.md``: two commitlog segments of 8192 bytes from
RocketMQ's ``ConsumeQueueTest``, each 47 V1 records of 172 bytes then an end-of-file
blank record at byte 8084; and a 4096-byte checkpoint file. These tests only read the
originals (nothing here writes), so no copy is needed.
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mqstore.commitlog.format import (
    BLANK_MAGIC,
    EndOfSegment,
    Record,
    body_crc,
    decode,
    encode,
)
from mqstore.message import java_hashmap_order, properties_to_string, tags_code

COMMITLOGS = {
    "apache": Path("apache-4e25b979/commitlog/00000000000000000000"),
    "shaoxubao": Path("shaoxubao-c4dcaab0/unit_test_store/commitlog/00000000000000000000"),
}
SEGMENT_SIZE = 8192
RECORDS = 47
RECORD_SIZE = 172
BLANK_POS = RECORDS * RECORD_SIZE  # 8084
BODY = b"Once, there was a chance for me!"


@pytest.fixture(params=sorted(COMMITLOGS), scope="module")
def segment(request, real_fixtures: Path) -> bytes:
    return (real_fixtures / COMMITLOGS[request.param]).read_bytes()


@pytest.fixture(scope="module")
def decoded(segment: bytes) -> list[Record]:
    out = []
    pos = 0
    while True:
        r = decode(segment, pos)
        if not isinstance(r, Record):
            break
        out.append(r)
        pos += r.size
    return out


def test_segment_is_8192_bytes(segment):
    assert len(segment) == SEGMENT_SIZE


def test_segment_holds_47_records_of_172_bytes(decoded):
    assert len(decoded) == RECORDS
    assert {r.size for r in decoded} == {RECORD_SIZE}


def test_records_are_v1_with_ipv4_hosts(decoded):
    assert {r.record.version for r in decoded} == {1}
    assert {r.record.sys_flag for r in decoded} == {0}


def test_records_are_topic_abc_queue_0(decoded):
    assert {(r.record.topic, r.record.queue_id) for r in decoded} == {("abc", 0)}


def test_queue_offsets_count_from_0_to_46(decoded):
    assert [r.record.queue_offset for r in decoded] == list(range(RECORDS))


def test_physical_offsets_are_n_times_172(decoded):
    assert [r.record.physical_offset for r in decoded] == [n * RECORD_SIZE for n in range(RECORDS)]


def test_bodies_are_the_unit_test_sentence(decoded):
    assert {r.record.body for r in decoded} == {BODY}


def test_every_body_crc_is_valid(decoded, segment):
    for n, r in enumerate(decoded):
        stored = struct.unpack_from(">i", segment, n * RECORD_SIZE + 8)[0]
        assert stored == r.record.body_crc == body_crc(BODY)


def test_properties_are_the_unit_test_ones(decoded):
    for r in decoded:
        props = r.record.properties
        assert props.keys() == {"0", "KEYS", "TAGS"}
        assert props["0"] == "imagoodperson0"
        assert props["TAGS"] == "TAG1"
        assert r.record.tags_code == tags_code("TAG1") == 2567159


def test_keys_are_the_born_millis(decoded):
    for r in decoded:
        assert r.record.properties["KEYS"] == str(r.record.born_timestamp)


def test_properties_end_with_a_trailing_separator(decoded):
    assert all(r.record.properties_string.endswith("\x02") for r in decoded)


def test_property_order_is_the_client_hashmap_16_order(decoded):
    """The store unit test serialized a client ``Message``'s default ``HashMap()`` (16
    buckets), not the broker's HashMap(128): the file proves our order model for n=16."""
    for r in decoded:
        props = r.record.properties
        items = [("KEYS", props["KEYS"]), ("TAGS", props["TAGS"]), ("0", props["0"])]
        assert r.record.properties_string == properties_to_string(java_hashmap_order(items, 16))


def test_store_timestamps_are_plausible_and_ordered(decoded):
    stamps = [r.record.store_timestamp for r in decoded]
    assert stamps == sorted(stamps)
    assert all(datetime(2019, 1, 1, tzinfo=UTC).timestamp() * 1000 < s for s in stamps)
    assert all(s < datetime(2022, 1, 1, tzinfo=UTC).timestamp() * 1000 for s in stamps)


def test_every_record_reencodes_to_the_same_bytes(decoded, segment):
    for n, r in enumerate(decoded):
        assert encode(r.record) == segment[n * RECORD_SIZE : (n + 1) * RECORD_SIZE]


def test_end_of_segment_at_8084_with_size_108(segment):
    assert decode(segment, BLANK_POS) == EndOfSegment(SEGMENT_SIZE - BLANK_POS)
    assert SEGMENT_SIZE - BLANK_POS == 108
    assert struct.unpack_from(">ii", segment, BLANK_POS) == (108, BLANK_MAGIC)


def test_zeros_follow_the_blank_record(segment):
    assert segment[BLANK_POS + 8 :] == bytes(SEGMENT_SIZE - BLANK_POS - 8)


def test_checkpoint_is_4096_bytes_of_three_timestamps(real_fixtures: Path):
    raw = (real_fixtures / "shaoxubao-c4dcaab0" / "checkpoint").read_bytes()
    assert len(raw) == 4096
    physic, logics, index = struct.unpack_from(">qqq", raw, 0)
    lo = datetime(2019, 1, 1, tzinfo=UTC).timestamp() * 1000
    hi = datetime(2020, 1, 1, tzinfo=UTC).timestamp() * 1000
    assert lo < physic < hi
    assert lo < logics < hi
    # The unit test built no index, so its timestamp was never set.
    assert index == 0
    assert raw[24:] == bytes(4096 - 24)
