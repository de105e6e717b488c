"""Recovery's bulk scan gives what the per-record codec scan gives.

The oracle is the record-after-record scan recovery ran before it validated records
in bulk (:func:`codec_scan` below: ``format.scan`` per record, the torn rule, the
PHYSICALOFFSET rule under KEEP, the same fencing helpers). Both run on the same
segments: generated ones (IPv6 hosts, V2 topics, compressed bodies, non-ASCII text,
bad CRCs), damaged ones (flipped bytes, zeroed gaps, torn tails, blank records cut
short) and the real RocketMQ fixtures; they must agree on the end offset, the count,
the bytes scanned, the stop reason, the fenced ranges, the bytes searched, and the
records handed to the callback (a ``RecordInfo`` callback and a ``dispatch_one`` one).
``recover`` itself is compared too: same result and same files after the cut.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.checkpoint import Checkpoint
from mqstore.commitlog import bulk, recovery
from mqstore.commitlog import format as fmt
from mqstore.commitlog.cursor import TORN_PROPERTIES, refusal
from mqstore.commitlog.recovery import KeepRule, SearchCounter
from mqstore.commitlog.recovery_damage import DamagedRange
from mqstore.commitlog.segments import Segments
from mqstore.config import RecoveryPolicy
from tests.commitlog.test_bulk import record
from tests.conftest import FIXTURES

SIZE = 2048


def codec_scan(
    segments: Segments,
    start_index: int,
    *,
    check_crc: bool,
    on_record: recovery.OnRecord | None = None,
    keep: KeepRule | None = None,
    damaged: list[DamagedRange] | None = None,
    searched: SearchCounter | None = None,
) -> tuple[int, int, int, str]:
    """Recovery's scan, one ``format.scan`` per record (the reference)."""
    files = segments.files
    end = files[start_index].file_from_offset
    records = scanned = 0
    i, pos = start_index, 0
    while i < len(files):
        mf = files[i]
        view, size = mf.view, mf.file_size
        while True:
            r = fmt.scan(view, pos, size, check_crc=check_crc)
            if isinstance(r, fmt.RecordInfo):
                if r.properties_string.endswith("\x00"):
                    bad = f"torn record at {mf.file_from_offset + pos}: {TORN_PROPERTIES}"
                elif keep is not None and r.physical_offset != mf.file_from_offset + pos:
                    bad = (
                        f"record at {mf.file_from_offset + pos} says PHYSICALOFFSET "
                        f"{r.physical_offset}"
                    )
                else:
                    if on_record is not None:
                        on_record(r, r.size)
                    pos += r.size
                    records += 1
                    end = mf.file_from_offset + pos
                    continue
            elif isinstance(r, fmt.EndOfSegment):
                scanned += pos
                if i + 1 < len(files):
                    end = files[i + 1].file_from_offset
                    break
                return mf.file_from_offset + pos, records, scanned, "blank record in last segment"
            else:
                bad = refusal(r, mf.file_from_offset + pos)
            if keep is not None and damaged is not None:
                found = recovery._fence(segments, i, pos, bad, keep, check_crc, searched)
                if found is not None:
                    ranges, j, next_pos = found
                    damaged.extend(ranges)
                    scanned += sum(f.file_size for f in files[i:j])
                    i, pos = j, next_pos
                    mf, view, size = files[i], files[i].view, files[i].file_size
                    continue
            return end, records, scanned + pos, bad
        i += 1
        pos = 0
    return end, records, scanned, "end of last segment"


@st.composite
def segment_files(draw: st.DrawFn) -> list[bytes]:
    """1-3 segments of records (each saying its own PHYSICALOFFSET), each ended by a
    blank record or zeros, then damage: flipped bytes, a zeroed gap, a torn tail (from
    anywhere, or from inside a record's properties: a record torn there passes the
    codec and is caught by the torn rule)."""
    files: list[bytearray] = []
    ends: list[int] = []
    for n in range(draw(st.integers(1, 3))):
        base = n * SIZE
        out = bytearray()
        for _ in range(draw(st.integers(0, 8))):
            rec = draw(record(base + len(out)))
            if len(out) + len(rec) + fmt.END_FILE_MIN_BLANK_LENGTH > SIZE:
                break
            out += rec
            ends.append(base + len(out))
        if draw(st.booleans()):
            out += fmt.encode_blank(SIZE - len(out))[:8]
        out += bytes(SIZE - len(out))
        files.append(out)
    whole = bytearray(b"".join(files))
    used = max(1, len(whole))
    for _ in range(draw(st.integers(0, 3))):
        whole[draw(st.integers(0, used - 1))] ^= draw(st.integers(1, 255))
    if draw(st.booleans()):
        a = draw(st.integers(0, used - 1))
        b = min(used, a + draw(st.sampled_from([1, 4, 100, 600])))
        whole[a:b] = bytes(b - a)
    tear = draw(st.sampled_from(["none", "anywhere", "properties"]))
    if tear == "anywhere":
        cut = draw(st.integers(0, used))
        whole[cut:] = bytes(len(whole) - cut)
    elif tear == "properties" and ends:
        cut = draw(st.sampled_from(ends)) - draw(st.integers(1, 3))
        whole[cut:] = bytes(len(whole) - cut)
    return [bytes(whole[i : i + SIZE]) for i in range(0, len(whole), SIZE)]


