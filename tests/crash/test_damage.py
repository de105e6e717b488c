"""Damage in the middle of the CommitLog: what recovery keeps, fences and reports.

Stores are written, closed (or crashed), then damaged on disk the way media and
people damage files: bytes overwritten, bits flipped, a segment truncated or
removed. After the reopen, every record outside the damaged bytes must still be
served at its queue offset with its body, nothing from inside them may be served,
and ``store.damage`` must list exactly the ranges that hold the damaged bytes.

Generated damage hits the bytes the record format can check: the body (BODYCRC), the
TOTALSIZE/MAGICCODE header and the PHYSICALOFFSET field. A change to a field no check
covers (born host, timestamps, a property value) cannot be told from data by any
reader of this format, RocketMQ's included.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore import BrokerRole, Message, MessageStore, PutStatus
from mqstore.commitlog.recovery_damage import read_ranges
from mqstore.config import RecoveryPolicy
from tests.helpers import check_consistency, make_store, pull_all, reopen

pytestmark = pytest.mark.crash

FILE_SIZE = 64 * 1024
TOPIC = "orders"
QUEUES = 3
NO_MASTER = "127.0.0.1:1"
"""A slave's master address where nothing listens: it only retries in the background."""


@dataclass(frozen=True)
class Put:
    queue_id: int
    queue_offset: int
    phys: int
    size: int
    body: bytes


def _write(tmp_path: Path, n: int, seed: int, **cfg: object) -> tuple[MessageStore, list[Put]]:
    rng = random.Random(seed)
    s = make_store(tmp_path, commitlog_file_size=FILE_SIZE, message_index_enable=False, **cfg)
    puts: list[Put] = []
    for i in range(n):
        q = rng.randrange(QUEUES)
        body = f"m{i:05d}-".encode() + rng.randbytes(rng.randrange(50, 700))
        r = s.put_message(Message(topic=TOPIC, body=body, queue_id=q))
        assert r.status is PutStatus.PUT_OK
        puts.append(Put(q, r.queue_offset, r.physical_offset, r.size, body))
    return s, puts


def _served(store: MessageStore) -> dict[tuple[int, int], bytes]:
    """Every message the store serves, by (queue id, queue offset)."""
    served = (m for q in range(QUEUES) for m in pull_all(store, TOPIC, q, batch=256))
    return {(m.queue_id, m.queue_offset): m.body for m in served}


def _overwrite(root: Path, offset: int, data: bytes) -> None:
    seg = root / "commitlog" / f"{offset - offset % FILE_SIZE:020d}"
    with open(seg, "r+b") as f:
        f.seek(offset % FILE_SIZE)
        f.write(data)


def _damaged(tmp_path: Path, seed: int, victim: int) -> tuple[MessageStore, Put]:
    """A closed store of 600 records whose record ``victim`` has 64 random bytes at +40."""
    s, puts = _write(tmp_path, 600, seed=seed)
    s.close()
    hit = puts[victim]
    _overwrite(s.root, hit.phys + 40, random.Random(seed + 1).randbytes(64))
    return s, hit


def _assert_cut_at(store: MessageStore, end: int, **changes: object) -> None:
    """Reopened (with ``changes``), the log ends at ``end`` with nothing fenced and the
    store consistent."""
    s = reopen(store.cfg, **changes)
    try:
        assert s.damage == ()
        assert s.max_physical_offset == end
        assert check_consistency(s.root, FILE_SIZE, end=end) == []
    finally:
        s.close()


def _check(store: MessageStore, puts: list[Put], bad: list[tuple[int, int]]) -> None:
    """Records clear of every ``bad`` byte range are served intact; none inside is."""
    served = _served(store)
    hit = [p for p in puts if any(p.phys < b < p.phys + p.size or p.phys <= a < p.phys + p.size
                                  or a <= p.phys < b for a, b in bad)]  # fmt: skip
    hit_keys = {(p.queue_id, p.queue_offset) for p in hit}
    for p in puts:
        key = (p.queue_id, p.queue_offset)
        if key in hit_keys:
            assert served.get(key) in (None,), f"damaged record {key} at {p.phys} served"
        else:
            assert served.get(key) == p.body, f"intact record {key} at {p.phys} not served"
    assert set(served) <= {(p.queue_id, p.queue_offset) for p in puts}
    # The fenced ranges are exactly the damaged records' extents (merged when adjacent).
    spans: list[list[int]] = []
    for p in sorted(hit, key=lambda p: p.phys):
        if spans and spans[-1][1] == p.phys:
            spans[-1][1] = p.phys + p.size
        else:
            spans.append([p.phys, p.phys + p.size])
    assert [(d.start, d.end) for d in store.damage] == [tuple(s) for s in spans]
    assert sum(d.messages_lost for d in store.damage) <= len(hit)
    assert read_ranges(store.root) == store.damage  # the list ``mqstore audit`` reports


