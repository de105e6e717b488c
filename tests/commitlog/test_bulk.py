"""The bulk scanner agrees with the per-record codec, record for record.

The oracle is ``format.scan`` called record after record (CRC off, then on for the
verdict), with the properties read by ``string_to_properties``'s rules and keys hashed
by ``index.format.key_hash``: on generated segments (IPv6 hosts, V2 topics, compressed
bodies, non-ASCII text, bad CRCs), on damaged ones (flipped bytes, torn tails, zeros,
blank records) and on the real RocketMQ fixtures.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt
from mqstore.index.format import key_hash
from mqstore.message import java_string_hash
from tests.commitlog.test_format_properties import INT32, INT64, other_sysflag, raw_hosts
from tests.conftest import FIXTURES

NAMES = st.sampled_from(
    ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "a", "TAG", "KEYSX", "UNIQ_KEYS", "__STARTDELIVERTIME"]
)
ASCII_VALUE = st.text(st.sampled_from("ab Z9#\x01 \x02-"), max_size=12)
ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@st.composite
def props(draw: st.DrawFn) -> bytes:
    """Property strings that exercise the parser: named pairs, stray separators,
    duplicates, empty values, and sometimes non-ASCII text."""
    parts = draw(st.lists(st.tuples(NAMES, ASCII_VALUE), max_size=6))
    s = "".join(f"{n}\x01{v}\x02" for n, v in parts)
    if draw(st.booleans()):
        s = s[: draw(st.integers(0, len(s)))]
    if draw(st.integers(0, 5)) == 0:
        s += draw(ANY_TEXT)
    return s.encode()


@st.composite
def record(draw: st.DrawFn, phys: int) -> bytes:
    born, store, v6 = raw_hosts(draw)
    version = draw(st.sampled_from([1, 1, 2]))
    # "AaAa" and "BBBB": one length, one String.hashCode (topic ids must not merge them)
    topic = draw(st.sampled_from(["t", "topicA", "%RETRY%g", "x" * 130, "é", "AaAa", "BBBB"]))
    if version == 1:
        topic = topic[:127]
    body = draw(st.binary(max_size=120))
    sys_flag = draw(other_sysflag) | v6
    if draw(st.booleans()):
        body, sys_flag = zlib.compress(body), sys_flag | fmt.COMPRESSED_FLAG
    crc = fmt.body_crc(body) if draw(st.integers(0, 4)) else draw(INT32) & 0x7FFFFFFF
    return fmt.encode_raw(
        queue_id=draw(INT32), flag=draw(INT32), queue_offset=draw(INT64),
        physical_offset=phys, sys_flag=sys_flag, born_timestamp=draw(INT64), born_host=born,
        store_timestamp=draw(INT64), store_host=store, reconsume_times=draw(INT32),
        prepared_transaction_offset=draw(INT64), body=body, crc=crc,
        topic=topic.encode(), properties=draw(props()), version=version,
    )  # fmt: skip


@st.composite
def segments(draw: st.DrawFn) -> bytes:
    """Records, then a blank, zeros or nothing; then maybe damage."""
    out = bytearray()
    for _ in range(draw(st.integers(0, 8))):
        out += draw(record(len(out)))
    tail = draw(st.sampled_from(["blank", "zeros", "none"]))
    if tail == "blank":
        out += fmt.encode_blank(64) + bytes(56)
    elif tail == "zeros":
        out += bytes(draw(st.integers(0, 100)))
    for _ in range(draw(st.integers(0, 2))):
        if out:
            at = draw(st.integers(0, len(out) - 1))
            out[at] ^= draw(st.integers(1, 255))
    if out and draw(st.booleans()):
        del out[draw(st.integers(0, len(out))) :]
    return bytes(out)


def oracle(buf: bytes, start: int, end: int) -> tuple[list[fmt.RecordInfo], list[bool], object]:
    """The codec, record after record: (infos, CRC verdicts, stop result or None)."""
    infos, crcs = [], []
    pos = start
    while pos < end:
        r = fmt.scan(buf, pos, len(buf), check_crc=False)
        if not isinstance(r, fmt.RecordInfo):
            return infos, crcs, r
        infos.append(r)
        crcs.append(isinstance(fmt.scan(buf, pos, len(buf)), fmt.RecordInfo))
        pos += r.size
    return infos, crcs, None


def bulk_all(
    buf: bytes, start: int, end: int, chunk: int
) -> tuple[list[bulk.RecordArrays], object]:
    out = []
    pos = start
    while True:
        b = bulk.scan(buf, pos, end, keys=True, max_records=chunk)
        out.append(b.records)
        if b.stop is not None or b.end >= end:
            return out, b.stop
        assert b.end > pos or len(b.records) == 0
        pos = b.end


def expected_keys(info: fmt.RecordInfo) -> list[int]:
    prefix = info.topic + "#"
    return [key_hash(prefix + k) for k in (info.uniq_key, *info.keys) if k]


def assert_agrees(buf: bytes, start: int = 0, end: int | None = None, chunk: int = 4) -> int:
    end = len(buf) if end is None else end
    infos, crcs, stop = oracle(buf, start, end)
    parts, bstop = bulk_all(buf, start, end, chunk)
    assert bstop == stop
    got = []
    for arr in parts:
        names = arr.topic_names()
        for i in range(len(arr)):
            keys = arr.key_hash[arr.key_record == i].tolist()
            got.append((int(arr.position[i]), int(arr.size[i]), int(arr.version[i]),
                        bool(arr.crc_ok[i]), int(arr.queue_id[i]), int(arr.flag[i]),
                        int(arr.queue_offset[i]), int(arr.physical_offset[i]),
                        int(arr.sys_flag[i]), int(arr.born_timestamp[i]),
                        int(arr.store_timestamp[i]), int(arr.body_pos[i]), int(arr.body_len[i]),
                        names[i], int(arr.tags_code[i]), bool(arr.torn[i]), keys))  # fmt: skip
    want = []
    pos = start
    for info, ok in zip(infos, crcs, strict=True):
        want.append((pos, info.size, info.version, ok, info.queue_id, info.flag,
                     info.queue_offset, info.physical_offset, info.sys_flag,
                     info.born_timestamp, info.store_timestamp, info.body_pos, info.body_len,
                     info.topic, info.tags_code, info.properties_string.endswith("\0"),
                     expected_keys(info)))  # fmt: skip
        pos += info.size
    assert got == want
    return len(want)


@pytest.mark.parametrize(
    "rel",
    [
        "rocketmq-real/apache-4e25b979/commitlog/00000000000000000000",
        "rocketmq-real/shaoxubao-c4dcaab0/unit_test_store/commitlog/00000000000000000000",
        "rocketmq-4.9.8-store/store/commitlog/00000000000000000000",
        "rocketmq-4.9.8-store/store/commitlog/00000000000001048576",
    ],
)
@pytest.mark.parametrize("agrees", ["bulk", "plain"])
def test_scans_agree_on_real_rocketmq_segments(rel, agrees):
    buf = (Path(FIXTURES) / rel).read_bytes()
    assert _agrees(agrees)(buf, chunk=bulk.CHUNK_RECORDS) > 0


def test_real_segment_ends_at_its_blank_record():
    buf = (
        Path(FIXTURES) / "rocketmq-real/apache-4e25b979/commitlog/00000000000000000000"
    ).read_bytes()
    b = bulk.scan(buf, 0, len(buf))
    assert (len(b.records), b.end, b.stop) == (47, 8084, fmt.EndOfSegment(108))
    assert b.records.topics == ("abc",)
    assert b.records.crc_ok.all()
    assert np.array_equal(b.records.queue_offset, np.arange(47))


def assert_plain_agrees(buf: bytes, start: int = 0, end: int | None = None, chunk: int = 4) -> int:
    """``scan_plain`` gives the codec's records (fields, spans, CRC verdict, torn flag)
    and stop, chunk after chunk."""
    end = len(buf) if end is None else end
    infos, crcs, stop = oracle(buf, start, end)
    got, pos = [], start
    while True:
        b = bulk.scan_plain(buf, pos, end, max_records=chunk)
        a = b.records
        for i in range(len(a)):
            t0, t1 = int(a.topic_pos[i]), int(a.topic_pos[i] + a.topic_len[i])
            p0, p1 = int(a.props_pos[i]), int(a.props_pos[i] + a.props_len[i])
            got.append((int(a.position[i]), int(a.size[i]), bool(a.crc_ok[i]),
                        int(a.queue_id[i]), int(a.queue_offset[i]), int(a.physical_offset[i]),
                        int(a.sys_flag[i]), int(a.store_timestamp[i]), buf[t0:t1].decode(),
                        buf[p0:p1].decode(), bool(a.torn[i])))  # fmt: skip
        if b.stop is not None or b.end >= end:
            break
        pos = b.end
    assert b.stop == stop
    want, pos = [], start
    for info, ok in zip(infos, crcs, strict=True):
        want.append((pos, info.size, ok, info.queue_id, info.queue_offset, info.physical_offset,
                     info.sys_flag, info.store_timestamp, info.topic, info.properties_string,
                     info.properties_string.endswith("\0")))  # fmt: skip
        pos += info.size
    assert got == want
    return len(want)


# Each scanner (scan with its text columns, scan_plain without) against the codec.
SCANNERS = pytest.mark.parametrize("agrees", ["bulk", "plain"])


def _agrees(which: str):
    return assert_agrees if which == "bulk" else assert_plain_agrees


@SCANNERS
@settings(max_examples=300)
@given(segments(), st.sampled_from([1, 3, 64]))
def test_scan_agrees_with_the_codec_on_generated_and_damaged_segments(agrees, buf, chunk):
    _agrees(agrees)(buf, chunk=chunk)


@SCANNERS
@given(segments(), st.integers(0, 2000), st.integers(0, 2000))
def test_scan_agrees_from_any_start_and_end(agrees, buf, a, b):
    lo, hi = sorted((min(a, len(buf)), min(b, len(buf))))
    _agrees(agrees)(buf, lo, hi)


@SCANNERS
@settings(max_examples=300)
@given(st.binary(max_size=400), st.integers(0, 50))
def test_garbage_scans_like_the_codec_without_raising(agrees, buf, start):
    _agrees(agrees)(buf, min(start, len(buf)))


@given(st.binary(min_size=1, max_size=40).filter(lambda b: not b.isascii()), st.integers(0, 12))
def test_plain_scan_sends_a_record_with_non_ascii_text_through_the_codec(text, pad):
    props = b"a\x01" + text  # any bytes: valid UTF-8 or not, the codec decides
    rec = fmt.encode_raw(
        queue_id=1, flag=0, queue_offset=0, physical_offset=0, sys_flag=0, born_timestamp=1,
        born_host=bytes(8), store_timestamp=2, store_host=bytes(8), reconsume_times=0,
        prepared_transaction_offset=0, body=b"b", crc=fmt.body_crc(b"b"), topic=b"t",
        properties=props,
    )  # fmt: skip
    assert_plain_agrees(rec + bytes(pad))


@given(st.binary(max_size=80), st.lists(st.tuples(st.integers(0, 80), st.integers(0, 40))))
def test_high_byte_check_finds_every_byte_above_0x7f_in_a_span(buf, spans):
    spans = [(min(s, len(buf)), min(n, len(buf) - min(s, len(buf)))) for s, n in spans]
    starts = np.array([s for s, _ in spans], np.int64)
    lens = np.array([n for _, n in spans], np.int64)
    got = bulk._Words(memoryview(buf), len(buf)).has_high_byte(starts, lens).tolist()
    for (s, n), hit in zip(spans, got, strict=True):
        truth = any(b >= 0x80 for b in buf[s : s + n])
        # Only a short span in the last seven bytes may be flagged without cause.
        assert hit == truth or (hit and 0 < n < 8 and s + 8 > len(buf))


@given(segments())
def test_scan_without_tags_gives_the_same_records_with_zero_tag_codes(buf):
    full = bulk.scan(buf, 0, len(buf))
    bare = bulk.scan(buf, 0, len(buf), tags=False)
    assert (bare.end, bare.stop) == (full.end, full.stop)
    assert np.array_equal(bare.records.position, full.records.position)
    assert np.array_equal(bare.records.topic_id, full.records.topic_id)
    assert np.array_equal(bare.records.crc_ok, full.records.crc_ok)
    assert not bare.records.tags_code.any()


def _plain_record(phys: int, topic: str) -> bytes:
    host = bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big")
    return fmt.encode_raw(
        queue_id=0, flag=0, queue_offset=0, physical_offset=phys, sys_flag=0,
        born_timestamp=1, born_host=host, store_timestamp=1, store_host=host,
        reconsume_times=0, prepared_transaction_offset=0, body=b"x", crc=fmt.body_crc(b"x"),
        topic=topic.encode(), properties=b"", version=1,
    )  # fmt: skip


@pytest.mark.parametrize("topics", [["AaAa", "BBBB"], ["AaAa", "BBBB", "t"]])
def test_topics_with_one_length_and_one_hash_get_their_own_ids(topics):
    buf = bytearray()
    for i in range(6):
        buf += _plain_record(len(buf), topics[i % len(topics)])
    r = bulk.scan(bytes(buf), 0, len(buf)).records
    assert [r.topics[i] for i in r.topic_id.tolist()] == [topics[i % len(topics)] for i in range(6)]


def _topic_id_rule(topics: list[str]) -> tuple[list[int], list[str]]:
    """The ids the scan gives: distinct (length, String.hashCode) keys in sorted order
    (each named by its first topic), then the other topics by first appearance."""
    firsts: dict[tuple[int, int], int] = {}
    for i, t in enumerate(topics):
        firsts.setdefault((len(t), java_string_hash(t) & 0xFFFFFFFF), i)
    names: dict[str, int] = {}
    for key in sorted(firsts):
        names.setdefault(topics[firsts[key]], len(names))
    for t in topics:
        names.setdefault(t, len(names))
    return [names[t] for t in topics], list(names)


SHORT_TOPICS = st.sampled_from(["AaAa", "BBBB", "Aa", "BB", "a", "a\x00", "", "t8bytes!", "q"])


@settings(max_examples=300)
@given(
    st.lists(st.one_of(SHORT_TOPICS, st.text("xyz", min_size=1, max_size=3)), max_size=40),
    st.sampled_from(["", "longer-than-8"]),
)
def test_topic_ids_follow_the_sorted_length_and_hash_keys(topics, long):
    """Short topics (grouped by their bytes) and any (grouped by hash) get the same
    ids: many distinct topics, equal hashes, NUL bytes, one topic over 8 bytes."""
    if long:
        topics = [*topics, long]
    spans = [t.encode() for t in topics]
    flat = np.frombuffer(b"".join(spans), np.uint8)
    lens = np.array([len(s) for s in spans], np.int64)
    offs = np.cumsum(lens) - lens
    ids, names = bulk._topic_ids(flat, offs, lens, np.ones(len(topics), np.bool_), {})
    assert (ids.tolist(), names) == _topic_id_rule(topics)
