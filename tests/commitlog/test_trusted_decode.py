"""``unpack_trusted``, the decoded pull's fast path, agrees with ``scan`` or declines.

Its contract: for any bytes it returns None or exactly the fields ``scan`` (without
the CRC check, as a pull reads) would give; it never raises and never returns a
message ``scan`` would reject.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.commitlog.format import (
    MESSAGE_FIELDS,
    RecordInfo,
    encode,
    make_record,
    scan,
    unpack_trusted,
)
from mqstore.consumequeue.results import StoredMessage
from tests.commitlog.test_format_properties import damaged_records, records


def scanned_fields(raw: bytes, queue_offset: int) -> tuple[object, ...] | None:
    info = scan(raw, check_crc=False)
    if not isinstance(info, RecordInfo):
        return None
    by_name = info._asdict()
    by_name["queue_offset"] = queue_offset
    by_name["size"] = info.size
    by_name["body"] = raw[info.body_pos : info.body_pos + info.body_len]
    return tuple(by_name[name] for name in MESSAGE_FIELDS)


def test_fields_are_in_stored_message_order():
    assert StoredMessage._fields == MESSAGE_FIELDS


def test_common_record_takes_the_fast_path():
    rec = make_record(topic="T", body=b"hello", properties_string="TAGS\x01a\x02", queue_offset=3)
    raw = encode(rec)
    assert unpack_trusted(raw, 7) == scanned_fields(raw, 7)
    assert unpack_trusted(raw, 7) is not None


def test_ipv6_record_is_declined():
    rec = make_record(topic="T", body=b"x", born_host=("::1", 5))
    assert unpack_trusted(encode(rec), 0) is None


@given(records(), st.integers(0, 2**40))
def test_valid_record_agrees_with_scan_or_declines(rec, qoff):
    raw = encode(rec)
    fields = unpack_trusted(raw, qoff)
    assert fields is None or fields == scanned_fields(raw, qoff)


@settings(max_examples=300)
@given(damaged_records())
def test_damaged_record_is_never_a_message_scan_rejects(raw):
    fields = unpack_trusted(raw, 0)
    assert fields is None or fields == scanned_fields(raw, 0)


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_any_bytes_never_raise(buf):
    fields = unpack_trusted(buf, 0)
    assert fields is None or fields == scanned_fields(buf, 0)
