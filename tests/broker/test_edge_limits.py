"""Hostile values at the edge: group names, queue counts and compressed bodies are
checked with RocketMQ's rules before anything reaches a file or a background service."""

from __future__ import annotations

import json
import struct
import time
import zlib

import pytest

from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.broker.topics import MAX_QUEUE_NUMS, TopicConfig, TopicConfigManager
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from tests.broker.test_server import send_v2
from tests.broker.wire_client import WireClient
from tests.helpers import until

SURROGATE = "\ud800"
SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def raw_call(c: WireClient, code: int, ext: dict[str, object], body: bytes = b"") -> int:
    """Send a request whose JSON header is written by ``json`` (lone surrogates become
    ``\\ud800`` escapes, which our own encoder refuses to write); return the code."""
    opaque = next(c.opaques)
    header = json.dumps(
        {
            "code": code,
            "extFields": {k: str(v) for k, v in ext.items()},
            "flag": 0,
            "language": "JAVA",
            "opaque": opaque,
            "serializeTypeCurrentRPC": "JSON",
            "version": 0,
        }
    ).encode("ascii")
    frame = struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body
    c.send_raw(frame)
    return c.wait_response(opaque).code


def commit(c: WireClient, group: str, offset: int, topic: str = "T") -> Rs:
    ext = {"consumerGroup": group, "topic": topic, "queueId": 0, "commitOffset": offset}
    return Rs(raw_call(c, Rq.UPDATE_CONSUMER_OFFSET, ext))


@pytest.mark.parametrize("group", [SURROGATE, "a/b", "g" * 121, "", "a b", ".."])
def test_an_offset_commit_with_an_illegal_group_is_refused(
    server: BrokerServer, core: BrokerCore, group: str
) -> None:
    with WireClient(server.address) as c:
        assert commit(c, group, 5) is Rs.SYSTEM_ERROR
    assert core.offsets.table() == {}


def test_offsets_keep_being_saved_after_a_surrogate_group_was_sent(
    server: BrokerServer, core: BrokerCore
) -> None:
    with WireClient(server.address) as c:
        commit(c, SURROGATE, 5)
        assert commit(c, "good", 7) is Rs.SUCCESS
    assert core.offsets.persist(force=True)
    saved = json.loads(core.offsets.path.read_text(encoding="utf-8").replace("{0:", '{"0":'))
    assert saved == {"offsetTable": {"T@good": {"0": 7}}}


def test_a_group_of_120_characters_is_the_longest_accepted(server: BrokerServer) -> None:
    with WireClient(server.address) as c:
        assert commit(c, "g" * 120, 1) is Rs.SUCCESS
        assert commit(c, "g" * 121, 1) is Rs.SYSTEM_ERROR


@pytest.mark.parametrize("group", ["a/b", "g" * 121, SURROGATE])
def test_a_send_back_for_an_illegal_group_stores_nothing(
    server: BrokerServer, core: BrokerCore, group: str
) -> None:
    with WireClient(server.address) as c:
        stored = send_v2(c, b"m")
        offset = int(stored.ext_fields["msgId"][-16:], 16)
        ext = {"group": group, "offset": offset, "delayLevel": 1, "originMsgId": ""}
        assert raw_call(c, Rq.CONSUMER_SEND_MSG_BACK, ext) != Rs.SUCCESS
    assert core.store.max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 0


def test_a_heartbeat_naming_an_illegal_group_is_refused(
    server: BrokerServer, core: BrokerCore
) -> None:
    body = json.dumps(
        {"clientID": "c1", "consumerDataSet": [{"groupName": "a/b"}], "producerDataSet": []}
    ).encode()
    with WireClient(server.address) as c:
        assert c.call(Rq.HEART_BEAT, {}, body).code == Rs.SYSTEM_ERROR
    assert core.consumer_ids("a/b") == []


