"""Property tests for the record codec: round trips both ways, and garbage never raises.

Example counts come from the hypothesis profile set in ``tests/conftest.py`` (dev 50,
ci 200); the garbage tests get a few times more because each example is cheap.
"""

from __future__ import annotations

import socket
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.commitlog.commitlog import RecordPacker, make_frame
from mqstore.commitlog.format import (
    BORNHOST_V6_FLAG,
    MAX_TOPIC_LENGTH_V1,
    STOREHOST_V6_FLAG,
    Corrupt,
    EndOfSegment,
    Record,
    decode,
    encode,
    encode_blank,
    encode_raw,
    host_to_bytes,
    make_record,
    topic_field,
)
from mqstore.message import properties_to_string, string_to_properties
from tests.sabotage import flip_byte, shrink
from tests.strategies import INT32, INT64

PORT = st.integers(0, 65535)

# Addresses in the text form the decoder gives back (inet_ntop): records compare hosts
# as strings, and "::1:0" and "::0.1.0.0" are the same 16 bytes.
ipv4 = st.binary(min_size=4, max_size=4).map(lambda b: socket.inet_ntop(socket.AF_INET, b))
ipv6 = st.binary(min_size=16, max_size=16).map(lambda b: socket.inet_ntop(socket.AF_INET6, b))
hosts = st.tuples(st.one_of(ipv4, ipv6), PORT)

# Text that survives UTF-8 (no lone surrogates).
text_chars = st.characters(blacklist_categories=("Cs",))
LEGAL_TOPIC_ALPHABET = string.ascii_letters + string.digits + "%|_-"
topics = st.one_of(
    st.text(LEGAL_TOPIC_ALPHABET, min_size=1, max_size=300),  # > 127 bytes: V2
    st.text(text_chars, max_size=60),  # the codec itself takes any text
)
# Names and values free of the separators \x01 and \x02.
prop_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"))
prop_pairs = st.lists(st.tuples(prop_text, prop_text), max_size=8)

# Sysflag bits other than the IPv6 ones, which make_record derives from the hosts.
other_sysflag = INT32.map(lambda f: f & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG))


@st.composite
def records(draw):
    pairs = draw(prop_pairs)
    return make_record(
        topic=draw(topics),
        body=draw(st.binary(max_size=300)),
        properties_string=properties_to_string(pairs),
        queue_id=draw(INT32),
        flag=draw(INT32),
        queue_offset=draw(INT64),
        physical_offset=draw(INT64),
        sys_flag=draw(other_sysflag),
        born_timestamp=draw(INT64),
        born_host=draw(hosts),
        store_timestamp=draw(INT64),
        store_host=draw(hosts),
        reconsume_times=draw(INT32),
        prepared_transaction_offset=draw(INT64),
    )


@given(records())
def test_decode_inverts_encode(rec):
    raw = encode(rec)
    r = decode(raw)
    assert r == Record(rec, len(raw))


@given(records())
def test_the_commitlog_packs_a_record_as_the_reference_encoder(rec):
    head, magic = topic_field(rec.topic.encode(), rec.version)
    props = rec.properties_string.encode()
    born = host_to_bytes(rec.born_host)
    want = encode(rec)
    frame = make_frame(
        key=None, queue_id=rec.queue_id, flag=rec.flag,
        sys_flag=rec.sys_flag & ~STOREHOST_V6_FLAG,  # the log adds its store-host bit
        born_timestamp=rec.born_timestamp, born_host=born,
        reconsume_times=rec.reconsume_times,
        prepared_transaction_offset=rec.prepared_transaction_offset, body=rec.body,
        crc=rec.body_crc, tail=head + len(props).to_bytes(2, "big") + props, magic=magic,
        total=len(want), uniq="",
    )  # fmt: skip
    buf = bytearray(len(want))
    packer = RecordPacker(host_to_bytes(rec.store_host))
    physs = packer.pack(buf, 0, rec.physical_offset, rec.store_timestamp, [frame],
                        [rec.queue_offset])  # fmt: skip
    assert physs == [rec.physical_offset]
    assert buf == want


@given(records())
def test_version_follows_the_topic_byte_length(rec):
    assert rec.version == (1 if len(rec.topic.encode()) <= MAX_TOPIC_LENGTH_V1 else 2)


