"""Admin requests (issue 25) over real TCP, decoded as RocketMQ's Java body classes
read them: field names and JSON types per ``TopicStatsTable``/``TopicOffset``,
``ConsumeStats``/``OffsetWrapper``, ``ConsumerConnection``/``Connection``/
``SubscriptionData``, ``ProducerConnection``, ``KVTable``, ``ResetOffsetBody`` and the
properties text of GET_BROKER_CONFIG. The test client is a raw remoting script, as
``mqadmin`` speaks to a broker."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.message_store import MessageStore
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from mqstore.remoting.fastjson import loads
from tests.broker.wire_client import WireClient
from tests.helpers import a_millisecond_between, until

pytestmark = pytest.mark.integration

MQ_FIELDS = {"brokerName": str, "queueId": int, "topic": str}


@pytest.fixture
def client(server: BrokerServer) -> Iterator[WireClient]:
    with WireClient(server.address) as c:
        yield c


def send(c: WireClient, topic: str, queue_id: int, n: int, store: MessageStore) -> None:
    for i in range(n):
        ext = {"a": "pg", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0,
               "g": int(time.time() * 1000), "h": 0, "i": "", "j": 0, "k": "false"}  # fmt: skip
        assert c.call(Rq.SEND_MESSAGE_V2, ext, b"m%d" % i).code == Rs.SUCCESS
    assert store.wait_dispatched(60)


def mq_keyed(text: str) -> list[tuple[dict[str, Any], Any]]:
    """Read fastjson's ``Map<MessageQueue, V>``: bean keys, unquoted."""
    dec = json.JSONDecoder()
    assert text[0] == "{"
    out, pos = [], 1
    while text[pos] != "}":
        key, pos = dec.raw_decode(text, pos)
        assert text[pos] == ":"
        value, pos = dec.raw_decode(text, pos + 1)
        out.append((key, value))
        if text[pos] == ",":
            pos += 1
    return out


def split_table(body: bytes, table: str = "offsetTable") -> tuple[str, str]:
    """(text before the mq-keyed table, the table's text) of a body ending with it."""
    text = body.decode()
    head, sep, rest = text.partition(f'"{table}":')
    assert sep and rest.endswith("}")
    return head, rest[:-1]


def check_types(obj: dict[str, Any], fields: dict[str, type]) -> None:
    assert set(obj) == set(fields)
    for name, kind in fields.items():
        assert type(obj[name]) is kind, (name, obj[name])


def heartbeat(cid: str, group: str = "g", producer: str | None = None) -> bytes:
    body: dict[str, Any] = {"clientID": cid, "consumerDataSet": [], "producerDataSet": []}
    if group:
        body["consumerDataSet"] = [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
            "subscriptionDataSet": [{"topic": "T", "subString": "A || B", "subVersion": 1}],
            "unitMode": False,
        }]  # fmt: skip
    if producer:
        body["producerDataSet"] = [{"groupName": producer}]
    return json.dumps(body).encode()


def commit(c: WireClient, group: str, topic: str, qid: int, offset: int) -> None:
    ext = {"consumerGroup": group, "topic": topic, "queueId": qid, "commitOffset": offset}
    assert c.call(Rq.UPDATE_CONSUMER_OFFSET, ext).code == Rs.SUCCESS


# ----------------------------------------------------------------- topic stats


def test_topic_stats_table_per_write_queue(client: WireClient, store: MessageStore) -> None:
    send(client, "T", 1, 3, store)
    r = client.call(Rq.GET_TOPIC_STATS_INFO, {"topic": "T"})
    assert r.code == Rs.SUCCESS
    head, table = split_table(r.body)
    assert head == "{"
    rows = {k["queueId"]: (k, v) for k, v in mq_keyed(table)}
    assert sorted(rows) == [0, 1, 2, 3]
    key, off = rows[1]
    check_types(key, MQ_FIELDS)
    assert key == {"brokerName": "broker-a", "queueId": 1, "topic": "T"}
    check_types(off, {"lastUpdateTimestamp": int, "maxOffset": int, "minOffset": int})
    assert (off["minOffset"], off["maxOffset"]) == (0, 3)
    assert abs(off["lastUpdateTimestamp"] - time.time() * 1000) < 60_000
    assert rows[0][1] == {"lastUpdateTimestamp": 0, "maxOffset": 0, "minOffset": 0}


