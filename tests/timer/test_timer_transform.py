"""A timer message on the way in (HookUtils.transformTimerMessage) and out (convert)."""

from __future__ import annotations

import pytest

from mqstore.commitlog import format as fmt
from mqstore.message import Message
from mqstore.timer.transform import (
    LONG_MAX,
    TIMER_TOPIC,
    TimerVerdict,
    delivery_key,
    due_message,
    illegal_remark,
    to_timer,
)

NOW = 1_700_000_000_500


def timed(props: dict[str, str], **kw) -> Message | TimerVerdict:
    msg = Message(topic="T", body=b"x", queue_id=3, properties=props, **kw)
    return to_timer(msg, NOW, precision_ms=1000, max_delay_sec=259_200)


def out_ms(m: Message | TimerVerdict) -> int:
    assert isinstance(m, Message) and m.topic == TIMER_TOPIC
    return int(m.properties["TIMER_OUT_MS"])


def test_delay_sec_goes_to_the_wheel_topic_with_the_real_topic_and_queue():
    m = timed({"TIMER_DELAY_SEC": "3"})
    assert isinstance(m, Message)
    assert (m.topic, m.queue_id) == (TIMER_TOPIC, 0)
    assert (m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == ("T", "3")
    assert out_ms(m) == (NOW + 3000) // 1000 * 1000


def test_delay_ms_and_deliver_ms_are_read_and_sec_wins_over_both():
    assert out_ms(timed({"TIMER_DELAY_MS": "2400"})) == (NOW + 2400) // 1000 * 1000
    assert out_ms(timed({"TIMER_DELIVER_MS": str(NOW + 4200)})) == (NOW + 4200) // 1000 * 1000
    both = {"TIMER_DELAY_SEC": "9", "TIMER_DELAY_MS": "1000", "TIMER_DELIVER_MS": str(NOW + 1)}
    assert out_ms(timed(both)) == (NOW + 9000) // 1000 * 1000


def test_a_due_time_on_a_precision_boundary_takes_the_slot_before():
    at = (NOW // 1000 + 5) * 1000
    assert out_ms(timed({"TIMER_DELIVER_MS": str(at)})) == at - 1000


def test_a_due_time_not_in_the_future_is_stored_as_sent():
    for at in (NOW, NOW - 10_000):
        m = timed({"TIMER_DELIVER_MS": str(at)})
        assert isinstance(m, Message) and m.topic == "T" and "TIMER_OUT_MS" not in m.properties


def test_more_than_the_max_delay_ahead_or_not_a_number_is_illegal():
    assert timed({"TIMER_DELAY_SEC": str(259_200)}) != TimerVerdict.ILLEGAL
    assert timed({"TIMER_DELAY_SEC": str(259_201)}) is TimerVerdict.ILLEGAL
    assert timed({"TIMER_DELIVER_MS": "soon"}) is TimerVerdict.ILLEGAL
    assert "max delay 259200000ms" in illegal_remark(259_200)


def test_a_disabled_wheel_refuses_timer_messages():
    msg = Message(topic="T", body=b"x", properties={"TIMER_DELAY_SEC": "3"})
    assert to_timer(msg, NOW, precision_ms=1000, max_delay_sec=60, enabled=False) is (
        TimerVerdict.NOT_ENABLED)  # fmt: skip


def test_a_delay_level_wins_and_the_timer_properties_are_dropped():
    m = timed({"TIMER_DELAY_SEC": "3", "TIMER_DELIVER_MS": "1", "TIMER_DELAY_MS": "1", "a": "b"},
              delay_level=2)  # fmt: skip
    assert isinstance(m, Message) and m.topic == "T" and m.properties == {"a": "b"}


@pytest.mark.parametrize(
    "props",
    [{"__STARTDELIVERTIME": str(NOW + 5000)}, {"TIMER_DELAY_SEC": "3", "TIMER_OUT_MS": "1"}],
)
def test_what_rocketmq_5_does_not_time_is_stored_as_sent(props):
    m = timed(props)
    assert isinstance(m, Message) and m.topic == "T" and m.properties == props


def test_broker_re_puts_and_prepared_transactions_are_not_timed():
    rolled = Message(topic=TIMER_TOPIC, body=b"x", properties={"TIMER_DELAY_SEC": "3"})
    assert to_timer(rolled, NOW, precision_ms=1000, max_delay_sec=60) is rolled
    half = Message(topic="T", body=b"x", properties={"TIMER_DELAY_SEC": "3"},
                   sys_flag=fmt.TRANSACTION_PREPARED_TYPE)  # fmt: skip
    assert to_timer(half, NOW, precision_ms=1000, max_delay_sec=60) is half


def record(props: dict[str, str], topic: str = TIMER_TOPIC) -> fmt.MessageRecord:
    text = "".join(f"{k}\x01{v}\x02" for k, v in props.items())
    return fmt.make_record(topic=topic, body=b"body", flag=7, reconsume_times=2,
                           properties_string=text)  # fmt: skip


def test_a_due_message_goes_to_its_real_topic_with_enqueue_and_dequeue_times():
    rec = record({"REAL_TOPIC": "T", "REAL_QID": "3", "TIMER_OUT_MS": "5000", "UNIQ_KEY": "U"})
    m = due_message(rec, enqueue_ms=4000, now_ms=6000, roll=False)
    assert m is not None and (m.topic, m.queue_id, m.flag, m.reconsume_times) == ("T", 3, 7, 2)
    assert (m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == (
        "T",
        "3",
    )  # as 5.3.3 keeps them
    assert (m.properties["TIMER_ENQUEUE_MS"], m.properties["TIMER_DEQUEUE_MS"]) == ("4000", "6000")
    assert m.properties["TIMER_OUT_MS"] == "5000" and not m.wait_store_msg_ok
    assert delivery_key(m.topic, m.properties) == ("U", "5000", -1)


def test_a_message_due_before_it_was_enqueued_says_so():
    rec = record({"REAL_TOPIC": "T", "REAL_QID": "0", "TIMER_OUT_MS": "5000"})
    m = due_message(rec, enqueue_ms=LONG_MAX, now_ms=6000, roll=False)
    assert m is not None and m.properties["TIMER_ENQUEUE_MS"] == "9223372036854775807"


def test_a_rolling_unit_goes_back_to_the_wheel_topic_counting_its_rolls():
    rec = record({"REAL_TOPIC": "T", "REAL_QID": "0", "TIMER_OUT_MS": "5000", "UNIQ_KEY": "U"})
    once = due_message(rec, enqueue_ms=1, now_ms=2, roll=True)
    assert once is not None and once.topic == TIMER_TOPIC and once.properties["REAL_TOPIC"] == "T"
    assert once.properties["TIMER_ROLL_TIMES"] == "1"
    assert delivery_key(once.topic, once.properties) == ("U", "5000", 1)
    twice = due_message(record(once.properties), enqueue_ms=1, now_ms=2, roll=True)
    assert twice is not None and twice.properties["TIMER_ROLL_TIMES"] == "2"


def test_a_record_without_a_real_topic_is_not_delivered():
    assert due_message(record({"TIMER_OUT_MS": "5000"}), enqueue_ms=1, now_ms=2, roll=False) is None