@given(prop_pairs)
def test_properties_parse_inverts_serialize_for_nonempty_pairs(pairs):
    kept = [(k, v) for k, v in pairs if k and v]
    assert string_to_properties(properties_to_string(kept)) == dict(kept)


@given(records(), st.binary(max_size=40), st.binary(max_size=40))
def test_decode_at_an_offset_ignores_the_surroundings(rec, before, after):
    raw = encode(rec)
    r = decode(before + raw + after, len(before))
    assert r == Record(rec, len(raw))


def raw_hosts(draw):
    born = draw(st.sampled_from([8, 20]))
    store = draw(st.sampled_from([8, 20]))
    flags = (BORNHOST_V6_FLAG if born == 20 else 0) | (STOREHOST_V6_FLAG if store == 20 else 0)
    return (
        draw(st.binary(min_size=born, max_size=born)),
        draw(st.binary(min_size=store, max_size=store)),
        flags,
    )


@st.composite
def damaged_records(draw):
    """The bytes of a :func:`records` record with one to four bytes flipped."""
    raw = encode(draw(records()))
    flips = st.tuples(st.integers(0, 10**6), st.integers(1, 255))
    for where, mask in draw(st.lists(flips, min_size=1, max_size=4)):
        raw = flip_byte(raw, where % len(raw), mask)
    return raw


@st.composite
def valid_record_bytes(draw):
    """Any bytes the decoder must accept: arbitrary field values, any CRC (checked off),
    any UTF-8 properties text (separators, duplicates and empty names included)."""
    born, store, v6 = raw_hosts(draw)
    version = draw(st.sampled_from([1, 2]))
    topic_max = 127 if version == 1 else 400
    return encode_raw(
        queue_id=draw(INT32),
        flag=draw(INT32),
        queue_offset=draw(INT64),
        physical_offset=draw(INT64),
        sys_flag=draw(other_sysflag) | v6,
        born_timestamp=draw(INT64),
        born_host=born,
        store_timestamp=draw(INT64),
        store_host=store,
        reconsume_times=draw(INT32),
        prepared_transaction_offset=draw(INT64),
        body=draw(st.binary(max_size=200)),
        crc=draw(INT32),
        topic=draw(st.text(text_chars, max_size=40)).encode()[:topic_max],
        properties=draw(st.text(text_chars, max_size=80)).encode(),
        version=version,
    )


@given(valid_record_bytes())
def test_encode_inverts_decode_for_valid_bytes(raw):
    r = decode(raw, check_crc=False)
    assert isinstance(r, Record)
    assert r.size == len(raw)
    assert encode(r.record) == raw


# ------------------------------------------------------------------------------- garbage


def assert_well_formed(r, buf: bytes, pos: int = 0):
    """A decode result is one of the three kinds; whatever decodes as a record is
    exactly the bytes it was read from (nothing is silently normalised)."""
    assert isinstance(r, Record | EndOfSegment | Corrupt)
    if isinstance(r, Record | EndOfSegment):
        assert 0 < r.size <= len(buf) - pos
    if isinstance(r, Record):
        assert encode(r.record) == buf[pos : pos + r.size]


@settings(max_examples=500)
@given(st.binary(max_size=400), st.booleans())
def test_any_bytes_decode_without_raising(buf, check_crc):
    assert_well_formed(decode(buf, check_crc=check_crc), buf)


@settings(max_examples=300)
@given(st.binary(max_size=200), st.integers(0, 250))
def test_any_bytes_at_any_position_decode_without_raising(buf, pos):
    r = decode(buf, pos)
    assert isinstance(r, Record | EndOfSegment | Corrupt)
    if pos <= len(buf):
        assert_well_formed(r, buf, pos)


@settings(max_examples=300)
@given(damaged_records())
def test_valid_record_with_flipped_bytes_decodes_without_raising(raw):
    assert_well_formed(decode(raw), raw)
    assert_well_formed(decode(raw, check_crc=False), raw)


@settings(max_examples=300)
@given(records(), st.integers(1, 10**6))
def test_truncated_valid_record_is_never_a_record(rec, cut):
    raw = encode(rec)
    torn = shrink(raw, cut % len(raw) or 1)
    r = decode(torn)
    assert isinstance(r, Corrupt)


@given(st.integers(8, 10**6), st.binary(max_size=16))
def test_blank_record_is_end_of_segment_when_it_fits(size, tail):
    buf = encode_blank(size) + bytes(max(0, size - 8)) + tail
    assert decode(buf) == EndOfSegment(size)