def test_random_bytes_in_a_middle_segment_lose_only_the_records_they_hit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    s, puts = _write(tmp_path, 600, seed=1)
    s.close()
    victim = puts[300]
    bad = (victim.phys + 40, victim.phys + 104)
    _overwrite(s.root, bad[0], random.Random(2).randbytes(64))
    with caplog.at_level(logging.WARNING, logger="mqstore.commitlog.recovery"):
        s = reopen(s.cfg)
    try:
        _check(s, puts, [bad])
        assert len(s.damage) == 1 and s.damage[0].messages_lost == 1
        lines = [r.getMessage() for r in caplog.records if "damage" in r.getMessage()]
        assert len(lines) == 1 and str(victim.phys) in lines[0]
        assert s.max_physical_offset == puts[-1].phys + puts[-1].size
        assert check_consistency(s.root, FILE_SIZE, end=s.max_physical_offset,
                                 damaged=[(d.start, d.end) for d in s.damage]) == []  # fmt: skip
    finally:
        s.close()


def _last_of_scanned_segment(puts: list[Put]) -> Put:
    """The last record of the first segment a clean open scans (the third-to-last)."""
    segment = puts[-1].phys // FILE_SIZE - 2
    return max((p for p in puts if p.phys // FILE_SIZE == segment), key=lambda p: p.phys)


def test_damage_running_into_a_blank_tail_ends_its_range_at_the_blank(tmp_path: Path):
    s, puts = _write(tmp_path, 600, seed=11)
    s.close()
    victim = _last_of_scanned_segment(puts)  # the next valid record is in the next one
    bad = (victim.phys + 40, victim.phys + 104)
    _overwrite(s.root, bad[0], random.Random(12).randbytes(64))
    s = reopen(s.cfg)
    try:
        blank = victim.phys + victim.size
        assert blank % FILE_SIZE != 0  # the segment ends with a blank record
        assert [(d.start, d.end) for d in s.damage] == [(victim.phys, blank)]
        _check(s, puts, [bad])
    finally:
        s.close()


def test_damage_across_a_blank_tail_into_the_next_segment_is_two_ranges(tmp_path: Path):
    s, puts = _write(tmp_path, 600, seed=13)
    s.close()
    victim = _last_of_scanned_segment(puts)
    next_segment = victim.phys - victim.phys % FILE_SIZE + FILE_SIZE
    first_next = min((p for p in puts if p.phys >= next_segment), key=lambda p: p.phys)
    assert first_next.phys == next_segment
    bad = [(victim.phys + 40, victim.phys + 104), (first_next.phys + 40, first_next.phys + 104)]
    for a, b in bad:
        _overwrite(s.root, a, random.Random(a).randbytes(b - a))
    s = reopen(s.cfg)
    try:
        after = first_next.phys + first_next.size
        assert [(d.start, d.end) for d in s.damage] == [
            (victim.phys, victim.phys + victim.size),
            (first_next.phys, after),
        ]
        assert sum(d.messages_lost for d in s.damage) == 2
        served = _served(s)
        for p in puts:
            expected = None if p in (victim, first_next) else p.body
            assert served.get((p.queue_id, p.queue_offset)) == expected
    finally:
        s.close()


def test_truncate_policy_cuts_at_the_damage_as_rocketmq_does(tmp_path: Path):
    s, victim = _damaged(tmp_path, seed=3, victim=300)
    s = reopen(s.cfg, recovery_policy=RecoveryPolicy.TRUNCATE)
    try:
        assert s.max_physical_offset == victim.phys
        assert s.damage == ()
        served = _served(s)
        assert len(served) == 300
        assert check_consistency(s.root, FILE_SIZE, end=s.max_physical_offset) == []
    finally:
        s.close()


def test_a_slave_cuts_at_the_damage_whatever_the_policy_so_its_master_resends(tmp_path: Path):
    s, victim = _damaged(tmp_path, seed=8, victim=300)
    _assert_cut_at(s, victim.phys, broker_role=BrokerRole.SLAVE, ha_master_address=NO_MASTER,
                   recovery_policy=RecoveryPolicy.KEEP)  # fmt: skip


def test_a_slave_cuts_at_a_range_an_earlier_keep_open_fenced(tmp_path: Path):
    s, victim = _damaged(tmp_path, seed=10, victim=550)
    s = reopen(s.cfg)
    assert len(s.damage) == 1
    for i in range(600):  # the range ends up older than the segments a clean open scans
        assert s.put_message(Message(topic=TOPIC, body=b"%05d" % i * 80)).status is PutStatus.PUT_OK
    assert s.max_physical_offset // FILE_SIZE - victim.phys // FILE_SIZE > 3
    s.close()
    _assert_cut_at(s, victim.phys, broker_role=BrokerRole.SLAVE, ha_master_address=NO_MASTER)
    assert read_ranges(s.root) == ()


def test_a_flipped_bit_in_a_body_fences_that_record_after_a_crash(tmp_path: Path):
    s, puts = _write(tmp_path, 400, seed=5, flush_disk_type=_sync())
    s.abandon()
    victim = puts[250]
    seg = s.root / "commitlog" / f"{victim.phys - victim.phys % FILE_SIZE:020d}"
    data = bytearray(seg.read_bytes())
    data[victim.phys % FILE_SIZE + victim.size - 200] ^= 0x10
    seg.write_bytes(bytes(data))
    s = reopen(s.cfg)
    try:
        b = victim.phys + victim.size - 200
        _check(s, puts, [(b, b + 1)])
    finally:
        s.close()


def test_a_zero_run_after_a_crash_beyond_the_flushed_point_still_ends_the_log(tmp_path: Path):
    """Zeros past what the checkpoint says was synced look like lost pages: cut there."""
    s, puts = _write(tmp_path, 300, seed=6, flush_interval_commitlog_ms=60_000,
                     flush_commitlog_thorough_interval_ms=60_000)  # fmt: skip
    s.abandon()
    victim = puts[200]
    _overwrite(s.root, victim.phys, bytes(4096))
    _assert_cut_at(s, victim.phys)


def test_a_missing_middle_segment_is_fenced_and_the_rest_served(tmp_path: Path):
    s, puts = _write(tmp_path, 600, seed=7)
    s.close()
    segs = sorted((s.root / "commitlog").iterdir())
    assert len(segs) >= 4
    victim = segs[1]
    victim.unlink()
    start = int(victim.name)
    s = reopen(s.cfg)
    try:
        lost = [p for p in puts if start <= p.phys < start + FILE_SIZE]
        first_after = min(p.phys for p in puts if p.phys >= start + FILE_SIZE)
        assert [(d.start, d.end) for d in s.damage] == [(start, first_after)]
        assert s.damage[0].messages_lost == len(lost)  # counted from the consume queues
        served = _served(s)
        for p in puts:
            key = (p.queue_id, p.queue_offset)
            assert served.get(key) == (None if p in lost else p.body)
    finally:
        s.close()


def test_a_truncated_middle_segment_is_fenced_and_the_rest_served(tmp_path: Path):
    s, puts = _write(tmp_path, 600, seed=8)
    s.close()
    victim = sorted((s.root / "commitlog").iterdir())[1]
    start = int(victim.name)
    with open(victim, "r+b") as f:
        f.truncate(FILE_SIZE // 3)
    s = reopen(s.cfg)
    try:
        cut = start + FILE_SIZE // 3
        lost = [p for p in puts if p.phys + p.size > cut and p.phys < start + FILE_SIZE]
        served = _served(s)
        for p in puts:
            key = (p.queue_id, p.queue_offset)
            assert served.get(key) == (None if p in lost else p.body)
        assert len(s.damage) == 1
    finally:
        s.close()


def test_a_record_whose_head_a_killed_copy_never_wrote_ends_the_log(tmp_path: Path):
    """A copy of several records killed midway can leave the first record's first bytes
    unwritten (memcpy stores its head last) and the later records whole: a torn tail."""
    s, puts = _write(tmp_path, 300, seed=7, flush_interval_commitlog_ms=60_000,
                     flush_commitlog_thorough_interval_ms=60_000)  # fmt: skip
    s.abandon()
    # Inside its sector the zeros are shorter than the sector's part: not a lost sector.
    victim = next(p for p in puts[200:] if p.phys % 512 < 400)
    _overwrite(s.root, victim.phys, bytes(36))
    _assert_cut_at(s, victim.phys)


def _tail(p: Put) -> int:
    """Bytes after the body of ``p``'s record (topic and properties with their lengths)."""
    return 1 + len(TOPIC) + 2 + _PROPS_LEN


_PROPS_LEN = len(f"UNIQ_KEY\x01{'0' * 32}\x02")


def _xor(root: Path, at: int, n: int, rng: random.Random, flip: bool) -> None:
    """Change ``n`` bytes at log offset ``at`` (one bit each with ``flip``)."""
    seg = root / "commitlog" / f"{at - at % FILE_SIZE:020d}"
    data = bytearray(seg.read_bytes())
    for i in range(at % FILE_SIZE, at % FILE_SIZE + n):
        data[i] ^= (1 << rng.randrange(8)) if flip else rng.randrange(1, 256)
    seg.write_bytes(bytes(data))


def _sync() -> object:
    from mqstore import FlushDiskType

    return FlushDiskType.SYNC_FLUSH


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1), spots=st.integers(1, 4), flip=st.booleans())
def test_random_damage_in_generated_stores_loses_only_what_it_hits(
    tmp_path_factory: pytest.TempPathFactory, seed: int, spots: int, flip: bool
):
    tmp_path = tmp_path_factory.mktemp("damage")
    s, puts = _write(tmp_path, 500, seed=seed)
    s.close()
    rng = random.Random(seed)
    end = puts[-1].phys + puts[-1].size
    bad: list[tuple[int, int]] = []
    # A clean shutdown's recovery reads the last three segments (RocketMQ's window):
    # damage older than that is not looked for, so the test damages that window.
    window = (end // FILE_SIZE - 2) * FILE_SIZE
    candidates = [p for p in puts[:-1] if p.phys >= window]  # the last record stays intact
    for _ in range(spots):
        victim = rng.choice(candidates)
        body_at = victim.size - len(victim.body) - _tail(victim)
        field = rng.choice(("body", "header", "phys"))
        if field == "body":
            at = victim.phys + body_at + rng.randrange(len(victim.body))
            n = 1 if flip else min(rng.randrange(1, 200), victim.phys + body_at
                                   + len(victim.body) - at)  # fmt: skip
        elif field == "header":
            at, n = victim.phys + rng.randrange(8), 1
        else:
            at, n = victim.phys + 28 + rng.randrange(8), 1
        _xor(s.root, at, n, rng, flip)
        bad.append((at, at + n))
    assert all(b <= end for _, b in bad)
    s = reopen(s.cfg)
    try:
        _check(s, puts, bad)
    finally:
        s.close()
    s = reopen(s.cfg)  # a later open: the same records served, the same list reported
    try:
        _check(s, puts, bad)
    finally:
        s.close()


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1), remove=st.booleans(), data=st.data())
def test_a_segment_truncated_or_removed_in_generated_stores_loses_only_its_lost_bytes(
    tmp_path_factory: pytest.TempPathFactory, seed: int, remove: bool, data: st.DataObject
):
    tmp_path = tmp_path_factory.mktemp("segment")
    s, puts = _write(tmp_path, 500, seed=seed)
    s.close()
    segs = sorted((s.root / "commitlog").iterdir())
    victim = segs[data.draw(st.integers(1, len(segs) - 2), label="segment")]
    start = int(victim.name)
    cut = 0 if remove else data.draw(st.integers(0, FILE_SIZE - 1), label="length")
    if remove:
        victim.unlink()
    else:
        with open(victim, "r+b") as f:
            f.truncate(cut)
    inside = [p for p in puts if start <= p.phys < start + FILE_SIZE]
    blank = max(p.phys + p.size for p in inside)  # the segment's blank record starts here
    lost = [p for p in inside if p.phys + p.size > start + cut]
    if lost:
        expected = [(lost[0].phys, start + FILE_SIZE)]
    elif start + cut < blank + 8:  # the blank's header is cut: a range with no record
        expected = [(blank, start + FILE_SIZE)]
    else:
        expected = []
    s = reopen(s.cfg)
    try:
        served = _served(s)
        for p in puts:
            key = (p.queue_id, p.queue_offset)
            assert served.get(key) == (None if p in lost else p.body), f"record at {p.phys}"
        assert [(d.start, d.end) for d in s.damage] == expected
        assert read_ranges(s.root) == s.damage
        assert sum(d.messages_lost for d in s.damage) <= len(lost)
    finally:
        s.close()


def test_a_commitlog_of_random_bytes_is_fenced_not_zeroed(tmp_path: Path):
    """Nothing valid, nothing that looks like a torn tail: the bytes stay for an
    operator, the store opens and writes in a new segment."""
    size = 1 << 20
    s = make_store(tmp_path, commitlog_file_size=size, message_index_enable=False)
    s.close()
    seg = s.root / "commitlog" / f"{0:020d}"
    junk = random.Random(9).randbytes(size)
    seg.write_bytes(junk)
    s = reopen(s.cfg)
    try:
        assert [(d.start, d.end) for d in s.damage] == [(0, size)]
        r = s.put_message(Message(topic=TOPIC, body=b"after the junk"))
        assert r.status is PutStatus.PUT_OK and r.physical_offset == size
        assert s.wait_dispatched(60)
        assert s.get_message("g", TOPIC, 0, 0, 8).messages[0].body == b"after the junk"
    finally:
        s.close()
    assert seg.read_bytes() == junk