@pytest.mark.parametrize(
    ("code", "ext", "answer"),
    [
        (Rq.GET_TOPIC_STATS_INFO, {"topic": "Nope"}, (Rs.TOPIC_NOT_EXIST, "topic[Nope] not exist")),
        (
            Rq.GET_CONSUMER_CONNECTION_LIST,
            {"consumerGroup": "none"},
            (Rs.CONSUMER_NOT_ONLINE, "the consumer group[none] not online"),
        ),
    ],
    ids=["topic-stats-of-an-unknown-topic", "connections-of-an-offline-group"],
)
def test_a_question_about_an_unknown_name_gets_rocketmqs_code_and_remark(
    client: WireClient, code: Rq, ext: dict[str, str], answer: tuple[Rs, str]
) -> None:
    r = client.call(code, ext)
    assert (r.code, r.remark) == answer


# --------------------------------------------------------------- consume stats


@pytest.fixture
def committed(client: WireClient, store: MessageStore) -> None:
    """Group ``g`` has committed offsets in topic T (queue 0 at 3 of 5 messages, queue 2
    at 4 of 4) and U (queue 0 at 1 of 2); topic V holds messages it has no offset in."""
    send(client, "T", 0, 5, store)
    send(client, "T", 2, 4, store)
    send(client, "U", 0, 2, store)
    send(client, "V", 0, 2, store)
    commit(client, "g", "T", 0, 3)
    commit(client, "g", "T", 2, 4)
    commit(client, "g", "U", 0, 1)


@pytest.mark.usefixtures("committed")
def test_consume_stats_lag_matches_committed_offsets(
    client: WireClient, store: MessageStore
) -> None:
    r = client.call(Rq.GET_CONSUME_STATS, {"consumerGroup": "g", "topic": "T"})
    assert r.code == Rs.SUCCESS
    head, table = split_table(r.body)
    assert head == '{"consumeTps":0.0,'
    rows = {k["queueId"]: v for k, v in mq_keyed(table)}
    fields = {"brokerOffset": int, "consumerOffset": int, "lastTimestamp": int, "pullOffset": int}
    for v in rows.values():
        check_types(v, fields)
    lag = {q: v["brokerOffset"] - v["consumerOffset"] for q, v in rows.items()}
    assert lag == {0: 2, 1: 0, 2: 0, 3: 0}
    assert rows[0]["lastTimestamp"] == store.message_store_timestamp("T", 0, 2)
    assert rows[1]["lastTimestamp"] == 0


@pytest.mark.usefixtures("committed")
def test_consume_stats_without_topic_covers_the_groups_topics(client: WireClient) -> None:
    r = client.call(Rq.GET_CONSUME_STATS, {"consumerGroup": "g"})
    _, table = split_table(r.body)
    assert {k["topic"] for k, _ in mq_keyed(table)} == {"T", "U"}


# ----------------------------------------------------------------- connections


def test_consumer_connection_list(client: WireClient) -> None:
    assert client.call(Rq.HEART_BEAT, body=heartbeat("c1")).code == Rs.SUCCESS
    r = client.call(Rq.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "g"})
    assert r.code == Rs.SUCCESS
    body = loads(r.body)
    assert set(body) == {"connectionSet", "consumeFromWhere", "consumeType", "messageModel",
                         "subscriptionTable"}  # fmt: skip
    (conn,) = body["connectionSet"]
    check_types(conn, {"clientAddr": str, "clientId": str, "language": str, "version": int})
    assert conn["clientId"] == "c1" and conn["language"] == "JAVA"
    assert conn["clientAddr"].startswith("127.0.0.1:")
    assert (body["consumeType"], body["messageModel"], body["consumeFromWhere"]) == (
        "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
    sub = body["subscriptionTable"]["T"]
    check_types(sub, {"classFilterMode": bool, "codeSet": list, "expressionType": str,
                      "subString": str, "subVersion": int, "tagsSet": list, "topic": str})  # fmt: skip
    assert sub["tagsSet"] == ["A", "B"] and sub["codeSet"] == [65, 66]


def test_producer_connection_list_tracks_producer_heartbeats(
    client: WireClient, server: BrokerServer
) -> None:
    client.call(Rq.HEART_BEAT, body=heartbeat("p1", group="", producer="PG"))
    r = client.call(Rq.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})
    assert r.code == Rs.SUCCESS
    (conn,) = loads(r.body)["connectionSet"]
    check_types(conn, {"clientAddr": str, "clientId": str, "language": str, "version": int})
    assert conn["clientId"] == "p1"


