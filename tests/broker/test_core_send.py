"""BrokerCore.send (topic auto-creation, queue checks) and send-back (retry, DLQ)."""

from __future__ import annotations

from pathlib import Path

from mqstore.broker.core import BrokerCore
from mqstore.consumequeue.results import StoredMessage
from mqstore.message import Message
from mqstore.message_store import MessageStore
from mqstore.remoting.codes import ResponseCode
from mqstore.remoting.fastjson import loads
from mqstore.schedule import SCHEDULE_TOPIC


def test_send_auto_creates_the_topic_with_four_queues(
    core: BrokerCore, store: MessageStore
) -> None:
    out = core.sender.send("NewTopic", 0, [Message("NewTopic", b"x")])
    assert out.code is ResponseCode.SUCCESS
    cfg = core.topic_config("NewTopic")
    assert cfg is not None and (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm) == (4, 4, 6)
    text = (Path(store.root) / "config" / "topics.json").read_text()
    assert loads(text)["topicConfigTable"]["NewTopic"]["writeQueueNums"] == 4


def test_send_to_a_queue_past_the_topic_is_a_system_error(core: BrokerCore) -> None:
    core.sender.send("T", 0, [Message("T", b"x")])
    assert core.sender.send("T", 9, [Message("T", b"x")]).code is ResponseCode.SYSTEM_ERROR


def test_batch_send_returns_one_result_per_message(core: BrokerCore) -> None:
    out = core.sender.send("T", 1, [Message("T", b"a"), Message("T", b"b")])
    assert [r.queue_offset for r in out.results] == [0, 1]


def test_send_with_empty_body_is_message_illegal(core: BrokerCore) -> None:
    assert core.sender.send("T", 0, [Message("T", b"")]).code is ResponseCode.MESSAGE_ILLEGAL


def test_topics_in_the_store_are_known_at_start(store: MessageStore) -> None:
    store.put_message(Message("Old", b"x", queue_id=2))
    assert store.wait_dispatched(60)
    cfg = BrokerCore(store).topic_config("Old")
    assert cfg is not None and cfg.read_queue_nums == 3


def _first(store: MessageStore, topic: str, queue_id: int = 0) -> StoredMessage:
    assert store.wait_dispatched(60)
    g = store.get_message("x", topic, queue_id, 0)
    assert g.messages, f"nothing in {topic}-{queue_id}"
    return g.messages[0]


def test_send_back_schedules_a_retry_at_level_three(core: BrokerCore, store: MessageStore) -> None:
    r = store.put_message(Message("T", b"body", tags="A", keys="k1"))
    assert core.sender.send_back("g", r.physical_offset).code is ResponseCode.SUCCESS
    retry = _first(store, SCHEDULE_TOPIC, 2)  # level 3 -> schedule queue 2
    props = retry.properties
    assert props["REAL_TOPIC"] == "%RETRY%g"
    assert props["RETRY_TOPIC"] == "T"
    assert props["ORIGIN_MESSAGE_ID"] == r.msg_id
    assert props["RECONSUME_TIME"] == "1"
    assert (retry.reconsume_times, retry.body, retry.tags) == (1, b"body", "A")
    assert retry.uniq_key == r.uniq_key


def test_send_back_past_max_reconsume_times_goes_to_the_dlq(
    core: BrokerCore, store: MessageStore
) -> None:
    r = store.put_message(Message("T", b"body", reconsume_times=16))
    assert core.sender.send_back("g", r.physical_offset).code is ResponseCode.SUCCESS
    dead = _first(store, "%DLQ%g")
    assert (dead.reconsume_times, dead.properties["RETRY_TOPIC"]) == (17, "T")
    cfg = core.topic_config("%DLQ%g")
    assert cfg is not None and cfg.read_queue_nums == 1


def test_send_back_honours_the_request_max_reconsume_times(
    core: BrokerCore, store: MessageStore
) -> None:
    r = store.put_message(Message("T", b"body", reconsume_times=2))
    core.sender.send_back("g", r.physical_offset, max_reconsume_times=2)
    assert _first(store, "%DLQ%g").body == b"body"


def test_send_back_of_a_missing_offset_is_a_system_error(core: BrokerCore) -> None:
    assert core.sender.send_back("g", 10**9).code is ResponseCode.SYSTEM_ERROR


def test_client_send_to_the_retry_topic_past_max_goes_to_the_dlq(
    core: BrokerCore, store: MessageStore
) -> None:
    out = core.sender.send("%RETRY%g", 0, [Message("%RETRY%g", b"again", reconsume_times=16)])
    assert (out.code, out.topic) == (ResponseCode.SUCCESS, "%DLQ%g")
    assert _first(store, "%DLQ%g").body == b"again"


def test_client_send_to_the_retry_topic_below_max_stays_there(
    core: BrokerCore, store: MessageStore
) -> None:
    out = core.sender.send("%RETRY%g", 0, [Message("%RETRY%g", b"again", reconsume_times=1)])
    assert out.topic == "%RETRY%g"


def test_send_to_an_illegal_topic_name_creates_nothing(core: BrokerCore) -> None:
    out = core.sender.send("../evil", 0, [Message("../evil", b"x")])
    assert out.code is ResponseCode.SYSTEM_ERROR
    assert core.topic_config("../evil") is None


def test_repeated_send_back_goes_retry_then_dlq_keeping_the_origin(
    core: BrokerCore, store: MessageStore
) -> None:
    first = store.put_message(Message("T", b"flaky"))
    assert (
        core.sender.send_back("g", first.physical_offset, max_reconsume_times=1).code
        is ResponseCode.SUCCESS
    )
    retry = _first(store, SCHEDULE_TOPIC, 2)
    assert retry.reconsume_times == 1
    assert (
        core.sender.send_back("g", retry.physical_offset, max_reconsume_times=1).code
        is ResponseCode.SUCCESS
    )
    dead = _first(store, "%DLQ%g")
    assert dead.reconsume_times == 2
    assert dead.properties["RETRY_TOPIC"] == "T"
    assert dead.properties["ORIGIN_MESSAGE_ID"] == first.msg_id
    assert dead.uniq_key == first.uniq_key
