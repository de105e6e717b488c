"""Timer messages in the embedded store: into rmq_sys_wheel_timer and the wheel, out when due."""

from __future__ import annotations

import time
from pathlib import Path

from mqstore import GetStatus, Message, MessageStore, StoreConfig
from mqstore.commitlog import format as fmt
from mqstore.status import PutStatus
from mqstore.timer import format as tf
from mqstore.timer.files import TimerLog, TimerWheel
from mqstore.timer.transform import TIMER_TOPIC


def config(tmp_path: Path, **kw) -> StoreConfig:
    kw.setdefault("commitlog_file_size", 1 << 20)
    kw.setdefault("mapped_file_size_consume_queue", 100 * 20)
    kw.setdefault("max_hash_slot_num", 16)
    kw.setdefault("max_index_num", 64)
    kw.setdefault("mapped_file_size_timer_log", 52 * 40)
    return StoreConfig(root_dir=tmp_path / "s", **kw)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def arrived(store: MessageStore, topic: str, count: int, timeout: float = 15.0,
            queue_id: int = 0) -> list[fmt.MessageRecord]:  # fmt: skip
    """The first ``count`` messages of the queue, once there (polled with a deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        store.wait_dispatched(60)
        g = store.get_message("g", topic, queue_id, 0, 64)
        got = list(g.messages) if g.status is GetStatus.FOUND else []
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def test_a_timer_message_arrives_at_its_time_not_before(tmp_path: Path):
    with MessageStore.open(config(tmp_path)) as store:
        at = now_ms() + 1500
        r = store.put_message(Message(topic="T", body=b"b", tags="A",
                                      properties={"TIMER_DELIVER_MS": str(at)}))  # fmt: skip
        assert r.status is PutStatus.PUT_OK
        assert not store.get_message("g", "T", 0, 0, 8).messages
        (m,) = arrived(store, "T", 1)
        assert m.store_timestamp >= at
        # the precision, plus what a loaded shared machine may delay the timer thread by
        assert m.store_timestamp - at < 1000 + 3000


def test_the_delivered_message_carries_its_times_and_its_own_topic_queue_and_tags(tmp_path):
    with MessageStore.open(config(tmp_path, timer_precision_ms=100)) as store:
        at = now_ms() + 400
        sent = Message(topic="T", body=b"payload", tags="A", keys=["k"], queue_id=2,
                       properties={"TIMER_DELIVER_MS": str(at), "u": "v"})  # fmt: skip
        uniq = store.put_message(sent).uniq_key
        (m,) = arrived(store, "T", 1, queue_id=2)
        p = m.properties
        assert (m.body, m.tags, m.keys, p["u"], p["UNIQ_KEY"]) == (
            b"payload",
            "A",
            ["k"],
            "v",
            uniq,
        )
        assert p["TIMER_DELIVER_MS"] == str(at) and int(p["TIMER_OUT_MS"]) <= at
        assert int(p["TIMER_ENQUEUE_MS"]) <= int(p["TIMER_DEQUEUE_MS"])
        assert (p["REAL_TOPIC"], p["REAL_QID"]) == ("T", "2")  # RocketMQ 5.3.3 leaves them


def test_beyond_the_max_delay_is_refused_and_nothing_is_stored(tmp_path: Path):
    with MessageStore.open(config(tmp_path)) as store:
        r = store.put_message(Message(topic="T", body=b"b",
                                      properties={"TIMER_DELAY_SEC": str(3 * 86400 + 1)}))  # fmt: skip
        assert r.status is PutStatus.WHEEL_TIMER_MSG_ILLEGAL
        assert "max delay 259200000ms" in (r.error or "")
        assert store.max_offset_in_queue(TIMER_TOPIC, 0) == 0 and store.commitlog.max_offset == 0


def test_a_due_time_already_passed_is_stored_straight_in_its_topic(tmp_path: Path):
    with MessageStore.open(config(tmp_path)) as store:
        props = {"TIMER_DELIVER_MS": str(now_ms() - 1000)}
        store.put_message(Message(topic="T", body=b"b", properties=props))
        store.wait_dispatched(60)
        (m,) = store.get_message("g", "T", 0, 0, 8).messages
        assert "TIMER_OUT_MS" not in m.properties
        assert store.max_offset_in_queue(TIMER_TOPIC, 0) == 0


def test_a_delay_level_still_goes_through_the_schedule_topic(tmp_path: Path):
    with MessageStore.open(config(tmp_path)) as store:
        r = store.put_message(Message(topic="T", body=b"b", delay_level=1,
                                      properties={"TIMER_DELAY_SEC": "100"}))  # fmt: skip
        store.wait_dispatched(60)
        assert store.max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 1
        assert store.max_offset_in_queue(TIMER_TOPIC, 0) == 0
        (m,) = arrived(store, "T", 1)
        assert m.uniq_key == r.uniq_key and "TIMER_DELAY_SEC" not in m.properties


def test_pending_timers_survive_a_clean_restart_and_arrive_once(tmp_path: Path):
    cfg = config(tmp_path, timer_precision_ms=100)
    with MessageStore.open(cfg) as store:
        for i in range(5):
            store.put_message(Message(topic="T", body=b"%d" % i,
                                      properties={"TIMER_DELAY_MS": str(600 + 100 * i)}))  # fmt: skip
        store.wait_dispatched(60)
    with MessageStore.open(cfg) as store:
        got = arrived(store, "T", 5)
        assert sorted(m.body for m in got) == [b"0", b"1", b"2", b"3", b"4"]
        time.sleep(0.3)
        assert len(arrived(store, "T", 6, timeout=0.2)) == 5


def test_a_timer_past_the_roll_window_rolls_then_arrives_once(tmp_path: Path):
    cfg = config(tmp_path, timer_precision_ms=100, timer_roll_window_slot=3)
    with MessageStore.open(cfg) as store:
        store.put_message(Message(topic="T", body=b"b", properties={"TIMER_DELAY_MS": "2000"}))
        (m,) = arrived(store, "T", 1)
        assert int(m.properties["TIMER_ROLL_TIMES"]) >= 1  # windows of 300 ms
        assert m.store_timestamp >= int(m.properties["TIMER_OUT_MS"])
        assert store.max_offset_in_queue(TIMER_TOPIC, 0) == 1 + int(
            m.properties["TIMER_ROLL_TIMES"]
        )


def test_a_store_without_timer_messages_has_no_timer_files(tmp_path: Path):
    cfg = config(tmp_path)
    with MessageStore.open(cfg) as store:
        store.put_message(Message(topic="T", body=b"b"))
        store.wait_dispatched(60)
        time.sleep(0.15)
    names = {p.name for p in cfg.root.iterdir()} | {p.name for p in (cfg.root / "config").iterdir()}
    assert not names & {"timerlog", "timerwheel", "timercheck"}


def test_the_wheel_and_the_log_hold_rocketmqs_units_and_slots(tmp_path: Path):
    cfg = config(tmp_path)
    at = now_ms() + 3_600_000
    with MessageStore.open(cfg) as store:
        phys = []
        for _ in range(3):  # three in one slot, chained
            phys.append(store.put_message(Message(topic="T", body=b"b",
                        properties={"TIMER_DELIVER_MS": str(at)})).physical_offset)  # fmt: skip
        store.wait_dispatched(60)
        deadline = time.monotonic() + 60
        while store.logics.timer is None or store.logics.timer.enqueued < 3:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    assert (cfg.root / "timerwheel").stat().st_size == tf.WHEEL_BYTES == 38_707_200
    assert (cfg.root / "config" / "timercheck").stat().st_size == 4096
    wheel = TimerWheel(cfg.root / "timerwheel", 1000)
    tlog = TimerLog(cfg.root / "timerlog", cfg.mapped_file_size_timer_log)
    tlog.load()
    tlog.recover_from(0)
    try:
        slot = wheel.get(at // 1000 * 1000)
        assert (slot.time_ms, slot.first_pos, slot.last_pos, slot.num) == (
            at // 1000 * 1000, 0, 2 * tf.UNIT_SIZE, 3)  # fmt: skip
        units = [tlog.unit_at(i * tf.UNIT_SIZE) for i in range(3)]
        assert [u.prev_pos for u in units if u] == [-1, 0, tf.UNIT_SIZE]
        assert [u.offset_py for u in units if u] == phys
        assert all(u is not None and u.due_ms == at // 1000 * 1000 for u in units)
        assert all(u is not None and u.topic_hash == tf.java_string_hash("T") for u in units)
    finally:
        wheel.close()
        tlog.close()


def test_timer_log_files_whose_timers_are_all_past_are_deleted(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("mqstore.timer.service.CLEANUP_INTERVAL_S", 0.0)
    cfg = config(tmp_path, timer_precision_ms=100)  # 39 units a file
    with MessageStore.open(cfg) as store:
        for _ in range(100):
            store.put_message(Message(topic="T", body=b"b", properties={"TIMER_DELAY_MS": "300"}))
        assert len(arrived(store, "T", 100)) >= 32  # a pull returns 32 at most
        files = cfg.root / "timerlog"
        deadline = time.monotonic() + 60
        while len(list(files.iterdir())) > 1:
            assert time.monotonic() < deadline, sorted(p.name for p in files.iterdir())
            time.sleep(0.05)
        timer = store.logics.timer
        assert timer is not None and timer.delivered == 100