@contextmanager
def loaded(files: list[bytes], size: int = SIZE) -> Iterator[Segments]:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for i, data in enumerate(files):
            (root / f"{i * size:020d}").write_bytes(data)
        segs = Segments(root, size)
        segs.load()
        try:
            yield segs
        finally:
            segs.close()


class Infos:
    """A plain record callback: keeps each ``RecordInfo``."""

    def __init__(self) -> None:
        self.got: list[tuple[fmt.RecordInfo, int]] = []

    def __call__(self, info: fmt.RecordInfo, size: int = 0) -> None:
        self.got.append((info, size))


class Fields(Infos):
    """A callback with ``dispatch_one`` (as the Dispatcher): keeps the dispatch fields."""

    def dispatch_one(self, *fields: object) -> None:
        self.got.append(fields)  # type: ignore[arg-type]


class Runs(Infos):
    """A callback with ``dispatch_run``: reads each run with the codec, record after
    record, and checks that the run holds whole records and nothing else."""

    def __call__(self, info: fmt.RecordInfo, size: int = 0) -> None:
        raise AssertionError("a RunSink is given runs, not records")

    def dispatch_run(self, view: memoryview, start: int, end: int) -> None:
        pos = start
        while pos < end:
            r = fmt.scan(view, pos, end, check_crc=False)
            assert isinstance(r, fmt.RecordInfo)
            self.got.append((r, r.size))
            pos += r.size
        assert pos == end


class Plain(Infos):
    """A callback with ``dispatch_plain``: reads each handed record with the codec at
    its position and checks that the bulk scan's fields and spans are the codec's."""

    def __call__(self, info: fmt.RecordInfo, size: int = 0) -> None:
        raise AssertionError("a PlainSink is given bulk-scanned records, not records")

    def dispatch_plain(self, view: memoryview, records: bulk.PlainRecords, k: int) -> None:
        c = records
        for i in range(k):
            r = fmt.scan(view, int(c.position[i]), len(view), check_crc=False)
            assert isinstance(r, fmt.RecordInfo)
            t, tl, pp, pl = (
                int(x[i]) for x in (c.topic_pos, c.topic_len, c.props_pos, c.props_len)
            )
            got = (bytes(view[t : t + tl]).decode(), *(int(x[i]) for x in (
                c.queue_id, c.queue_offset, c.physical_offset, c.size, c.sys_flag,
                c.store_timestamp)), bytes(view[pp : pp + pl]).decode())  # fmt: skip
            assert got == (r.topic, r.queue_id, r.queue_offset, r.physical_offset, r.size,
                           r.sys_flag, r.store_timestamp, r.properties_string)  # fmt: skip
            self.got.append((r, r.size))


def as_fields(info: fmt.RecordInfo) -> tuple[object, ...]:
    return (info.topic, info.queue_id, info.queue_offset, info.physical_offset, info.size,
            info.sys_flag, info.store_timestamp, info.properties_string)  # fmt: skip


def both(
    segs: Segments, start: int, check_crc: bool, keep: KeepRule | None, make: Callable[[], Infos]
) -> tuple[tuple[object, ...], tuple[object, ...], list[object], list[object]]:
    out = []
    for fn in (codec_scan, recovery.scan):
        cb, damaged, searched = make(), [], SearchCounter()
        r = fn(segs, start, check_crc=check_crc, on_record=cb, keep=keep, damaged=damaged,
               searched=searched)  # fmt: skip
        out.append(((*r, tuple(damaged), searched.bytes), cb.got))
    (want, want_cb), (got, got_cb) = out
    return want, got, want_cb, got_cb


KEEPS = st.one_of(st.none(), st.builds(KeepRule, st.integers(-(2**63), 2**63 - 1), st.booleans()))


CHUNKS = st.sampled_from([1, 2, 3, 7, recovery.SCAN_RECORDS])
"""Records per bulk scan: tiny ones put chunk ends anywhere (the segments are small)."""


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(segment_files(), st.booleans(), KEEPS, st.integers(0, 2), CHUNKS)
def test_bulk_scan_agrees_with_the_codec_scan_and_hands_over_the_same_records(
    files, check_crc, keep, start, chunk
):
    with loaded(files) as segs, pytest.MonkeyPatch.context() as mp:
        mp.setattr(recovery, "SCAN_RECORDS", chunk)
        start = min(start, len(segs.files) - 1)
        want, got, want_cb, got_cb = both(segs, start, check_crc, keep, Infos)
        assert got == want
        assert got_cb == want_cb


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(segment_files(), st.booleans(), KEEPS)
def test_a_dispatch_one_callback_gets_each_records_dispatch_fields(files, check_crc, keep):
    with loaded(files) as segs:
        want, got, want_cb, got_cb = both(segs, 0, check_crc, keep, Fields)
        assert got == want
        assert got_cb == [as_fields(info) for info, _ in want_cb]  # type: ignore[misc]


