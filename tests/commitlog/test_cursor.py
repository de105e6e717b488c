"""LogCursor against a simple reference walk.

The reference steps record by record with the exact codec and, past bad bytes, tries
every later position until one holds a valid record naming its own position: the
slowest walk that states the rules plainly. Generated logs have several segments with
blanks, wrong PHYSICALOFFSET fields, bad CRCs, flipped bytes, zeroed stretches and torn
tails; the cursor (bulk backend, lazy magic-search resync) must give the same items.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.commitlog import format as fmt
from mqstore.commitlog.cursor import (
    TORN_PROPERTIES,
    Blank,
    BufferSegment,
    Damage,
    LogCursor,
    Record,
    Run,
)
from mqstore.message import host_bytes
from tests.commitlog.test_bulk import record

SEGMENT = 1024
HOST = host_bytes(("127.0.0.1", 10911))


@dataclass
class Log:
    """Segments of ``SEGMENT`` bytes as one bytearray (log offset = index)."""

    data: bytearray

    def segments(self) -> list[BufferSegment]:
        view = memoryview(self.data)
        return [
            BufferSegment(view[b : b + SEGMENT], b, SEGMENT)
            for b in range(0, len(self.data), SEGMENT)
        ]


def plain_record(phys: int, body: bytes = b"x" * 100, props: bytes = b"UNIQ_KEY\x01u\x02") -> bytes:
    return fmt.encode_raw(
        queue_id=0, flag=0, queue_offset=0, physical_offset=phys, sys_flag=0,
        born_timestamp=1, born_host=HOST, store_timestamp=1, store_host=HOST,
        reconsume_times=0, prepared_transaction_offset=0, body=body,
        crc=fmt.body_crc(body), topic=b"t", properties=props, version=1,
    )  # fmt: skip


@st.composite
def logs(draw: st.DrawFn) -> Log:
    """1 to 3 segments of records (some naming a wrong position), each ended by a blank
    or by zeros; then flipped bytes, zeroed stretches and maybe a torn tail."""
    data = bytearray()
    for _ in range(draw(st.integers(1, 3))):
        seg = bytearray()
        base = len(data)
        for _ in range(draw(st.integers(0, 6))):
            phys = (
                base + len(seg) + (draw(st.integers(1, 9)) if draw(st.integers(0, 9)) == 0 else 0)
            )
            rec = draw(record(phys))
            if len(seg) + len(rec) + fmt.END_FILE_MIN_BLANK_LENGTH > SEGMENT:
                break
            seg += rec
        if draw(st.booleans()):
            seg += fmt.encode_blank(SEGMENT - len(seg))
        data += seg + bytes(SEGMENT - len(seg))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(data) - 1))
        if draw(st.booleans()):
            data[at] ^= draw(st.integers(1, 255))
        else:
            n = draw(st.integers(1, 64))
            data[at : at + n] = bytes(len(data[at : at + n]))
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(data)))
        data[cut:] = bytes(len(data) - cut)
    return Log(data)


def _valid(r: fmt.ScanResult, own_position: bool, offset: int) -> bool:
    return (
        isinstance(r, fmt.RecordInfo)
        and not r.properties_string.endswith("\x00")
        and (not own_position or r.physical_offset == offset)
    )


def reference(
    log: Log, start: int, end: int, *, check_crc: bool, own_position: bool
) -> list[tuple[str, int]]:
    """(kind, log offset) of each item, the rules stated plainly."""
    out: list[tuple[str, int]] = []
    buf = log.data
    offset = start
    while offset < end:
        base = offset - offset % SEGMENT
        limit = min(base + SEGMENT, end)
        r = fmt.scan(buf, offset, limit, check_crc=check_crc)
        if _valid(r, own_position, offset):
            assert isinstance(r, fmt.RecordInfo)
            out.append(("record", offset))
            offset += r.size
            continue
        if isinstance(r, fmt.EndOfSegment):
            out.append(("blank", offset))
            offset = base + SEGMENT
            continue
        out.append(("damage", offset))
        offset = _brute_resync(buf, offset + 1, end, check_crc)
    return out


def _brute_resync(buf: bytearray, start: int, end: int, check_crc: bool) -> int:
    for p in range(start, end):
        limit = min(p - p % SEGMENT + SEGMENT, end)
        if _valid(fmt.scan(buf, p, limit, check_crc=check_crc), True, p):
            return p
    return end


def kinds(items: list[Record | Blank | Damage]) -> list[tuple[str, int]]:
    names = {Record: "record", Blank: "blank", Damage: "damage"}
    return [(names[type(i)], i.offset) for i in items]


@settings(max_examples=150, deadline=None)
@given(log=logs(), check_crc=st.booleans(), own_position=st.booleans(), data=st.data())
def test_the_cursor_gives_what_the_reference_walk_gives(
    log: Log, check_crc: bool, own_position: bool, data: st.DataObject
) -> None:
    size = len(log.data)
    start = data.draw(st.sampled_from(range(0, size, SEGMENT)))
    end = data.draw(st.integers(start, size))
    cursor = LogCursor(
        log.segments(), start, end, check_crc=check_crc, own_position=own_position, chunk=3
    )
    items = list(cursor)
    assert kinds(items) == reference(
        log, start, end, check_crc=check_crc, own_position=own_position
    )
    for item in items:
        if isinstance(item, Record):
            at = item.offset % SEGMENT  # info's positions are in its segment's view
            assert item.info == fmt.scan(item.view, at, SEGMENT, check_crc=False)


@settings(max_examples=50, deadline=None)
@given(log=logs())
def test_runs_hold_the_records_the_cursor_gives(log: Log) -> None:
    records = [i.offset for i in LogCursor(log.segments(), 0) if isinstance(i, Record)]
    in_runs = [
        r.base + p
        for r in LogCursor(log.segments(), 0, chunk=2).runs()
        if isinstance(r, Run)
        for p in r.records.position[: r.count].tolist()
    ]
    assert in_runs == records


def _worked_example() -> Log:
    data = bytearray()
    for _ in range(47):
        data += plain_record(len(data), body=b"x" * 69)
    assert len(data) == 8084
    data += fmt.encode_blank(8192 - len(data))
    data += bytes(8192 - len(data))
    bad = bytearray(plain_record(8192, body=b"x" * 69))
    bad[-30] ^= 1  # a body byte: the CRC no longer matches
    data += bad + plain_record(8192 + len(bad), body=b"x" * 69)
    data += bytes(16384 - len(data))
    return Log(data)


def _big_segments(log: Log) -> list[BufferSegment]:
    view = memoryview(log.data)
    return [BufferSegment(view[:8192], 0, 8192), BufferSegment(view[8192:], 8192, 8192)]


def test_the_worked_example_of_the_module_doc() -> None:
    log = _worked_example()
    items = list(LogCursor(_big_segments(log), 0, 8536, check_crc=True))
    assert [i.offset for i in items[:47]] == [172 * k for k in range(47)]
    assert items[47] == Blank(8084, 108)
    assert isinstance(items[48], Damage) and items[48].offset == 8192
    assert items[48].why.startswith("bad_crc at 8192")
    assert [type(i) for i in items[49:]] == [Record] and items[49].offset == 8364


def test_without_the_crc_check_a_bad_body_is_a_record() -> None:
    items = list(LogCursor(_big_segments(_worked_example()), 0, 8536, check_crc=False))
    assert [type(i) for i in items].count(Record) == 49
    assert not any(isinstance(i, Damage) for i in items)


def test_a_reader_that_stops_at_damage_searches_nothing() -> None:
    cursor = LogCursor(_big_segments(_worked_example()), 0, check_crc=True)
    for item in cursor:
        if isinstance(item, Damage):
            break
    assert cursor.searched == 0


def test_the_zeros_after_the_last_record_end_the_walk() -> None:
    items = list(LogCursor(_big_segments(_worked_example()), 0))
    assert isinstance(items[-1], Damage) and items[-1].offset == 8536
    assert items[-1].why.startswith("zeroed at 8536")


def test_a_torn_tail_ends_the_walk_after_its_damage() -> None:
    data = bytearray(plain_record(0) + plain_record(len(plain_record(0))))
    tear = len(data) - 20
    data[tear:] = bytes(20)
    data += bytes(SEGMENT - len(data))
    items = list(LogCursor(Log(data).segments(), 0))
    assert [type(i) for i in items] == [Record, Damage]
    assert items[1].offset == len(plain_record(0))


def test_a_record_whose_properties_end_in_zeros_is_torn() -> None:
    rec = plain_record(0, props=b"UNIQ_KEY\x01u\x00\x00")
    data = bytearray(rec + bytes(SEGMENT - len(rec)))
    items = list(LogCursor(Log(data).segments(), 0))
    assert items == [Damage(0, f"torn record at 0: {TORN_PROPERTIES}")]


def test_damage_is_skipped_up_to_the_record_naming_its_own_position() -> None:
    first = plain_record(0)
    data = bytearray(first + b"\xff" * 50)
    data += plain_record(len(data) + 1)  # names the wrong position: not a resync point
    resume = len(data)
    data += plain_record(resume)
    end = len(data)
    data += bytes(SEGMENT - len(data))
    items = list(LogCursor(Log(data).segments(), 0, end))
    assert kinds(items) == [("record", 0), ("damage", len(first)), ("record", resume)]
