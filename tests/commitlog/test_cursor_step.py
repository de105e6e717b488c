"""The cursor's per-record step (``cursor.step``): the reput thread's, the index
catch-up's and the dispatcher process's walk over a segment up to the committed end.

A valid record gives its fields exactly as ``scan`` (without the CRC check) reads them;
the blank record and damage are the cursor's items, and past damage the step goes on
where the cursor's resync says (else at the committed end). Over one segment, stepping
gives the items iterating a ``LogCursor`` gives: one rule, two shapes. The step's
shortcut for the common record must never return fields for bytes the cursor rejects,
and nothing raises for bad bytes.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.commitlog.cursor import (
    TORN_PROPERTIES,
    Blank,
    BufferSegment,
    Damage,
    LogCursor,
    Record,
    step,
)
from mqstore.commitlog.format import (
    RecordInfo,
    encode,
    encode_blank,
    make_record,
    scan,
)
from mqstore.commitlog.walk import DISPATCH_FIELDS, DispatchFields
from tests.commitlog.test_cursor import SEGMENT, Log, logs, plain_record
from tests.commitlog.test_format_properties import damaged_records, records

Stepped = DispatchFields | Blank | Damage


def scanned(buf: bytes, pos: int = 0, end: int | None = None) -> DispatchFields | None:
    info = scan(buf, pos, len(buf) if end is None else end, check_crc=False)
    if not isinstance(info, RecordInfo) or info.properties_string.endswith("\x00"):
        return None
    by_name = info._asdict() | {"size": info.size, "properties": info.properties_string}
    return tuple(by_name[name] for name in DISPATCH_FIELDS)  # type: ignore[return-value]


def segment(buf: bytes | bytearray | memoryview, base: int = 0) -> BufferSegment:
    view = memoryview(buf)
    return BufferSegment(view, base, len(view))


def walk(seg: BufferSegment, end: int) -> list[tuple[Stepped, int]]:
    """Every step from 0 to ``end``, as the reput thread loops."""
    pos, out = 0, []
    while pos < end:
        item, pos = step(seg.view, pos, end, seg)
        out.append((item, pos))
    return out


def fields_at(buf: bytes, end: int) -> object:
    """The fields the step gives at 0, or None for a blank record or damage."""
    padded = bytes(buf) + bytes(max(0, 64 - len(buf)))
    item, after = step(memoryview(padded), 0, end, segment(padded))
    if not isinstance(item, tuple):
        return None
    assert after == item[DISPATCH_FIELDS.index("size")]
    return item


def test_common_record_gives_its_fields_and_end():
    raw = encode(make_record(topic="T", body=b"hi", properties_string="TAGS\x01a\x02"))
    got = fields_at(raw, len(raw))
    assert got == scanned(raw)
    named = dict(zip(DISPATCH_FIELDS, got, strict=True))  # type: ignore[call-overload]
    assert (named["topic"], named["properties"], named["size"]) == ("T", "TAGS\x01a\x02", len(raw))


def test_ipv6_record_is_read_by_the_codec():
    raw = encode(make_record(topic="T", body=b"x", born_host=("::1", 5)))
    assert walk(segment(raw), len(raw)) == [(scanned(raw), len(raw))]


def test_record_past_the_committed_end_is_not_fields():
    raw = encode(make_record(topic="T", body=b"one"))
    assert fields_at(raw, len(raw) - 1) is None
    assert fields_at(raw, 3) is None
    assert fields_at(bytes(16), 16) is None


def test_a_record_whose_properties_end_in_zeros_is_torn_damage():
    raw = plain_record(0, props=b"UNIQ_KEY\x01u\x00\x00")
    item, after = step(memoryview(raw), 0, len(raw), segment(raw))
    assert item == Damage(0, f"torn record at 0: {TORN_PROPERTIES}")
    assert after == len(raw)


@given(records())
def test_valid_record_agrees_with_scan(rec):
    raw = encode(rec)
    assert fields_at(raw, len(raw)) == scanned(raw)


@settings(max_examples=300)
@given(damaged_records())
def test_damaged_record_is_never_a_record_the_cursor_rejects(raw):
    got = fields_at(raw + bytes(64), len(raw))
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
    got = walk(segment(seg, 4096), size)
    assert got[:2] == [(scanned(a), len(a)), (scanned(b), len(a) + len(b))]
    assert got[2:] == [(Blank(4096 + len(a) + len(b), size - len(a) - len(b)), size)]


def test_damage_in_the_middle_resumes_at_the_record_naming_its_own_position():
    first = plain_record(0)
    data = bytearray(first + b"\xff" * 50)
    data += plain_record(len(data) + 1)  # names the wrong position: not a resync point
    resume = len(data)
    data += plain_record(resume)
    got = walk(segment(data), len(data))
    assert [after for _, after in got] == [len(first), resume, len(data)]
    damage = got[1][0]
    assert isinstance(damage, Damage) and damage.offset == len(first)
    assert damage.why.startswith("bad_magic at") or damage.why.startswith("bad_size at")
    assert got[2][0] == scanned(bytes(data), resume)


def test_damage_with_no_record_after_it_runs_to_the_committed_end():
    a = plain_record(0)
    data = a + b"\xff" * 40 + plain_record(len(a) + 40)
    end = len(a) + 40  # the record after the bytes is not committed yet: never read
    got = walk(segment(data), end)
    assert [after for _, after in got] == [len(a), end]
    assert isinstance(got[1][0], Damage)


def test_a_walk_resumed_after_more_was_committed_reads_on_where_it_stopped():
    a, b = plain_record(0), plain_record(len(plain_record(0)))
    data = bytearray(a + b + bytes(SEGMENT - len(a) - len(b)))
    seg = segment(data)
    first = walk(seg, len(a))
    pos = first[-1][1]
    item, after = step(seg.view, pos, len(a) + len(b), seg)
    assert pos == len(a) and item == scanned(bytes(data), len(a)) and after == len(a) + len(b)


def _kind(item: Stepped, base: int, pos: int) -> tuple[str, int]:
    if isinstance(item, tuple):
        return ("record", base + pos)
    return ("blank" if isinstance(item, Blank) else "damage", item.offset)


@settings(max_examples=60, deadline=None)
@given(log=logs(), data=st.data())
def test_stepping_a_segment_gives_what_iterating_the_cursor_gives(
    log: Log, data: st.DataObject
) -> None:
    segments = log.segments()
    seg = segments[data.draw(st.integers(0, len(segments) - 1))]
    base = seg.file_from_offset
    end = data.draw(st.integers(1, SEGMENT))
    stepped, pos = [], 0
    while pos < end:
        item, after = step(seg.view, pos, end, seg)
        stepped.append(_kind(item, base, pos))
        if isinstance(item, tuple):
            assert item == scanned(bytes(seg.view), pos, end)
        pos = after
    items = list(LogCursor([seg], base, base + end))
    assert stepped == [
        ("record" if isinstance(i, Record) else "blank" if isinstance(i, Blank) else "damage",
         i.offset)
        for i in items
    ]  # fmt: skip