@pytest.mark.parametrize("sink", [Runs, Plain])
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(segment_files(), st.booleans(), KEEPS, CHUNKS)
def test_a_run_or_plain_callback_gets_exactly_the_accepted_records(
    sink, files, check_crc, keep, chunk
):
    with loaded(files) as segs, pytest.MonkeyPatch.context() as mp:
        want, _, want_cb, _ = both(segs, 0, check_crc, keep, Infos)
        mp.setattr(recovery, "SCAN_RECORDS", chunk)
        runs, damaged, searched = sink(), [], SearchCounter()
        got = recovery.scan(segs, 0, check_crc=check_crc, on_record=runs, keep=keep,
                            damaged=damaged, searched=searched)  # fmt: skip
        assert (*got, tuple(damaged), searched.bytes) == want
        assert runs.got == want_cb


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    segment_files(), st.booleans(), st.sampled_from(list(RecoveryPolicy)), st.booleans(),
    st.integers(0, 2**40),
)  # fmt: skip
def test_recover_gives_the_same_result_and_files_as_with_the_codec_scan(
    files, check_crc, policy, clean, flushed
):
    outcomes = []
    for scan in (codec_scan, recovery.scan):
        with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
            root = Path(d)
            (root / "commitlog").mkdir()
            for i, data in enumerate(files):
                (root / "commitlog" / f"{i * SIZE:020d}").write_bytes(data)
            segs = Segments(root / "commitlog", SIZE)
            segs.load()
            cp = Checkpoint(root / "checkpoint")
            cp.physic_msg_timestamp = cp.logics_msg_timestamp = flushed
            mp.setattr(recovery, "scan", scan)
            cb = Infos()
            r = recovery.recover(segs, cp, last_exit_ok=clean, check_crc=check_crc,
                                 on_record=cb, policy=policy)  # fmt: skip
            left = [mf.path.read_bytes() for mf in segs.files]
            segs.close()
            cp.close()
        outcomes.append((_without_seconds(r), cb.got, left))
    assert outcomes[1] == outcomes[0]


def _without_seconds(r: recovery.RecoveryResult) -> tuple[object, ...]:
    return (r.mode, r.start_offset, r.end_offset, r.truncated_bytes, r.records,
            r.scanned_bytes, r.stop_reason, r.damaged, r.searched_bytes)  # fmt: skip


@pytest.mark.parametrize(
    ("rel", "size"),
    [
        ("rocketmq-real/apache-4e25b979/commitlog", 8192),
        ("rocketmq-real/shaoxubao-c4dcaab0/unit_test_store/commitlog", None),
        ("rocketmq-4.9.8-store/store/commitlog", None),
    ],
)
def test_bulk_scan_agrees_on_real_rocketmq_logs(rel, size):
    src = Path(FIXTURES) / rel
    names = sorted(p.name for p in src.iterdir() if p.name.isdigit())
    files = [(src / n).read_bytes() for n in names]
    size = size or len(files[0])
    with loaded(files, size) as segs:
        for keep in (None, KeepRule(0, clean_shutdown=False)):
            for make in (Infos, Fields):
                want, got, want_cb, got_cb = both(segs, 0, True, keep, make)
                assert got == want
                assert want[1] > 0
                if make is Infos:
                    assert got_cb == want_cb
                else:
                    assert got_cb == [as_fields(i) for i, _ in want_cb]  # type: ignore[misc]


def log_of(bodies: list[bytes], properties: bytes) -> bytearray:
    """Records of topic ``t`` in queue 0, one per body, laid end to end from offset 0."""
    recs = bytearray()
    for i, body in enumerate(bodies):
        recs += fmt.encode_raw(
            queue_id=0, flag=0, queue_offset=i, physical_offset=len(recs), sys_flag=0,
            born_timestamp=1, born_host=bytes(8), store_timestamp=2, store_host=bytes(8),
            reconsume_times=0, prepared_transaction_offset=0, body=body,
            crc=fmt.body_crc(body), topic=b"t", properties=properties,
        )  # fmt: skip
    return recs


def test_a_record_torn_inside_its_properties_ends_the_bulk_scan_as_the_torn_rule_says():
    recs = log_of([b"body"] * 3, b"a\x01bcd\x02")
    recs[-2:] = bytes(2)
    with loaded([bytes(recs) + bytes(SIZE - len(recs))]) as segs:
        got = recovery.scan(segs, 0, check_crc=True)
    at = len(recs) // 3 * 2
    assert got == (at, 2, at, f"torn record at {at}: {TORN_PROPERTIES}")


def test_a_bit_flip_in_a_body_stops_the_bulk_scan_with_the_codecs_crc_verdict():
    recs = log_of([b"body%d" % i for i in range(5)], b"a\x01b\x02")
    third = len(recs) // 5 * 2
    recs[third + len(recs) // 5 - 10] ^= 1  # inside record 2's body
    with loaded([bytes(recs) + bytes(SIZE - len(recs))]) as segs:
        end, n, _scanned, why = recovery.scan(segs, 0, check_crc=True)
    assert (end, n) == (third, 2)
    assert why.startswith(f"bad_crc at {third}: body crc")