def test_producer_connection_goes_with_its_connection(server: BrokerServer) -> None:
    with WireClient(server.address) as p:
        p.call(Rq.HEART_BEAT, body=heartbeat("p1", group="", producer="PG"))
    with WireClient(server.address) as c:
        r: RemotingCommand = until(
            lambda: (
                (a := c.call(Rq.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})).code
                == Rs.SYSTEM_ERROR
                and a
            ),
            what="the group gone",
        )
        assert r.remark == "the producer group[PG] not exist"


# ---------------------------------------------------------- runtime and config


def test_runtime_info_is_a_kv_table_of_strings(client: WireClient, store: MessageStore) -> None:
    send(client, "T", 0, 1, store)
    r = client.call(Rq.GET_BROKER_RUNTIME_INFO)
    assert r.code == Rs.SUCCESS
    body = loads(r.body)
    assert set(body) == {"table"}
    table = body["table"]
    assert all(isinstance(v, str) for v in table.values())
    assert int(table["commitLogMaxOffset"]) == store.max_physical_offset
    assert int(table["bootTimestamp"]) <= time.time() * 1000
    assert table["runtime"].startswith("[ 0 days, 0 hours")


RUNTIME_KEYS_498 = frozenset(
    [
        "EndTransactionQueueSize",
        "EndTransactionThreadPoolQueueCapacity",
        "bootTimestamp",
        "brokerVersion",
        "brokerVersionDesc",
        "commitLogDirCapacity",
        "commitLogDiskRatio",
        "commitLogMaxOffset",
        "commitLogMinOffset",
        "consumeQueueDiskRatio",
        "dispatchBehindBytes",
        "dispatchMaxBuffer",
        "earliestMessageTimeStamp",
        "getFoundTps",
        "getMessageEntireTimeMax",
        "getMissTps",
        "getTotalTps",
        "getTransferedTps",
        "msgGetTotalTodayMorning",
        "msgGetTotalTodayNow",
        "msgGetTotalYesterdayMorning",
        "msgPutTotalTodayMorning",
        "msgPutTotalTodayNow",
        "msgPutTotalYesterdayMorning",
        "pageCacheLockTimeMills",
        "pullThreadPoolQueueCapacity",
        "pullThreadPoolQueueHeadWaitTimeMills",
        "pullThreadPoolQueueSize",
        "putLatency99",
        "putLatency999",
        "putMessageAverageSize",
        "putMessageDistributeTime",
        "putMessageEntireTimeMax",
        "putMessageFailedTimes",
        "putMessageSizeTotal",
        "putMessageTimesTotal",
        "putTps",
        "queryThreadPoolQueueCapacity",
        "queryThreadPoolQueueHeadWaitTimeMills",
        "queryThreadPoolQueueSize",
        "remainHowManyDataToFlush",
        "remainTransientStoreBufferNumbs",
        "runtime",
        "sendThreadPoolQueueCapacity",
        "sendThreadPoolQueueHeadWaitTimeMills",
        "sendThreadPoolQueueSize",
        "startAcceptSendRequestTimeStamp",
    ]
)
"""The keys of a 4.9.8 broker's GET_BROKER_RUNTIME_INFO table (read from the real one),
besides ``commitLogDiskRatio_<CommitLog dir>``."""


