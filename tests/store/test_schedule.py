"""Delay levels: redirect to SCHEDULE_TOPIC_XXXX, deliver-time tags codes, re-put when due,
delayOffset.json in fastjson's form."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mqstore import Arrival, GetStatus, Message, MessageStore, StoreConfig
from mqstore.commitlog import format as fmt
from mqstore.message import java_string_hash
from mqstore.schedule import (
    SCHEDULE_TOPIC,
    DelayLevels,
    ScheduleService,
    load_offsets,
    save_offsets,
    time_up,
)
from mqstore.status import PutStatus
from tests.cq_consistency import check_cq_consistency


def config(tmp_path: Path, **kw) -> StoreConfig:
    kw.setdefault("commitlog_file_size", 1 << 16)
    kw.setdefault("mapped_file_size_consume_queue", 100 * 20)
    kw.setdefault("max_hash_slot_num", 16)
    kw.setdefault("max_index_num", 64)
    return StoreConfig(root_dir=tmp_path / "s", **kw)


# ------------------------------------------------------------------ levels


def test_default_levels_are_rocketmqs():
    levels = DelayLevels.parse(StoreConfig().message_delay_level)
    assert levels.max_level == 18
    assert (
        levels.delay_of(1) == 1000
        and levels.delay_of(5) == 60_000
        and levels.delay_of(18) == 7_200_000
    )
    assert levels.delay_of(19) is None


def test_deliver_timestamp_caps_the_level_and_ignores_non_positive_ones():
    levels = DelayLevels.parse("1s 5s")
    assert levels.deliver_timestamp(1, 1000) == 2000
    assert levels.deliver_timestamp(9, 1000) == 6000
    assert levels.deliver_timestamp(0, 1000) is None


@pytest.mark.parametrize("bad", ["1x", "s", "1.5s", "-1s"])
def test_bad_level_strings_are_refused(bad: str):
    with pytest.raises(ValueError):
        DelayLevels.parse(bad)


# -------------------------------------------------------------- the put side


def test_a_delayed_put_waits_in_the_schedule_queue_with_its_deliver_time(tmp_path: Path):
    with MessageStore.open(config(tmp_path)) as s:
        r = s.put_message(Message(topic="T", body=b"later", tags="TagA", queue_id=3, delay_level=3))
        assert r.status is PutStatus.PUT_OK
        assert s.wait_dispatched(60)
        assert s.max_offset_in_queue("T", 3) == 0
        cq = s.consume_queue(SCHEDULE_TOPIC, 2)
        assert cq is not None and cq.max_offset == 1
        assert cq.unit_at(0) == (r.physical_offset, r.size, r.store_timestamp + 10_000)
        rec = s.look_message_by_offset(r.physical_offset)
        assert rec is not None and rec.topic == SCHEDULE_TOPIC and rec.queue_id == 2
        assert rec.properties["REAL_TOPIC"] == "T" and rec.properties["REAL_QID"] == "3"
        assert rec.properties["DELAY"] == "3" and rec.tags == "TagA"


def test_a_level_above_the_highest_is_capped(tmp_path: Path):
    with MessageStore.open(config(tmp_path)) as s:
        r = s.put_message(Message(topic="T", body=b"x", delay_level=99))
        rec = s.look_message_by_offset(r.physical_offset)
        assert rec is not None and rec.queue_id == 17 and rec.properties["DELAY"] == "18"


def test_transactional_prepared_messages_are_not_redirected(tmp_path: Path):
    with MessageStore.open(config(tmp_path)) as s:
        r = s.put_message(
            Message(topic="T", body=b"x", delay_level=2, sys_flag=fmt.TRANSACTION_PREPARED_TYPE)
        )
        rec = s.look_message_by_offset(r.physical_offset)
        assert rec is not None and rec.topic == "T"


def test_time_up_restores_the_real_topic_and_keeps_the_stored_properties():
    rec = fmt.make_record(
        topic=SCHEDULE_TOPIC,
        body=b"b",
        queue_id=1,
        flag=7,
        properties_string="DELAY\x012\x02REAL_TOPIC\x01T\x02REAL_QID\x014\x02TAGS\x01A\x02UNIQ_KEY\x01U\x02",
        born_timestamp=123,
        reconsume_times=2,
    )
    m = time_up(rec)
    assert m is not None
    assert (m.topic, m.queue_id, m.flag, m.born_timestamp, m.reconsume_times) == ("T", 4, 7, 123, 2)
    assert m.stored_properties == rec.properties_string  # DELAY, REAL_* kept, as RocketMQ
    assert m.delay_level == 0  # but not delayed again
    assert not m.wait_store_msg_ok
    assert time_up(fmt.make_record(topic=SCHEDULE_TOPIC, body=b"b")) is None


# -------------------------------------------------------------- the service


class FakeQueue:
    """One schedule level's units in memory, and a clock the test moves."""

    def __init__(self, deliver_times: list[int]):
        self.units = [(i * 100, 100, t) for i, t in enumerate(deliver_times)]
        self.now = 0
        self.put_status = PutStatus.PUT_OK
        self.delivered: list[int] = []

    def read(self, phys: int, _size: int) -> fmt.MessageRecord:
        return fmt.make_record(
            topic=SCHEDULE_TOPIC,
            body=b"%d" % (phys // 100),
            properties_string="DELAY\x011\x02REAL_TOPIC\x01T\x02REAL_QID\x010\x02",
        )

    def put(self, m: Message) -> PutStatus:
        if self.put_status.stored:
            self.delivered.append(int(m.body))
        return self.put_status

    def service(self, path: Path) -> ScheduleService:
        return ScheduleService(
            DelayLevels.parse("10s"),
            path,
            queue_bounds=lambda level: (0, len(self.units)) if level == 1 else None,
            unit_at=lambda _level, off: self.units[off] if off < len(self.units) else None,
            read=self.read,
            put=self.put,
            clock=lambda: self.now,
        )


def test_service_delivers_due_messages_in_order_and_stops_at_the_first_not_due(tmp_path: Path):
    q = FakeQueue([1000, 2000, 3000])
    svc = q.service(tmp_path / "delayOffset.json")
    q.now = 2000
    assert svc.deliver_due() == 2
    assert (q.delivered, svc.offsets) == ([0, 1], {1: 2})
    q.now = 5000
    assert svc.deliver_due() == 1 and svc.offsets == {1: 3}


def test_service_treats_a_deliver_time_beyond_one_level_delay_as_now(tmp_path: Path):
    q = FakeQueue([50_000])  # the clock went back: 50 s ahead with a 10 s level
    svc = q.service(tmp_path / "delayOffset.json")
    q.now = 1000
    assert svc.deliver_due() == 1


def test_service_retries_a_failed_re_put(tmp_path: Path):
    q = FakeQueue([0, 0])
    svc = q.service(tmp_path / "delayOffset.json")
    q.put_status = PutStatus.SERVICE_NOT_AVAILABLE
    assert svc.deliver_due() == 0 and svc.offsets.get(1, 0) == 0
    q.put_status = PutStatus.PUT_OK
    assert svc.deliver_due() == 2 and q.delivered == [0, 1]


def test_service_resumes_from_the_persisted_offset(tmp_path: Path):
    path = tmp_path / "config" / "delayOffset.json"
    save_offsets(path, {1: 1})
    q = FakeQueue([0, 0, 0])
    svc = q.service(path)
    assert svc.deliver_due() == 2 and q.delivered == [1, 2]


# ------------------------------------------------------------ delayOffset.json


def test_delay_offsets_are_written_as_fastjson_with_a_backup(tmp_path: Path):
    path = tmp_path / "config" / "delayOffset.json"
    save_offsets(path, {2: 7, 1: 5})
    assert path.read_text() == '{\n\t"offsetTable":{1:5,2:7\n\t}\n}'
    save_offsets(path, {1: 6, 2: 7})
    assert (
        tmp_path / "config" / "delayOffset.json.bak"
    ).read_text() == '{\n\t"offsetTable":{1:5,2:7\n\t}\n}'
    assert load_offsets(path) == {1: 6, 2: 7}
    path.write_text("")  # a torn write: the backup is used
    assert load_offsets(path) == {1: 5, 2: 7}


def test_rocketmq_written_delay_offsets_load(tmp_path: Path):
    path = tmp_path / "delayOffset.json"
    path.write_text('{"offsetTable":{1:12,3:5}}')
    assert load_offsets(path) == {1: 12, 3: 5}
    path.write_text('{\n\t"offsetTable":{}\n}')
    assert load_offsets(path) == {}


# ----------------------------------------------------------------- end to end


def test_delayed_message_is_delivered_to_its_real_queue_when_due(tmp_path: Path):
    cfg = config(tmp_path, message_delay_level="1s 2s")
    arrived = threading.Event()

    def on_arrival(a: Arrival) -> None:
        if a.topic == "T":
            arrived.set()

    body = b"compressible " * 500  # stored compressed; re-put as stored
    with MessageStore.open(cfg) as s:
        s.add_arrival_listener(on_arrival)
        r = s.put_message(
            Message(topic="T", body=body, tags="TagA", keys=["k"], queue_id=1, delay_level=1)
        )
        assert arrived.wait(10)
        g = s.get_message("g", "T", 1, 0, 32, "TagA")
        assert g.status is GetStatus.FOUND
        (m,) = g.messages
        assert m.body == body and m.tags == "TagA" and m.uniq_key == r.uniq_key
        assert m.store_timestamp >= r.store_timestamp + 1000
        assert m.properties["DELAY"] == "1" and m.properties["REAL_TOPIC"] == "T"
        assert m.properties["REAL_QID"] == "1" and m.properties["WAIT"] == "true"  # as sent
        cq = s.consume_queue("T", 1)
        assert cq is not None and cq.unit_at(0)[2] == java_string_hash("TagA")  # type: ignore[index]
        assert [x.topic for x in s.query_by_key("T", "k").messages] == ["T"]
    assert (
        tmp_path / "s" / "config" / "delayOffset.json"
    ).read_text() == '{\n\t"offsetTable":{1:1\n\t}\n}'
    assert check_cq_consistency(tmp_path / "s", cfg) == []
    with MessageStore.open(cfg) as s:  # not delivered twice after a restart
        assert s.logics.schedule is not None
        assert s.logics.schedule.deliver_due() == 0
        assert s.max_offset_in_queue("T", 1) == 1
