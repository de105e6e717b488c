"""An open after a clean close trusts the close's record, and damage is still seen.

A clean close writes ``clean_close`` (``mqstore.commitlog.clean_close``); the next open
takes it and, when it matches the files, skips the CommitLog scan (mode TRUSTED). A
store closed cleanly and then damaged is either refused that trust at open (and
recovered by the scan, which fences the damage) or caught by the documented verify,
which poisons the store so that the next open recovers as after a crash: never served
as if clean without either.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mqstore import Message, MessageStore, PutStatus
from mqstore.commitlog.clean_close import RECORD_FILE
from mqstore.commitlog.recovery import RecoveryMode
from tests.helpers import make_store, reopen, until

pytestmark = pytest.mark.crash

FILE_SIZE = 4 << 20
"""Segments larger than the record's CRC window (1 MiB), so a byte far enough from the
end is covered by the files' stamps and by verify only."""
TOPIC = "orders"
BODY = 1000


def _fill(tmp_path: Path, n: int, **cfg: object) -> tuple[MessageStore, list[tuple[int, int]]]:
    """A store holding ``n`` messages in queue 0, closed cleanly; (phys, size) of each."""
    s = make_store(tmp_path, commitlog_file_size=FILE_SIZE, **cfg)
    puts = []
    for i in range(n):
        r = s.put_message(Message(topic=TOPIC, body=bytes([i % 251]) * BODY, keys=f"k{i}"))
        assert r.status is PutStatus.PUT_OK
        puts.append((r.physical_offset, r.size))
    s.close()
    return s, puts


def _segment_of(root: Path, at: int) -> Path:
    return root / "commitlog" / f"{at - at % FILE_SIZE:020d}"


def _flip(root: Path, at: int, *, keep_mtime: bool = False) -> None:
    """Flip one bit of the log byte at ``at`` (optionally restoring the file's times)."""
    seg = _segment_of(root, at)
    st = seg.stat()
    with open(seg, "r+b") as f:
        f.seek(at % FILE_SIZE)
        b = f.read(1)[0]
        f.seek(at % FILE_SIZE)
        f.write(bytes([b ^ 0x10]))
    if keep_mtime:
        os.utime(seg, ns=(st.st_atime_ns, st.st_mtime_ns))


def _body_byte(put: tuple[int, int]) -> int:
    phys, size = put
    return phys + size - BODY // 2 - 60  # inside the body (topic + properties < 60 B)


def _wait_verified(s: MessageStore) -> None:
    until(lambda: s.verification is not None, what="the background verify")


def test_a_clean_close_is_opened_without_a_scan_and_serves_every_message(tmp_path: Path):
    s, puts = _fill(tmp_path, 50)
    s = reopen(s)
    try:
        assert s.recovery.mode is RecoveryMode.TRUSTED
        assert s.recovery.end_offset == puts[-1][0] + puts[-1][1]
        assert not (s.root / RECORD_FILE).exists()  # taken: a crash now is not clean
        bodies = []
        while len(bodies) < 50:
            got = s.get_message("g", TOPIC, 0, len(bodies), 32)
            assert got.messages
            bodies += [m.body[:1] for m in got.messages]
        assert bodies == [bytes([i % 251]) for i in range(50)]
        r = s.put_message(Message(topic=TOPIC, body=b"after"))
        assert (r.queue_offset, r.physical_offset) == (50, s.recovery.end_offset)
        _wait_verified(s)
        assert s.verification is not None and s.verification.ok
        assert s.verification.records == 50
    finally:
        s.close()


def test_a_crash_after_a_trusted_open_recovers_abnormally(tmp_path: Path):
    s, _ = _fill(tmp_path, 5)
    s = reopen(s)
    assert s.recovery.mode is RecoveryMode.TRUSTED
    s.put_message(Message(topic=TOPIC, body=b"x"))
    s.abandon()
    s = reopen(s.cfg)
    try:
        assert s.recovery.mode is RecoveryMode.ABNORMAL
        assert s.next_queue_offset(TOPIC, 0) == 6
    finally:
        s.close()