def test_runtime_info_has_the_keys_of_a_498_broker(client: WireClient, store: MessageStore) -> None:
    table = loads(client.call(Rq.GET_BROKER_RUNTIME_INFO).body)["table"]
    path_key = f"commitLogDiskRatio_{store.cfg.commitlog_path}"
    assert set(table) == RUNTIME_KEYS_498 | {path_key}
    assert table[path_key] == table["commitLogDiskRatio"]
    assert (table["brokerVersion"], table["brokerVersionDesc"]) == ("409", "V4_9_8")


def test_earliest_message_time_is_unknown_while_the_first_file_is_short(
    client: WireClient, store: MessageStore
) -> None:
    """4.9.8 reads 2 * maxMessageSize bytes from the first offset: -1 until a file
    holds that much (store files of the harness are far smaller than 8 MiB)."""
    send(client, "T", 0, 1, store)
    table = loads(client.call(Rq.GET_BROKER_RUNTIME_INFO).body)["table"]
    assert table["earliestMessageTimeStamp"] == "-1"


def test_earliest_message_time_is_the_first_message_once_the_file_holds_enough(
    tmp_path: Path,
) -> None:
    from mqstore.broker.admin import earliest_time_as_498
    from mqstore.message import Message
    from tests.helpers import make_store

    with make_store(tmp_path, max_message_size=256) as store:
        for _ in range(8):
            store.put_message(Message(topic="T", body=b"x" * 100))
        assert earliest_time_as_498(store) == store.earliest_message_time() > 0


def test_broker_config_lists_the_498_keys_in_the_java_order(client: WireClient) -> None:
    from mqstore.java_settings import BROKER_KEYS

    lines = client.call(Rq.GET_BROKER_CONFIG).body.decode().splitlines()
    keys = [line.split("=", 1)[0] for line in lines]
    assert keys == [k for k in BROKER_KEYS if k != "namesrvAddr"]  # none configured


def test_broker_config_is_properties_text(client: WireClient) -> None:
    r = client.call(26)
    assert r.code == Rs.SUCCESS
    props = dict(line.split("=", 1) for line in r.body.decode().splitlines())
    assert props["brokerName"] == "broker-a"
    assert props["brokerClusterName"] == "DefaultCluster"
    assert props["autoCreateTopicEnable"] == "true"
    assert set(json.loads(r.ext_fields["version"])) == {"counter", "timestamp"}


# ----------------------------------------------------------- subscription group


def test_update_subscription_group_is_persisted(client: WireClient, store: MessageStore) -> None:
    cfg = {"groupName": "G1", "consumeEnable": True, "consumeFromMinEnable": True,
           "consumeBroadcastEnable": True, "retryQueueNums": 2, "retryMaxTimes": 5,
           "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
           "notifyConsumerIdsChangedEnable": False}  # fmt: skip
    r = client.call(Rq.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(cfg).encode())
    assert r.code == Rs.SUCCESS
    saved = loads((Path(store.root) / "config" / "subscriptionGroup.json").read_text())
    entry = saved["subscriptionGroupTable"]["G1"]
    assert (entry["retryMaxTimes"], entry["retryQueueNums"]) == (5, 2)
    assert entry["notifyConsumerIdsChangedEnable"] is False


def test_update_subscription_group_without_a_name_is_a_system_error(client: WireClient) -> None:
    r = client.call(Rq.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"retryMaxTimes":1}')
    assert r.code == Rs.SYSTEM_ERROR


# ---------------------------------------------------------------- delete topic


def pull(c: WireClient, topic: str, offset: int = 0) -> RemotingCommand:
    ext = {"consumerGroup": "g", "topic": topic, "queueId": 0, "queueOffset": offset,
           "maxMsgNums": 32, "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0,
           "subscription": "*", "subVersion": 0}  # fmt: skip
    return c.call(Rq.PULL_MESSAGE, ext)


