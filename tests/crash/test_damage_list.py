"""The damage list outlives the open that found it, and no lookup serves fenced bytes.

Recovery scans a window (the last three segments after a clean close). A range it
fenced must still be reported (``store.damage``, ``damage.json`` that ``mqstore audit``
reads) after the window has moved past it, and a key lookup must not serve the record
its index entry points at inside a fenced range.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from mqstore import Message, MessageStore, PutStatus
from mqstore.commitlog.recovery_damage import DAMAGE_FILE, DamagedRange, Quarantine, read_ranges
from tests.helpers import make_store, reopen

pytestmark = pytest.mark.crash

FILE_SIZE = 64 * 1024
TOPIC = "orders"


def _put(s: MessageStore, n: int, start: int = 0) -> list[tuple[int, int, int, bytes, str]]:
    """(queue offset, phys, size, body, key) of ``n`` messages to queue 0."""
    out = []
    for i in range(start, start + n):
        key = f"k{i:05d}"
        body = f"m{i:05d}-".encode() + bytes([i % 251]) * 300
        r = s.put_message(Message(topic=TOPIC, body=body, keys=key))
        assert r.status is PutStatus.PUT_OK
        out.append((r.queue_offset, r.physical_offset, r.size, body, key))
    return out


def _flip_body_byte(root: Path, phys: int, size: int) -> None:
    at = phys + size - 150  # inside the body (properties and topic are shorter)
    seg = root / "commitlog" / f"{at - at % FILE_SIZE:020d}"
    data = bytearray(seg.read_bytes())
    data[at % FILE_SIZE] ^= 0x40
    seg.write_bytes(bytes(data))


def _served(s: MessageStore) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    offset = 0
    while True:
        r = s.get_message("g", TOPIC, 0, offset, 256)
        if not r.messages:
            return out
        out.update((m.queue_offset, m.body) for m in r.messages)
        offset = r.next_begin_offset


def test_a_fenced_range_is_still_reported_once_the_scan_window_moved_past_it(tmp_path: Path):
    s = make_store(tmp_path, commitlog_file_size=FILE_SIZE, message_index_enable=False)
    puts = _put(s, 300)
    s.close()
    victim = puts[-40]
    _flip_body_byte(s.root, victim[1], victim[2])
    s = reopen(s.cfg)
    found = s.damage
    assert [(d.start, d.end) for d in found] == [(victim[1], victim[1] + victim[2])]
    puts += _put(s, 1000, start=300)  # several segments: the next clean open scans past
    s.close()
    s = reopen(s.cfg)
    try:
        assert s.recovery is not None and s.recovery.start_offset > victim[1]
        assert s.recovery.damaged == ()  # not seen by this open's scan ...
        assert s.damage == found  # ... still reported
        assert read_ranges(s.root) == found
        served = _served(s)
        for qo, _phys, _size, body, _key in puts:
            assert served.get(qo) == (None if qo == victim[0] else body)
    finally:
        s.close()


def test_a_range_found_again_is_listed_once(tmp_path: Path):
    s = make_store(tmp_path, commitlog_file_size=FILE_SIZE, message_index_enable=False)
    puts = _put(s, 200)
    s.close()
    victim = puts[150]
    _flip_body_byte(s.root, victim[1], victim[2])
    s = reopen(s.cfg)
    first = s.damage
    s.close()
    s = reopen(s.cfg)
    try:
        assert s.recovery is not None and len(s.recovery.damaged) == 1  # found again
        assert s.damage == first and len(first) == 1
        doc = json.loads((s.root / DAMAGE_FILE).read_text())
        assert [(r["start"], r["end"]) for r in doc["ranges"]] == [(first[0].start, first[0].end)]
    finally:
        s.close()


def test_a_key_lookup_does_not_serve_a_record_inside_a_fenced_range(tmp_path: Path):
    s = make_store(tmp_path, commitlog_file_size=FILE_SIZE)
    puts = _put(s, 200)
    assert s.wait_dispatched(60)
    s.close()
    victim, neighbour = puts[120], puts[121]
    _flip_body_byte(s.root, victim[1], victim[2])
    s = reopen(s.cfg)
    try:
        assert [(d.start, d.end) for d in s.damage] == [(victim[1], victim[1] + victim[2])]
        assert s.query_by_key(TOPIC, victim[4]).messages == ()
        hits = s.query_by_key(TOPIC, neighbour[4]).messages
        assert [m.body for m in hits] == [neighbour[3]]
    finally:
        s.close()


def test_ranges_whose_segments_are_gone_or_past_the_end_are_dropped(tmp_path: Path):
    q = Quarantine(tmp_path / DAMAGE_FILE, (DamagedRange(100, 200, "bad_crc", 1),))
    assert q.covers(100) and q.covers(199) and not q.covers(200) and not q.covers(99)
    assert q.update((DamagedRange(150, 300, "again", 2),), min_offset=0, end=1000)
    assert q.ranges == (DamagedRange(100, 300, "bad_crc", 2),)
    assert not q.update((), min_offset=0, end=1000)
    assert q.update((DamagedRange(5000, 6000, "later", 0),), min_offset=300, end=5500)
    assert q.ranges == (DamagedRange(5000, 5500, "later", 0),)
    q.save()
    assert read_ranges(tmp_path) == q.ranges
    assert q.update((), min_offset=6000, end=7000)
    q.save()
    assert not (tmp_path / DAMAGE_FILE).exists()


def test_a_malformed_damage_list_is_taken_as_empty(tmp_path: Path):
    (tmp_path / DAMAGE_FILE).write_text(random.Random(1).randbytes(50).hex())
    assert Quarantine.load(tmp_path / DAMAGE_FILE).ranges == ()
