"""The dispatch-field reader: ``next_record`` gives each record's fields exactly as
``scan`` (without the CRC check) reads them, damage and the blank record as ``scan``
finds them, each with where to go next.

Its trusted decode (the common record's shortcut) must never return fields for bytes
``scan`` would reject, and nothing raises for bad bytes. ``next_record`` is the step
of the reput thread, the index catch-up and the dispatcher process's parent.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.commitlog.format import (
    Corrupt,
    CorruptKind,
    EndOfSegment,
    RecordInfo,
    encode,
    encode_blank,
    make_record,
    scan,
)
from mqstore.commitlog.walk import (
    DISPATCH_FIELDS,
    DispatchFields,
    Walked,
    next_record,
)
from tests.commitlog.test_format_properties import damaged_records, records


def scanned(buf: bytes, pos: int = 0, end: int | None = None) -> DispatchFields | None:
    info = scan(buf, pos, len(buf) if end is None else end, check_crc=False)
    if not isinstance(info, RecordInfo):
        return None
    by_name = info._asdict() | {"size": info.size, "properties": info.properties_string}
    return tuple(by_name[name] for name in DISPATCH_FIELDS)  # type: ignore[return-value]


def walk(buf: bytes | memoryview, end: int, file_size: int) -> list[tuple[Walked, int]]:
    """Every step of ``next_record`` from 0 to ``end``, as a caller loops."""
    pos, out = 0, []
    while pos < end:
        item, pos = next_record(buf, pos, end, file_size)
        out.append((item, pos))
    return out


def fields_at(buf: bytes | memoryview, end: int) -> object:
    """The fields ``next_record`` gives at 0, or None for a blank record or damage."""
    item, after = next_record(buf, 0, end, 4096)
    if not isinstance(item, tuple):
        return None
    assert after == item[DISPATCH_FIELDS.index("size")]
    return item


def test_common_record_gives_its_fields_and_end():
    raw = encode(make_record(topic="T", body=b"hi", properties_string="TAGS\x01a\x02"))
    got = fields_at(memoryview(raw), len(raw))
    assert got == scanned(raw)
    named = dict(zip(DISPATCH_FIELDS, got, strict=True))  # type: ignore[call-overload]
    assert (named["topic"], named["properties"], named["size"]) == ("T", "TAGS\x01a\x02", len(raw))


def test_ipv6_record_is_read_by_the_scan():
    raw = encode(make_record(topic="T", body=b"x", born_host=("::1", 5)))
    assert walk(raw, len(raw), len(raw)) == [(scanned(raw), len(raw))]


def test_record_past_the_end_is_damage_not_fields():
    raw = encode(make_record(topic="T", body=b"one"))
    assert fields_at(raw, len(raw) - 1) is None
    assert fields_at(raw, 3) is None
    assert fields_at(bytes(16), 16) is None


@given(records())
def test_valid_record_agrees_with_scan(rec):
    raw = encode(rec)
    got = fields_at(raw, len(raw))
    assert got == scanned(raw)


@settings(max_examples=300)
@given(damaged_records())
def test_damaged_record_is_never_a_record_scan_rejects(raw):
    got = fields_at(memoryview(raw + bytes(64)), len(raw))
    assert got is None or got == scanned(raw)


@settings(max_examples=300)
@given(st.binary(max_size=300), st.integers(0, 300))
def test_any_bytes_never_raise_and_agree_with_scan(buf, end):
    end = min(end, len(buf))
    if end == 0:
        return
    got = fields_at(buf, end)
    assert got is None or got == scanned(buf, 0, end)


def test_stepping_yields_records_then_the_blank_with_the_segment_end():
    a = encode(make_record(topic="T", body=b"one", queue_offset=4, physical_offset=0))
    b = encode(make_record(topic="U", body=b"two!", queue_offset=9, physical_offset=len(a)))
    size = 512
    seg = a + b + encode_blank(size - len(a) - len(b))
    seg += bytes(size - len(seg))
    got = walk(memoryview(seg), size, size)
    assert got[:2] == [(scanned(a), len(a)), (scanned(b), len(a) + len(b))]
    assert got[2:] == [(EndOfSegment(size - len(a) - len(b)), size)]


def test_stepping_skips_damage_by_its_size_and_goes_on():
    a = encode(make_record(topic="T", body=b"one"))
    bad = bytearray(encode(make_record(topic="T", body=b"two")))
    bad[4:8] = b"\xde\xad\xbe\xef"  # magic
    c = encode(make_record(topic="T", body=b"three"))
    seg = a + bytes(bad) + c
    got = walk(seg, len(seg), 4096)
    assert [after for _, after in got] == [len(a), len(a) + len(bad), len(seg)]
    damage = got[1][0]
    assert isinstance(damage, Corrupt) and damage.kind is CorruptKind.BAD_MAGIC
    assert got[2][0] == scanned(c)


def test_stepping_skips_to_the_end_of_the_run_when_damage_claims_more():
    a = encode(make_record(topic="T", body=b"one"))
    seg = a + b"\xff" * 40
    got = walk(seg, len(seg), 4096)
    assert [after for _, after in got] == [len(a), len(seg)]
    assert isinstance(got[1][0], Corrupt)