def test_delete_topic_removes_config_offsets_and_queue_files(
    client: WireClient, store: MessageStore, core: BrokerCore
) -> None:
    send(client, "D", 0, 3, store)
    commit(client, "g", "D", 0, 2)
    cq_dir = Path(store.root) / "consumequeue" / "D"
    assert cq_dir.is_dir()
    assert client.call(215, {"topic": "D"}).code == Rs.SUCCESS
    assert not cq_dir.exists()
    assert client.call(Rq.GET_TOPIC_STATS_INFO, {"topic": "D"}).code == Rs.TOPIC_NOT_EXIST
    assert pull(client, "D").code == Rs.TOPIC_NOT_EXIST
    assert not [k for k in core.offsets.table() if k.startswith("D@")]


def test_delete_topic_while_a_consumer_pulls(
    server: BrokerServer, client: WireClient, store: MessageStore
) -> None:
    send(client, "D", 0, 20, store)
    codes: list[int] = []
    stop = threading.Event()

    def consume() -> None:
        with WireClient(server.address) as c:
            while not stop.is_set():
                codes.append(pull(c, "D").code)

    t = threading.Thread(target=consume)
    t.start()
    until(lambda: Rs.SUCCESS in codes, what="a pull of the topic")
    assert client.call(215, {"topic": "D"}).code == Rs.SUCCESS
    deleted_at = len(codes)
    until(lambda: Rs.TOPIC_NOT_EXIST in codes[deleted_at:], what="a pull after the delete")
    stop.set()
    t.join(5)
    assert not t.is_alive()
    assert Rs.SUCCESS in codes
    assert codes[-1] == Rs.TOPIC_NOT_EXIST
    assert set(codes) <= {Rs.SUCCESS, Rs.TOPIC_NOT_EXIST, Rs.PULL_NOT_FOUND}
    send(client, "E", 0, 1, store)  # the broker still serves
    assert pull(client, "E").code == Rs.SUCCESS


# ---------------------------------------------------------------- reset offset


