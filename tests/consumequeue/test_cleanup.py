"""Cleanup: expired CommitLog files, then the queue and index files that point only into them."""

from __future__ import annotations

import os
import time
from pathlib import Path

from mqstore import GetStatus, Message, MessageStore, StoreConfig
from mqstore.cleanup import HOUR_MS, CleanupService, is_delete_hour
from tests.cq_consistency import check_cq_consistency

NOW = 1_800_000_000_000


def config(tmp_path: Path, **kw) -> StoreConfig:
    kw.setdefault("commitlog_file_size", 4096)
    kw.setdefault("mapped_file_size_consume_queue", 10 * 20)
    kw.setdefault("max_hash_slot_num", 16)
    kw.setdefault("max_index_num", 20)
    kw.setdefault("delete_when", "99")  # never the delete hour unless a test says so
    return StoreConfig(root_dir=tmp_path / "s", **kw)


def filled(tmp_path: Path, n: int = 100, **kw) -> MessageStore:
    s = MessageStore.open(config(tmp_path, **kw))
    for i in range(n):
        s.put_message(
            Message(topic="T", body=b"x" * 100 + b"%d" % i, keys=[f"k{i}"], queue_id=i % 2)
        )
    assert s.wait_dispatched(60)
    return s


def age_all(s: MessageStore, hours: float) -> None:
    t = (NOW - hours * HOUR_MS) / 1000
    for mf in s.segments.files:
        os.utime(mf.path, (t, t))


def cleaner(s: MessageStore, ratio: float = 0.1, now: int = NOW) -> CleanupService:
    return CleanupService(
        s.cfg, s.segments, s.queues, s.index,
        dispatched_offset=lambda: s.reput.reput_from, clock=lambda: now, disk_ratio=lambda: ratio,
    )  # fmt: skip


def test_nothing_is_deleted_outside_the_delete_hour_with_room_on_disk(tmp_path: Path):
    with filled(tmp_path) as s:
        age_all(s, 100)
        before = len(s.segments.files)
        assert cleaner(s).clean().commitlog_files == 0
        assert len(s.segments.files) == before


def test_expired_files_go_when_forced_and_young_ones_stay(tmp_path: Path):
    with filled(tmp_path) as s:
        age_all(s, 100)
        young = s.segments.files[3]
        t = (NOW - HOUR_MS) / 1000
        os.utime(young.path, (t, t))
        r = cleaner(s).clean(force=True)
        assert r.commitlog_files == 3  # files 0-2; file 3 is younger than 72 h: the walk stops
        assert s.segments.files[0] is young


def test_a_full_disk_allows_deleting_expired_files_ten_at_a_time(tmp_path: Path):
    with filled(tmp_path, n=300) as s:
        age_all(s, 100)
        files = len(s.segments.files)
        assert files > 12
        assert cleaner(s, ratio=0.80).clean().commitlog_files == 10  # delete_files_batch_max
        assert cleaner(s, ratio=0.80).clean().commitlog_files == files - 11  # the last stays


def test_over_the_forcible_ratio_age_does_not_matter(tmp_path: Path):
    with filled(tmp_path) as s:
        age_all(s, 0)
        files = len(s.segments.files)
        r = cleaner(s, ratio=0.90).clean()
        assert r.commitlog_files == min(10, files - 1)


def test_the_last_file_and_undispatched_files_stay(tmp_path: Path):
    with filled(tmp_path) as s:
        s.reput.stop(drain=False)
        boundary = s.segments.files[2].file_from_offset
        s.reput.reput_from = boundary  # pretend files 2.. are not dispatched yet
        r = cleaner(s, ratio=0.99).clean()
        assert r.commitlog_files == 2
        assert s.segments.min_offset == boundary


def test_queue_and_index_files_follow_and_minimums_are_corrected(tmp_path: Path):
    with filled(tmp_path, n=200) as s:
        r = s.clean_expired_files(immediately=True)
        assert (
            r.commitlog_files == min(10, len(s.segments.files) + r.commitlog_files - 1)
            and r.consume_queue_files > 0
            and r.index_files > 0
        )
        low = s.segments.min_offset
        for qid in (0, 1):
            cq = s.consume_queue("T", qid)
            assert cq is not None
            unit = cq.unit_at(cq.min_offset)
            assert unit is not None and unit[0] >= low
            prev = cq.unit_at(cq.min_offset - 1)
            assert prev is None or prev[0] < low
            g = s.get_message("g", "T", qid, 0, 32)
            assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, cq.min_offset)
        assert s.query_by_key("T", "k0").messages == ()
        assert [m.body[-3:] for m in s.query_by_key("T", "k199").messages] == [b"199"]
    assert check_cq_consistency(tmp_path / "s", config(tmp_path)) == []


def test_a_reader_holding_a_pulled_buffer_survives_the_file_deletion(tmp_path: Path):
    with filled(tmp_path) as s:
        raw = s.get_message_raw("g", "T", 0, 0, 4)
        body = bytes(raw.buffers[0])
        s.clean_expired_files(immediately=True)
        assert s.segments.min_offset > 0 and s.commitlog.read(0, 4) is None
        assert bytes(raw.buffers[0]) == body  # the mapping lives while the view does


def test_is_delete_hour():
    at_4 = int(time.mktime((2026, 1, 2, 4, 30, 0, 0, 0, -1)) * 1000)
    assert is_delete_hour("04", at_4) and is_delete_hour("03;04", at_4)
    assert not is_delete_hour("05", at_4)
