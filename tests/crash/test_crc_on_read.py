"""``check_crc_on_read``: damage no recovery looked at is not served when reads check.

Recovery after a clean close scans the last three segments only (RocketMQ's window), so
a bit flipped in an older record's body is found by no one: reads skip BODYCRC (as
RocketMQ's do) and serve it. With ``check_crc_on_read`` pulls and key lookups check it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore import Message, MessageStore, PutStatus
from tests.helpers import make_store, reopen

pytestmark = pytest.mark.crash

FILE_SIZE = 64 * 1024
TOPIC = "orders"


def _damaged_store(tmp_path: Path) -> tuple[MessageStore, list[bytes], int]:
    """A closed store of 600 messages whose message 10 (first segment) has a flipped
    body bit; returns (store, bodies, the victim's queue offset)."""
    s = make_store(tmp_path, commitlog_file_size=FILE_SIZE)
    bodies = []
    victim = None
    for i in range(600):
        body = f"m{i:04d}-".encode() + bytes([i % 200 + 1]) * 400
        r = s.put_message(Message(topic=TOPIC, body=body, keys=f"k{i}"))
        assert r.status is PutStatus.PUT_OK
        bodies.append(body)
        if i == 10:
            victim = r
    assert victim is not None and s.wait_dispatched(60)
    assert s.max_physical_offset > 4 * FILE_SIZE  # the victim is outside the window
    s.close()
    at = victim.physical_offset + victim.size - 200
    with open(s.root / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x08]))
    return s, bodies, victim.queue_offset


def _pull_all(s: MessageStore) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    offset = 0
    while offset < s.max_offset_in_queue(TOPIC, 0):
        r = s.get_message("g", TOPIC, 0, offset, 64)
        out.update((m.queue_offset, m.body) for m in r.messages)
        offset = r.next_begin_offset
    return out


def test_without_the_check_a_damaged_body_outside_the_window_is_served(tmp_path: Path):
    s, bodies, victim = _damaged_store(tmp_path)
    s = reopen(s.cfg)
    try:
        assert s.damage == ()
        assert _pull_all(s)[victim] != bodies[victim]  # RocketMQ's behaviour, documented
    finally:
        s.close()


def test_with_the_check_pulls_and_key_lookups_skip_the_damaged_record(tmp_path: Path):
    s, bodies, victim = _damaged_store(tmp_path)
    s = reopen(s.cfg, check_crc_on_read=True)
    try:
        pulled = _pull_all(s)
        assert victim not in pulled
        assert pulled == {i: b for i, b in enumerate(bodies) if i != victim}
        assert s.query_by_key(TOPIC, f"k{victim}").messages == ()
        assert [m.body for m in s.query_by_key(TOPIC, "k11").messages] == [bodies[11]]
        raw = s.get_message_raw("g", TOPIC, 0, victim, 4)
        assert victim not in raw.queue_offsets and len(raw.buffers) == 4
    finally:
        s.close()