def test_reset_offset_by_time_pushes_to_the_online_consumer(
    client: WireClient, store: MessageStore
) -> None:
    send(client, "T", 0, 3, store)
    middle = a_millisecond_between()
    send(client, "T", 0, 3, store)
    for qid in range(4):
        commit(client, "g", "T", qid, 6 if qid == 0 else 0)
    client.call(Rq.HEART_BEAT, body=heartbeat("c1"))
    host, port = client.sock.getpeername()[:2]
    with WireClient(f"{host}:{port}") as admin:
        ext = {"topic": "T", "group": "g", "timestamp": middle, "isForce": "true"}
        r = admin.call(222, ext)
    assert r.code == Rs.SUCCESS
    head, table = split_table(r.body)
    assert head == "{"
    offsets = {k["queueId"]: v for k, v in mq_keyed(table)}
    assert offsets[0] == 3 and all(type(v) is int for v in offsets.values())
    pushed = client.wait_pushed()
    while pushed.code != Rq.RESET_CONSUMER_CLIENT_OFFSET:
        pushed = client.wait_pushed()
    assert pushed.ext_fields["group"] == "g" and pushed.ext_fields["isForce"] == "true"
    assert pushed.body == r.body
    q = {"consumerGroup": "g", "topic": "T", "queueId": 0}
    assert client.call(Rq.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "3"


def test_reset_offset_without_online_consumer(client: WireClient, store: MessageStore) -> None:
    send(client, "T", 0, 1, store)
    for qid in range(4):
        commit(client, "g", "T", qid, 0)
    ext = {"topic": "T", "group": "g", "timestamp": 0, "isForce": "false"}
    r = client.call(222, ext)
    assert r.code == Rs.CONSUMER_NOT_ONLINE
    assert r.remark.startswith("Consumer not online, so can not reset offset, Group: g")


def test_reset_offset_of_a_group_without_offsets_is_a_system_error(
    client: WireClient, store: MessageStore
) -> None:
    send(client, "T", 0, 1, store)
    r = client.call(222, {"topic": "T", "group": "g", "timestamp": 0, "isForce": "true"})
    assert (r.code, r.remark) == (Rs.SYSTEM_ERROR, "THe consumer group <g> not exist")


def test_a_deleted_topic_created_again_starts_empty(
    client: WireClient, store: MessageStore
) -> None:
    send(client, "D", 0, 3, store)
    assert client.call(215, {"topic": "D"}).code == Rs.SUCCESS
    ext = {"topic": "D", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
    assert client.call(Rq.UPDATE_AND_CREATE_TOPIC, ext).code == Rs.SUCCESS
    r = pull(client, "D")
    assert r.code == Rs.PULL_NOT_FOUND  # NO_MATCHED_LOGIC_QUEUE in the store: nothing old
    assert r.ext_fields["maxOffset"] == "0"


def test_runtime_info_counts_puts_and_pulled_messages(
    client: WireClient, store: MessageStore
) -> None:
    send(client, "T", 0, 4, store)
    assert pull(client, "T").code == Rs.SUCCESS
    table = loads(client.call(Rq.GET_BROKER_RUNTIME_INFO).body)["table"]
    assert (table["msgPutTotalTodayNow"], table["msgGetTotalTodayNow"]) == ("4", "4")
    put_tps = [float(x) for x in table["putTps"].split(" ")]
    assert len(put_tps) == 3 and put_tps[0] > 0
    assert len(table["getTransferedTps"].split(" ")) == 3


def test_delete_topic_is_refused_when_a_dispatch_child_owns_the_queues(tmp_path: Path) -> None:
    from mqstore.broker.core import BrokerConfig
    from tests.helpers import make_store

    with make_store(tmp_path, dispatch_process=True) as store:
        core = BrokerCore(store, BrokerConfig())
        srv = BrokerServer(core, host="127.0.0.1", port=0)
        srv.start()
        try:
            with WireClient(srv.address) as c:
                send(c, "D", 0, 2, store)
                r = c.call(215, {"topic": "D"})
                assert r.code == Rs.SYSTEM_ERROR and "dispatch_process" in (r.remark or "")
                assert c.call(Rq.GET_TOPIC_STATS_INFO, {"topic": "D"}).code == Rs.SUCCESS
        finally:
            srv.stop()
            core.shutdown()


def test_a_silent_client_connection_expires() -> None:
    from mqstore.broker.connections import ConnectionTable

    now = [0]
    table = ConnectionTable(clock=lambda: now[0])
    table.heartbeat("p1", ("PG",), object(), "127.0.0.1:1", "JAVA", 1)  # type: ignore[arg-type]
    now[0] = 60_000
    table.heartbeat("p2", ("PG",), object(), "127.0.0.1:2", "JAVA", 1)  # type: ignore[arg-type]
    now[0] = 120_001
    assert table.scan_expired(120_000) == ["p1"]
    assert [c.client_id for c in table.producers("PG")] == ["p2"]


def test_connections_of_client_ids_are_the_known_ones_in_the_order_asked() -> None:
    from mqstore.broker.connections import ConnectionTable

    table = ConnectionTable(clock=lambda: 0)
    for cid in ("b", "a"):
        table.heartbeat(cid, (), object(), "127.0.0.1:1", "JAVA", 1)  # type: ignore[arg-type]
    assert [c.client_id for c in table.clients(["a", "gone", "b"])] == ["a", "b"]


def test_topic_created_with_a_message_type_keeps_it_across_updates_without_attributes(
    client: WireClient, server: BrokerServer
) -> None:
    ext = {"topic": "Typed", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
           "attributes": "+message.type=FIFO"}  # fmt: skip
    assert client.call(Rq.UPDATE_AND_CREATE_TOPIC, ext).code == Rs.SUCCESS
    del ext["attributes"]  # a 4.9.8 mqadmin sends none: the type stays (5.x merges)
    ext["readQueueNums"] = 4
    assert client.call(Rq.UPDATE_AND_CREATE_TOPIC, ext).code == Rs.SUCCESS
    tc = server.core.topics.get("Typed")
    assert tc is not None and (tc.read_queue_nums, tc.message_type) == (4, "FIFO")
    bad = {**ext, "attributes": "+message.type=ODD"}
    assert client.call(Rq.UPDATE_AND_CREATE_TOPIC, bad).code == Rs.SYSTEM_ERROR
