"""The dispatcher through the store: what gets a unit, when, and across restarts and crashes."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from mqstore import Arrival, FlushDiskType, GetStatus, Message, MessageStore, StoreConfig, faults
from mqstore.commitlog import format as fmt
from mqstore.message import java_string_hash
from tests.cq_consistency import check_cq_consistency


def config(tmp_path: Path, **kw) -> StoreConfig:
    kw.setdefault("commitlog_file_size", 8192)
    kw.setdefault("mapped_file_size_consume_queue", 16 * 20)
    kw.setdefault("max_hash_slot_num", 32)
    kw.setdefault("max_index_num", 64)
    return StoreConfig(root_dir=tmp_path / "s", **kw)


def msg(i: int, topic: str = "T", qid: int = 0, **kw) -> Message:
    return Message(
        topic=topic, body=b"body-%d" % i, tags=f"Tag{i % 3}", keys=[f"k{i}"], queue_id=qid, **kw
    )


def put_all(s: MessageStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        assert s.put_message(msg(i, qid=i % 2)).status.stored
    assert s.wait_dispatched(60)


def bodies(s: MessageStore, qid: int) -> list[bytes]:
    out, off = [], s.min_offset_in_queue("T", qid)
    while True:
        g = s.get_message("g", "T", qid, off, 32)
        if g.status is not GetStatus.FOUND:
            return out
        out += [m.body for m in g.messages]
        off = g.next_begin_offset


def test_prepared_and_rollback_records_get_no_unit(tmp_path: Path):
    with MessageStore.open(config(tmp_path)) as s:
        s.put_message(msg(0))
        s.put_message(msg(1, sys_flag=fmt.TRANSACTION_PREPARED_TYPE))
        s.put_message(msg(2, sys_flag=fmt.TRANSACTION_ROLLBACK_TYPE))
        s.put_message(msg(3, sys_flag=fmt.TRANSACTION_COMMIT_TYPE))
        assert s.wait_dispatched(60)
        assert s.max_offset_in_queue("T", 0) == 2
        assert bodies(s, 0) == [b"body-0", b"body-3"]
        # PREPARED records are indexed, ROLLBACK ones are not
        assert [m.body for m in s.query_by_key("T", "k1").messages] == [b"body-1"]
        assert s.query_by_key("T", "k2").messages == ()
    assert check_cq_consistency(tmp_path / "s", config(tmp_path)) == []


def test_arrival_listeners_hear_every_dispatched_message(tmp_path: Path):
    heard: list[Arrival] = []
    done = threading.Event()

    def listener(a: Arrival) -> None:
        heard.append(a)
        if len(heard) == 3:
            done.set()

    with MessageStore.open(config(tmp_path)) as s:
        s.add_arrival_listener(listener)
        for i in range(3):
            s.put_message(msg(i, qid=1))
        assert done.wait(10)
        s.remove_arrival_listener(listener)
    assert [(a.topic, a.queue_id, a.queue_offset, a.tags_code) for a in heard] == [
        ("T", 1, i, java_string_hash(f"Tag{i}")) for i in range(3)
    ]


def test_a_failing_listener_does_not_stop_dispatch(tmp_path: Path):
    def bad(_a: Arrival) -> None:
        raise RuntimeError("boom")

    with MessageStore.open(config(tmp_path)) as s:
        s.add_arrival_listener(bad)
        put_all(s, 4)
        assert s.max_offset_in_queue("T", 0) == 2


def test_sync_flush_dispatches_only_flushed_messages(tmp_path: Path):
    release = threading.Event()
    entered = threading.Event()

    def hold(what: str = "", **_: object) -> None:
        if "commitlog" in what:
            entered.set()
            release.wait(10)

    with MessageStore.open(config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)) as s:
        with faults.inject("before_fdatasync", hold):
            s.put_message(msg(0, wait_store_msg_ok=False))
            assert entered.wait(10)  # the flusher is inside fdatasync, nothing durable yet
            s.reput.do_reput()
            assert s.max_offset_in_queue("T", 0) == 0
            release.set()
            assert s.wait_dispatched(60)
        assert s.max_offset_in_queue("T", 0) == 1


def test_close_drains_the_dispatcher_then_deletes_abort(tmp_path: Path):
    s = MessageStore.open(config(tmp_path))
    s.reput.stop(drain=False)  # nothing is dispatched in the background from here on
    for i in range(30):
        s.put_message(msg(i))
    assert s.dispatch_behind_bytes > 0
    s.close()
    assert not (tmp_path / "s" / "abort").exists()
    assert check_cq_consistency(tmp_path / "s", config(tmp_path)) == []
    with MessageStore.open(config(tmp_path)) as again:
        assert again.max_offset_in_queue("T", 0) == 30


def test_clean_restart_loses_and_duplicates_nothing(tmp_path: Path):
    cfg = config(tmp_path)
    with MessageStore.open(cfg) as s:
        put_all(s, 40)
    with MessageStore.open(cfg) as s:
        assert s.last_exit_ok
        assert s.next_queue_offset("T", 0) == 20
        put_all(s, 40, start=40)
        assert bodies(s, 0) == [b"body-%d" % i for i in range(0, 80, 2)]
        assert len(s.query_by_key("T", "k3").messages) == 1
    assert check_cq_consistency(tmp_path / "s", cfg) == []


def test_crash_then_reopen_redispatches_without_duplicates(tmp_path: Path):
    cfg = config(tmp_path)
    s = MessageStore.open(cfg)
    put_all(s, 40)
    s.abandon()
    with MessageStore.open(cfg) as s:
        assert not s.last_exit_ok
        assert bodies(s, 1) == [b"body-%d" % i for i in range(1, 40, 2)]
        put_all(s, 10, start=40)
    assert check_cq_consistency(tmp_path / "s", cfg) == []


def test_lost_consume_queues_are_rebuilt_after_a_crash(tmp_path: Path):
    cfg = config(tmp_path)
    s = MessageStore.open(cfg)
    put_all(s, 40)
    s.abandon()
    shutil.rmtree(tmp_path / "s" / "consumequeue")
    shutil.rmtree(tmp_path / "s" / "index")
    with MessageStore.open(cfg) as s:
        assert s.max_offset_in_queue("T", 0) == 20
        assert [m.body for m in s.query_by_key("T", "k7").messages] == [b"body-7"]
    assert check_cq_consistency(tmp_path / "s", cfg) == []


def test_a_store_without_consume_queues_gets_them_on_open(tmp_path: Path):
    cfg = config(tmp_path)
    with MessageStore.open(cfg) as s:
        put_all(s, 25)
    shutil.rmtree(tmp_path / "s" / "consumequeue")  # as written before consume queues existed
    shutil.rmtree(tmp_path / "s" / "index")
    with MessageStore.open(cfg) as s:
        assert s.last_exit_ok
        assert s.max_offset_in_queue("T", 1) == 12
        assert s.put_message(msg(99, qid=1)).queue_offset == 12
        assert s.wait_dispatched(60)
    assert check_cq_consistency(tmp_path / "s", cfg) == []


def test_units_past_a_cut_commitlog_tail_are_dropped(tmp_path: Path):
    cfg = config(tmp_path)
    s = MessageStore.open(cfg)
    put_all(s, 10)
    last = s.put_message(msg(10))
    assert s.wait_dispatched(60)
    s.abandon()
    seg = tmp_path / "s" / "commitlog" / f"{0:020d}"
    data = bytearray(seg.read_bytes())
    end = last.physical_offset + last.size
    data[end - last.size // 2 : end] = bytes(last.size // 2)  # a torn write of the last record
    seg.write_bytes(bytes(data))
    with MessageStore.open(cfg) as s:
        assert s.max_offset_in_queue("T", 0) == 5  # records 0,2,4,6,8; 10 is gone
        assert s.put_message(msg(12)).queue_offset == 5
        assert s.wait_dispatched(60)
    assert check_cq_consistency(tmp_path / "s", cfg) == []


def test_index_files_newer_than_the_checkpoint_are_rebuilt_after_a_crash(tmp_path: Path):
    cfg = config(tmp_path, max_index_num=16)  # 15 keys per file: several files
    s = MessageStore.open(cfg)
    put_all(s, 30)  # 60 keys (UNIQ_KEY + k<i>)
    s.flush()  # the checkpoint's CommitLog time now covers everything
    s.abandon()
    with MessageStore.open(cfg) as s:
        for i in (0, 14, 29):
            assert [m.body for m in s.query_by_key("T", f"k{i}").messages] == [b"body-%d" % i]
    assert check_cq_consistency(tmp_path / "s", cfg) == []


def test_thorough_queue_flush_records_the_logics_timestamp(tmp_path: Path):
    with MessageStore.open(config(tmp_path)) as s:
        r = s.put_message(msg(0))
        assert s.wait_dispatched(60)
        assert s.logics.flusher is not None
        s.logics.flusher.flush_once(thorough=True)
        assert s.checkpoint.logics_msg_timestamp == r.store_timestamp