@pytest.mark.parametrize("nums", [0, -1, MAX_QUEUE_NUMS + 1, 2**31 - 1])
def test_a_topic_with_a_queue_count_out_of_range_is_refused(
    server: BrokerServer, core: BrokerCore, nums: int
) -> None:
    ext = {"topic": "Big", "readQueueNums": nums, "writeQueueNums": nums, "perm": 6}
    with WireClient(server.address) as c:
        assert c.call(Rq.UPDATE_AND_CREATE_TOPIC, ext).code == Rs.SYSTEM_ERROR
    assert core.topic_config("Big") is None


def test_the_largest_queue_count_is_accepted(server: BrokerServer, core: BrokerCore) -> None:
    ext = {"topic": "Wide", "readQueueNums": 16, "writeQueueNums": MAX_QUEUE_NUMS, "perm": 6}
    with WireClient(server.address) as c:
        assert c.call(Rq.UPDATE_AND_CREATE_TOPIC, ext).code == Rs.SUCCESS
    config = core.topic_config("Wide")
    assert config is not None and config.write_queue_nums == MAX_QUEUE_NUMS


def test_a_topics_file_entry_with_absurd_counts_is_left_out_at_load(tmp_path) -> None:
    path = tmp_path / "topics.json"
    huge = 10**29
    table = {
        "Bad": {"topicName": "Bad", "readQueueNums": huge, "writeQueueNums": huge, "perm": 6},
        "Good": {"topicName": "Good", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
    }
    path.write_text(json.dumps({"topicConfigTable": table}))
    topics = TopicConfigManager(path, [])
    assert topics.get("Bad") is None
    assert topics.get("Good") == TopicConfig("Good", 2, 2)
    assert topics.failures.total == 1


def test_a_compressed_body_that_inflates_past_the_limit_is_refused(
    server: BrokerServer, core: BrokerCore
) -> None:
    limit = core.store.cfg.max_message_size
    bomb = zlib.compress(b"\0" * (limit + 1), 9)
    with WireClient(server.address) as c:
        ext = {"a": "pg", "b": "T", "c": "TBW102", "d": 4, "e": 0, "f": 1,
               "g": int(time.time() * 1000), "h": 0, "i": "", "j": 0, "k": "false"}  # fmt: skip
        assert c.call(Rq.SEND_MESSAGE_V2, ext, bomb).code == Rs.MESSAGE_ILLEGAL
        fine = zlib.compress(b"\0" * limit, 9)
        assert c.call(Rq.SEND_MESSAGE_V2, ext, fine).code == Rs.SUCCESS


def test_a_send_back_copies_a_compressed_body_without_inflating_it(
    server: BrokerServer, core: BrokerCore
) -> None:
    packed = zlib.compress(b"hello " * 1000, 5)
    with WireClient(server.address) as c:
        ext = {"a": "pg", "b": "T", "c": "TBW102", "d": 4, "e": 0, "f": 1,
               "g": int(time.time() * 1000), "h": 0, "i": "", "j": 0, "k": "false"}  # fmt: skip
        stored = c.call(Rq.SEND_MESSAGE_V2, ext, packed)
        offset = int(stored.ext_fields["msgId"][-16:], 16)
        back = {"group": "g", "offset": offset, "delayLevel": 0, "originMsgId": ""}
        assert c.call(Rq.CONSUMER_SEND_MSG_BACK, back).code == Rs.SUCCESS
    # delay level 0: the broker's choice, level 3 + reconsume times: schedule queue 2
    until(lambda: core.store.max_offset_in_queue(SCHEDULE, 2) >= 1, what="the schedule copy")
    copy = core.store.get_message("g", SCHEDULE, 2, 0, 1)
    assert copy.messages and copy.messages[0].body == b"hello " * 1000
    unit = core.store.consume_queue(SCHEDULE, 2).unit_at(0)  # type: ignore[union-attr]
    assert unit is not None and unit[1] < len(b"hello " * 1000)  # stored compressed