def test_a_flipped_byte_in_the_last_segment_is_found_at_open(tmp_path: Path):
    s, puts = _fill(tmp_path, 50)
    _flip(s.root, _body_byte(puts[40]))
    s = reopen(s)
    try:
        assert s.recovery.mode is RecoveryMode.NORMAL
        assert [d.start for d in s.recovery.damaged] == [puts[40][0]]
    finally:
        s.close()


def test_a_flipped_byte_near_the_end_is_found_by_the_tail_crc_though_the_time_is_kept(
    tmp_path: Path,
):
    s, puts = _fill(tmp_path, 50)
    _flip(s.root, _body_byte(puts[-2]), keep_mtime=True)
    s = reopen(s)
    try:
        assert s.recovery.mode is RecoveryMode.NORMAL
        assert [d.start for d in s.recovery.damaged] == [puts[-2][0]]
    finally:
        s.close()


def test_a_flipped_byte_the_open_cannot_see_is_found_by_verify_and_poisons_the_store(
    tmp_path: Path,
):
    s, puts = _fill(tmp_path, 2000)  # ~2 MiB: the first records are outside the tail CRC
    _flip(s.root, _body_byte(puts[10]), keep_mtime=True)
    s = reopen(s, verify_clean_open=False)
    try:
        assert s.recovery.mode is RecoveryMode.TRUSTED
        found = s.verify()
        assert not found.ok and found.end_offset == puts[10][0]
        assert s.poisoned is not None
        assert s.put_message(Message(topic=TOPIC, body=b"x")).status is not PutStatus.PUT_OK
    finally:
        s.close()
    s = reopen(s)  # poisoned: ``abort`` kept, so this open recovers as after a crash
    try:
        assert s.recovery.mode is RecoveryMode.ABNORMAL
        assert [d.start for d in s.damage] == [puts[10][0]]
    finally:
        s.close()


def test_the_background_verify_after_a_trusted_open_finds_what_the_open_did_not(
    tmp_path: Path,
):
    s, puts = _fill(tmp_path, 2000)
    _flip(s.root, _body_byte(puts[10]), keep_mtime=True)
    s = reopen(s)
    try:
        assert s.recovery.mode is RecoveryMode.TRUSTED
        _wait_verified(s)
        assert s.verification is not None and not s.verification.ok
        assert s.poisoned is not None
    finally:
        s.close()
    assert (s.root / "abort").exists() and not (s.root / RECORD_FILE).exists()


def test_a_truncated_segment_is_not_trusted(tmp_path: Path):
    s, puts = _fill(tmp_path, 50)
    seg = _segment_of(s.root, 0)
    os.truncate(seg, puts[30][0])  # the records from the 31st on are gone
    s = reopen(s)
    try:
        assert s.recovery.mode is not RecoveryMode.TRUSTED
        assert s.next_queue_offset(TOPIC, 0) == 30
    finally:
        s.close()


def test_a_deleted_checkpoint_is_not_trusted(tmp_path: Path):
    s, _ = _fill(tmp_path, 50)
    (s.root / "checkpoint").unlink()
    s = reopen(s)
    try:
        assert s.recovery.mode is RecoveryMode.NORMAL
        assert s.recovery.records == 50
    finally:
        s.close()


def test_a_segment_added_after_the_close_is_not_trusted(tmp_path: Path):
    s, _ = _fill(tmp_path, 50)
    extra = s.root / "commitlog" / f"{FILE_SIZE:020d}"
    extra.write_bytes(bytes(FILE_SIZE))
    s = reopen(s)
    try:
        assert s.recovery.mode is RecoveryMode.NORMAL
        assert not extra.exists()  # nothing in it: the scan cut the log where it ended
    finally:
        s.close()


def test_without_trust_a_clean_close_is_scanned_as_rocketmq_does(tmp_path: Path):
    s, _ = _fill(tmp_path, 50)
    s = reopen(s, trust_clean_close=False)
    try:
        assert s.recovery.mode is RecoveryMode.NORMAL
        assert s.recovery.records == 50
    finally:
        s.close()


def test_verify_steps_over_a_fenced_range(tmp_path: Path):
    s, puts = _fill(tmp_path, 50)
    _flip(s.root, _body_byte(puts[20]))
    s = reopen(s)  # the scan fences the damaged record
    try:
        assert len(s.damage) == 1
        found = s.verify(whole=True)
        assert found.ok and found.records == 49
        assert s.poisoned is None
    finally:
        s.close()
