"""BrokerServer over real TCP: every processor through raw remoting frames."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.broker.wire import encode_batch
from mqstore.commitlog import format as fmt
from mqstore.config import FlushDiskType
from mqstore.message import Message
from mqstore.message_store import MessageStore
from mqstore.remoting.codec import RemotingCommand, encode
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from mqstore.remoting.codes import SerializeType
from mqstore.remoting.fastjson import loads
from tests.broker.wire_client import WireClient
from tests.helpers import make_store, until

pytestmark = pytest.mark.integration


@pytest.fixture
def client(server: BrokerServer) -> Iterator[WireClient]:
    with WireClient(server.address) as c:
        yield c


def send_v2(
    c: WireClient, body: bytes, topic: str = "T", queue_id: int = 0, props: str = ""
) -> RemotingCommand:
    ext = {"a": "pg", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0,
           "g": int(time.time() * 1000), "h": 0, "i": props, "j": 0, "k": "false"}  # fmt: skip
    return c.call(Rq.SEND_MESSAGE_V2, ext, body)


def pull_ext(
    offset: int, topic: str = "T", sys_flag: int = 0, suspend: int = 0, sub: str = "*"
) -> dict[str, object]:
    return {"consumerGroup": "g", "topic": topic, "queueId": 0, "queueOffset": offset,
            "maxMsgNums": 32, "sysFlag": sys_flag, "commitOffset": 0,
            "suspendTimeoutMillis": suspend, "subscription": sub, "subVersion": 0}  # fmt: skip


def records(body: bytes) -> list[fmt.MessageRecord]:
    out, pos = [], 0
    while pos < len(body):
        size = int.from_bytes(body[pos : pos + 4], "big")
        r = fmt.decode(memoryview(body[pos : pos + size]), 0)
        assert isinstance(r, fmt.Record), r
        out.append(r.record)
        pos += size
    return out


def test_send_v2_answers_msg_id_and_queue_offset(client: WireClient) -> None:
    r = send_v2(client, b"hello", props="TAGS\x01A\x02")
    assert r.code == Rs.SUCCESS
    assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("0", "0")
    assert len(r.ext_fields["msgId"]) == 32


def test_send_v1_with_long_header_names(client: WireClient, store: MessageStore) -> None:
    ext = {"producerGroup": "pg", "topic": "T1", "defaultTopic": "TBW102",
           "defaultTopicQueueNums": 4, "queueId": 1, "sysFlag": 0, "bornTimestamp": 1,
           "flag": 0, "properties": "KEYS\x01k1\x02", "reconsumeTimes": 0}  # fmt: skip
    r = client.call(Rq.SEND_MESSAGE, ext, b"v1")
    assert r.code == Rs.SUCCESS
    store.wait_dispatched(60)
    assert store.get_message("g", "T1", 1, 0).messages[0].keys == ["k1"]


def test_batch_send_stores_every_message(client: WireClient, store: MessageStore) -> None:
    body = encode_batch([(0, b"a", "UNIQ_KEY\x01U1\x02"), (0, b"b", "UNIQ_KEY\x01U2\x02")])
    ext = {"a": "pg", "b": "T", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0,
           "i": "", "j": 0, "k": "false", "m": "true"}  # fmt: skip
    r = client.call(Rq.SEND_BATCH_MESSAGE, ext, body)
    assert r.code == Rs.SUCCESS
    assert len(r.ext_fields["msgId"].split(",")) == 2
    store.wait_dispatched(60)
    got = store.get_message("g", "T", 0, 0).messages
    assert [(m.body, m.uniq_key) for m in got] == [(b"a", "U1"), (b"b", "U2")]


def test_pull_found_body_is_the_raw_records(client: WireClient, store: MessageStore) -> None:
    send_v2(client, b"one")
    send_v2(client, b"two")
    store.wait_dispatched(60)
    r = client.call(Rq.PULL_MESSAGE, pull_ext(0))
    assert r.code == Rs.SUCCESS
    assert [rec.body for rec in records(r.body)] == [b"one", b"two"]
    assert r.ext_fields["nextBeginOffset"] == "2"


@pytest.mark.parametrize(
    ("offset", "code", "next_offset"),
    [(0, Rs.PULL_NOT_FOUND, "0"), (3, Rs.PULL_OFFSET_MOVED, "0")],
)
def test_pull_of_an_empty_queue(
    client: WireClient, offset: int, code: Rs, next_offset: str
) -> None:
    client.call(Rq.UPDATE_AND_CREATE_TOPIC, {"topic": "Empty"})
    r = client.call(Rq.PULL_MESSAGE, pull_ext(offset, topic="Empty"))
    assert (r.code, r.ext_fields["nextBeginOffset"]) == (code, next_offset)


@pytest.mark.parametrize(
    ("offset", "sub", "code", "next_offset"),
    [
        (2, "*", Rs.PULL_NOT_FOUND, "2"),
        (9, "*", Rs.PULL_OFFSET_MOVED, "2"),
        (0, "Nope", Rs.PULL_RETRY_IMMEDIATELY, "2"),
        (0, "A", Rs.SUCCESS, "2"),
    ],
)
def test_pull_codes_and_next_offsets_carry_every_header(
    client: WireClient, store: MessageStore, offset: int, sub: str, code: Rs, next_offset: str
) -> None:
    send_v2(client, b"x", props="TAGS\x01A\x02")
    send_v2(client, b"y", props="TAGS\x01A\x02")
    store.wait_dispatched(60)
    r = client.call(Rq.PULL_MESSAGE, pull_ext(offset, sys_flag=0x4, sub=sub))
    assert (r.code, r.ext_fields["nextBeginOffset"]) == (code, next_offset)
    assert {
        "minOffset": "0",
        "maxOffset": "2",
        "suggestWhichBrokerId": "0",
    }.items() <= r.ext_fields.items()


def test_long_poll_is_answered_by_a_send_not_by_a_timer(tmp_path: Path) -> None:
    # the periodic re-check of held pulls and the suspend are 120 s away: within the
    # test, only the send's wake-up can answer the held pull
    with make_store(tmp_path) as store:
        core = BrokerCore(store, BrokerConfig(hold_check_interval_ms=120_000))
        core.start()
        server = BrokerServer(core, host="127.0.0.1", port=0)
        server.start()
        try:
            with WireClient(server.address) as client, WireClient(server.address) as producer:
                send_v2(producer, b"warm-up", queue_id=1)  # topic created, connection warm
                opaque = client.request(Rq.PULL_MESSAGE, pull_ext(0, sys_flag=0x2, suspend=120_000))
                until(lambda: core.hold.held_count, step=0.005, what="the pull held")
                t0 = time.perf_counter()
                assert send_v2(producer, b"wake").code == Rs.SUCCESS
                r = client.wait_response(opaque)
                latency_ms = (time.perf_counter() - t0) * 1000
            print(f"long poll over TCP answered {latency_ms:.2f} ms after the send started")
            assert r.code == Rs.SUCCESS
        finally:
            server.stop()
            core.shutdown()


def test_consumer_offsets_update_then_query(client: WireClient) -> None:
    ext = {"consumerGroup": "g", "topic": "T", "queueId": 0}
    assert client.call(Rq.UPDATE_CONSUMER_OFFSET, {**ext, "commitOffset": 5}).code == Rs.SUCCESS
    r = client.call(Rq.QUERY_CONSUMER_OFFSET, ext)
    assert (r.code, r.ext_fields["offset"]) == (Rs.SUCCESS, "5")


def test_pull_of_a_topic_without_config_over_tcp_is_topic_not_exist(client: WireClient) -> None:
    r = client.call(Rq.PULL_MESSAGE, pull_ext(0, topic="Nowhere"))
    assert (r.code, r.remark) == (
        Rs.TOPIC_NOT_EXIST,
        "topic[Nowhere] not exist, apply first please!",
    )


def test_pull_of_a_queue_id_past_the_read_queues_over_tcp_is_system_error(
    client: WireClient,
) -> None:
    client.call(Rq.UPDATE_AND_CREATE_TOPIC, {"topic": "Two", "readQueueNums": 2})
    r = client.call(Rq.PULL_MESSAGE, {**pull_ext(0, topic="Two"), "queueId": 2})
    assert r.code == Rs.SYSTEM_ERROR
    assert r.remark is not None
    assert r.remark.startswith("queueId[2] is illegal, topic:[Two] topicConfig.readQueueNums:[2]")


def test_pull_of_a_queue_id_outside_the_java_int_range_over_tcp_is_one_system_error(
    client: WireClient,
) -> None:
    client.call(Rq.UPDATE_AND_CREATE_TOPIC, {"topic": "Empty"})
    r = client.call(Rq.PULL_MESSAGE, {**pull_ext(0, topic="Empty"), "queueId": 2**31})
    assert (r.code, r.remark) == (
        Rs.SYSTEM_ERROR,
        "the custom field <queueId> is illegal: queue_id 2147483648 outside the Java int range",
    )
    assert client.call(Rq.PULL_MESSAGE, pull_ext(0, topic="Empty")).code == Rs.PULL_NOT_FOUND


def test_update_offset_of_an_illegal_topic_name_is_topic_not_exist(client: WireClient) -> None:
    ext = {"consumerGroup": "g", "topic": "a/../b", "queueId": 0, "commitOffset": 5}
    assert client.call(Rq.UPDATE_CONSUMER_OFFSET, ext).code == Rs.TOPIC_NOT_EXIST


def test_update_offset_of_an_illegal_topic_name_stores_nothing(
    core: BrokerCore, client: WireClient
) -> None:
    ext = {"consumerGroup": "g", "topic": "x@y", "queueId": 0, "commitOffset": 5}
    client.call(Rq.UPDATE_CONSUMER_OFFSET, ext)
    assert core.offsets.table() == {}


def test_query_offset_not_found_when_the_first_message_left_memory(
    core: BrokerCore, client: WireClient, store: MessageStore
) -> None:
    send_v2(client, b"a")
    send_v2(client, b"b")
    store.wait_dispatched(60)
    core.queries._memory_limit = 0
    r = client.call(Rq.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "T", "queueId": 0})
    assert r.code == Rs.QUERY_NOT_FOUND


def test_max_min_search_and_earliest_time(client: WireClient, store: MessageStore) -> None:
    before = int(time.time() * 1000) - 1000
    send_v2(client, b"a")
    send_v2(client, b"b")
    store.wait_dispatched(60)
    q = {"topic": "T", "queueId": 0}
    assert client.call(Rq.GET_MAX_OFFSET, q).ext_fields["offset"] == "2"
    assert client.call(Rq.GET_MIN_OFFSET, q).ext_fields["offset"] == "0"
    assert (
        client.call(Rq.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": before}).ext_fields["offset"]
        == "0"
    )
    assert int(client.call(Rq.GET_EARLIEST_MSG_STORETIME, q).ext_fields["timestamp"]) >= before


def test_view_message_by_physical_offset(client: WireClient, store: MessageStore) -> None:
    msg_id = send_v2(client, b"viewed").ext_fields["msgId"]
    r = client.call(Rq.VIEW_MESSAGE_BY_ID, {"offset": int(msg_id[16:], 16)})
    assert r.code == Rs.SUCCESS
    assert records(r.body)[0].body == b"viewed"


def test_query_message_by_key(client: WireClient, store: MessageStore) -> None:
    send_v2(client, b"keyed", props="KEYS\x01order-7\x02")
    store.wait_dispatched(60)
    ext = {"topic": "T", "key": "order-7", "maxNum": 32, "beginTimestamp": 0,
           "endTimestamp": 2**62}  # fmt: skip
    r = client.call(Rq.QUERY_MESSAGE, ext)
    assert r.code == Rs.SUCCESS
    assert records(r.body)[0].body == b"keyed"
    assert client.call(Rq.QUERY_MESSAGE, {**ext, "key": "absent"}).code == Rs.QUERY_NOT_FOUND


def heartbeat(cid: str, group: str = "g") -> bytes:
    consumer = {
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "consumeType": "CONSUME_PASSIVELY",
        "groupName": group,
        "messageModel": "CLUSTERING",
        "subscriptionDataSet": [{"subString": "*", "topic": "T"}],
        "unitMode": False,
    }
    doc = {"clientID": cid, "consumerDataSet": [consumer], "producerDataSet": []}
    return json.dumps(doc).encode()


def test_second_consumer_heartbeat_notifies_the_first(
    server: BrokerServer, client: WireClient
) -> None:
    assert client.call(Rq.HEART_BEAT, body=heartbeat("A")).code == Rs.SUCCESS
    client.pushed.clear()
    with WireClient(server.address) as other:
        assert other.call(Rq.HEART_BEAT, body=heartbeat("B")).code == Rs.SUCCESS
        note = client.wait_pushed()
        assert note.code == Rq.NOTIFY_CONSUMER_IDS_CHANGED
        assert note.ext_fields == {"consumerGroup": "g"} and note.is_oneway
        r = client.call(Rq.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g"})
        assert sorted(loads(r.body)["consumerIdList"]) == ["A", "B"]


def test_closed_connection_leaves_the_group_and_notifies(
    server: BrokerServer, client: WireClient
) -> None:
    client.call(Rq.HEART_BEAT, body=heartbeat("A"))
    other = WireClient(server.address)
    other.call(Rq.HEART_BEAT, body=heartbeat("B"))
    client.pushed.clear()
    assert client.wait_pushed().code == Rq.NOTIFY_CONSUMER_IDS_CHANGED  # B joined
    other.close()
    assert client.wait_pushed().code == Rq.NOTIFY_CONSUMER_IDS_CHANGED
    r = client.call(Rq.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g"})
    assert loads(r.body)["consumerIdList"] == ["A"]


def test_consumer_list_of_an_unknown_group_is_a_system_error(client: WireClient) -> None:
    assert (
        client.call(Rq.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "x"}).code == Rs.SYSTEM_ERROR
    )


def test_unregister_client_leaves_the_group(client: WireClient) -> None:
    client.call(Rq.HEART_BEAT, body=heartbeat("A"))
    ext = {"clientID": "A", "consumerGroup": "g"}
    assert client.call(Rq.UNREGISTER_CLIENT, ext).code == Rs.SUCCESS
    assert (
        client.call(Rq.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g"}).code == Rs.SYSTEM_ERROR
    )


def lock_body(cid: str) -> bytes:
    mq = {"brokerName": "broker-a", "queueId": 0, "topic": "T"}
    return json.dumps({"clientId": cid, "consumerGroup": "g", "mqSet": [mq]}).encode()


def test_lock_batch_grants_to_one_client_only(client: WireClient) -> None:
    r = client.call(Rq.LOCK_BATCH_MQ, body=lock_body("A"))
    assert loads(r.body)["lockOKMQSet"] == [{"brokerName": "broker-a", "queueId": 0, "topic": "T"}]
    assert loads(client.call(Rq.LOCK_BATCH_MQ, body=lock_body("B")).body)["lockOKMQSet"] == []
    assert client.call(Rq.UNLOCK_BATCH_MQ, body=lock_body("A")).code == Rs.SUCCESS
    assert len(loads(client.call(Rq.LOCK_BATCH_MQ, body=lock_body("B")).body)["lockOKMQSet"]) == 1


def test_send_back_past_max_lands_in_the_dlq(client: WireClient, store: MessageStore) -> None:
    msg_id = send_v2(client, b"poison").ext_fields["msgId"]
    ext = {"offset": int(msg_id[16:], 16), "group": "g", "delayLevel": 0,
           "originMsgId": msg_id, "originTopic": "T", "maxReconsumeTimes": 0}  # fmt: skip
    assert client.call(Rq.CONSUMER_SEND_MSG_BACK, ext).code == Rs.SUCCESS
    store.wait_dispatched(60)
    assert store.get_message("g", "%DLQ%g", 0, 0).messages[0].body == b"poison"


def test_send_back_with_a_malformed_max_reconsume_times_is_a_system_error(
    client: WireClient,
) -> None:
    msg_id = send_v2(client, b"x").ext_fields["msgId"]
    ext = {"offset": int(msg_id[16:], 16), "group": "g", "maxReconsumeTimes": "lots"}
    r = client.call(Rq.CONSUMER_SEND_MSG_BACK, ext)
    assert (r.code, r.remark) == (
        Rs.SYSTEM_ERROR,
        "the custom field <maxReconsumeTimes> is not a number: 'lots'",
    )


def test_route_of_a_topic_uses_unquoted_broker_id_keys(
    server: BrokerServer, client: WireClient
) -> None:
    send_v2(client, b"x")
    r = client.call(Rq.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert r.code == Rs.SUCCESS
    assert b'"brokerAddrs":{0:"' + server.address.encode() in r.body
    route = loads(r.body)
    assert route["queueDatas"][0]["readQueueNums"] == 4


def test_route_in_standard_json_when_asked(client: WireClient) -> None:
    r = client.call(
        Rq.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102", "acceptStandardJsonOnly": "true"}
    )
    assert b'"brokerAddrs":{"0":' in r.body


def test_route_of_an_unknown_topic_is_topic_not_exist(client: WireClient) -> None:
    assert client.call(Rq.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"}).code == Rs.TOPIC_NOT_EXIST


def test_cluster_info_names_this_broker(server: BrokerServer, client: WireClient) -> None:
    info = loads(client.call(Rq.GET_BROKER_CLUSTER_INFO).body)
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {0: server.address}


def test_update_and_create_topic(client: WireClient) -> None:
    ext = {"topic": "Made", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
    assert client.call(Rq.UPDATE_AND_CREATE_TOPIC, ext).code == Rs.SUCCESS
    route = loads(client.call(Rq.GET_ROUTEINFO_BY_TOPIC, {"topic": "Made"}).body)
    assert route["queueDatas"][0]["writeQueueNums"] == 2


def test_unknown_request_code_is_not_supported(client: WireClient) -> None:
    assert client.call(12345).code == Rs.REQUEST_CODE_NOT_SUPPORTED


def test_missing_header_field_is_a_system_error_not_a_disconnect(client: WireClient) -> None:
    assert client.call(Rq.GET_MAX_OFFSET, {"topic": "T"}).code == Rs.SYSTEM_ERROR
    assert client.call(Rq.GET_MAX_OFFSET, {"topic": "T", "queueId": 0}).code == Rs.SUCCESS


def test_oneway_request_gets_no_response(client: WireClient) -> None:
    ext = {"consumerGroup": "g", "topic": "T", "queueId": 0, "commitOffset": 3}
    client.request(Rq.UPDATE_CONSUMER_OFFSET, ext, oneway=True)
    r = client.call(Rq.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "T", "queueId": 0})
    assert r.ext_fields["offset"] == "3"
    assert client.responses == {}


def test_message_stored_through_the_store_api_is_pullable_over_tcp(
    client: WireClient, store: MessageStore
) -> None:
    store.put_message(Message("T", b"embedded"))
    store.wait_dispatched(60)
    assert records(client.call(Rq.PULL_MESSAGE, pull_ext(0)).body)[0].body == b"embedded"


def test_pooled_requests_answer_the_same_as_inline_ones(server: BrokerServer) -> None:
    server.inline_codes = frozenset()  # every request through the thread pool
    with WireClient(server.address) as c:
        ext = {"consumerGroup": "g", "topic": "T", "queueId": 0, "commitOffset": 4}
        c.request(Rq.UPDATE_CONSUMER_OFFSET, ext, oneway=True)
        assert send_v2(c, b"pooled").code == Rs.SUCCESS
        r = c.call(Rq.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "T", "queueId": 0})
        assert r.ext_fields["offset"] == "4"
        server.core.store.wait_dispatched(60)
        assert records(c.call(Rq.PULL_MESSAGE, pull_ext(0)).body)[0].body == b"pooled"


def test_topic_list_from_the_name_server(client: WireClient) -> None:
    send_v2(client, b"x", topic="Listed")
    assert "Listed" in loads(client.call(Rq.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body)["topicList"]


def test_kv_config_is_not_found(client: WireClient) -> None:
    ext = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}
    assert client.call(Rq.GET_KV_CONFIG, ext).code == Rs.QUERY_NOT_FOUND


def test_binary_header_request_gets_a_binary_header_response(server: BrokerServer) -> None:
    with WireClient(server.address) as c:
        cmd = RemotingCommand(
            code=Rq.GET_MAX_OFFSET,
            opaque=77,
            ext_fields={"topic": "T", "queueId": "0"},
            serialize_type=SerializeType.ROCKETMQ,
        )
        c.send_raw(encode(cmd))
        r = c.wait_response(77)
        assert (r.code, r.serialize_type, r.ext_fields["offset"]) == (
            Rs.SUCCESS,
            SerializeType.ROCKETMQ,
            "0",
        )


def test_pull_without_subscription_flag_uses_the_heartbeat_subscription(
    client: WireClient, store: MessageStore
) -> None:
    doc = json.loads(heartbeat("A"))
    doc["consumerDataSet"][0]["subscriptionDataSet"][0]["subString"] = "B"
    client.call(Rq.HEART_BEAT, body=json.dumps(doc).encode())
    send_v2(client, b"a", props="TAGS\x01A\x02")
    send_v2(client, b"b", props="TAGS\x01B\x02")
    store.wait_dispatched(60)
    r = client.call(Rq.PULL_MESSAGE, pull_ext(0, sys_flag=0, sub="ignored"))
    assert [rec.body for rec in records(r.body)] == [b"b"]


def test_send_to_a_read_only_topic_has_no_permission(client: WireClient) -> None:
    ext = {"topic": "RO", "readQueueNums": 1, "writeQueueNums": 1, "perm": 4}
    client.call(Rq.UPDATE_AND_CREATE_TOPIC, ext)
    assert send_v2(client, b"x", topic="RO").code == Rs.NO_PERMISSION


def test_sync_flush_broker_sends_through_the_pool_and_acks_after_the_flush(
    tmp_path: Path,
) -> None:
    store = make_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    core = BrokerCore(store)
    try:
        with BrokerServer(core, port=0) as srv, WireClient(srv.address) as c:
            assert Rq.SEND_MESSAGE_V2 not in srv.inline_codes
            r = send_v2(c, b"durable")
            assert r.code == Rs.SUCCESS
            assert store.flushed_physical_offset >= int(r.ext_fields["msgId"][16:], 16)
    finally:
        core.shutdown()
        store.close()
