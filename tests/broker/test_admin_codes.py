"""The admin codes served since issue 37 (docs/admin.md §12-17), one behaviour each,
over real TCP with a raw remoting client, bodies read as the Java admin's classes read
them: UPDATE_BROKER_CONFIG (25), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
DELETE_SUBSCRIPTIONGROUP (207), QUERY_TOPIC_CONSUME_BY_WHO (300),
GET_CONSUMER_RUNNING_INFO (307, relayed to a client), VIEW_BROKER_STATS_DATA (315),
GET_BROKER_CONSUME_STATS (317), QUERY_CONSUME_QUEUE (321); on the name server
DELETE_TOPIC_IN_NAMESRV (216) and GET_NAMESRV_CONFIG (319)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.broker.topics import TopicConfig
from mqstore.client.consumer import ConsumeConcurrentlyStatus, ConsumerConfig, PushConsumer
from mqstore.client.remote import RemoteTransport
from mqstore.message import Message
from mqstore.message_store import MessageStore
from mqstore.namesrv.routes import Registration
from mqstore.namesrv.server import NameServer
from mqstore.remoting.codec import encode
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from mqstore.remoting.fastjson import loads
from tests.broker.test_admin import commit, heartbeat, mq_keyed, send, split_table
from tests.broker.wire_client import WireClient
from tests.helpers import make_store, until

pytestmark = pytest.mark.integration


@pytest.fixture
def client(server: BrokerServer) -> Iterator[WireClient]:
    with WireClient(server.address) as c:
        yield c


# --------------------------------------------------------- 25: broker config


def test_update_broker_config_applies_a_live_key_and_get_config_shows_it(
    client: WireClient, core: BrokerCore
) -> None:
    body = b"longPollingEnable=false\nnoSuchKey=1\n"
    assert client.call(Rq.UPDATE_BROKER_CONFIG, body=body).code == Rs.SUCCESS
    assert core.config.long_polling_enable is False
    props = client.call(Rq.GET_BROKER_CONFIG).body.decode()
    assert "longPollingEnable=false\n" in props and "noSuchKey" not in props


def test_broker_config_names_the_store_settings_under_their_498_keys(
    client: WireClient, store: MessageStore
) -> None:
    props = dict(
        line.split("=", 1) for line in client.call(Rq.GET_BROKER_CONFIG).body.decode().splitlines()
    )
    cfg = store.cfg
    assert props["cleanResourceInterval"] == str(cfg.clean_resource_interval_ms)
    assert props["maxTransferCountOnMessageInMemory"] == "32"
    assert props["haSlaveFallbehindMax"] == str(cfg.ha_slave_fallbehind_max)
    assert props["transactionCheckMax"] == "15" and props["brokerIP1"] == "127.0.0.1"


def test_update_broker_config_with_a_bad_value_changes_nothing(
    client: WireClient, core: BrokerCore
) -> None:
    r = client.call(Rq.UPDATE_BROKER_CONFIG, body=b"shortPollingTimeMills=soon\n")
    assert (r.code, r.remark) == (Rs.SYSTEM_ERROR, "shortPollingTimeMills: not an integer: soon")
    assert core.config.short_polling_time_ms == 1000


# --------------------------------------------------- 21, 201, 207, 305: tables


def test_system_topic_list_names_the_topics_a_broker_starts_with(client: WireClient) -> None:
    client.call(Rq.UPDATE_AND_CREATE_TOPIC, {"topic": "Mine", "readQueueNums": 1,
                                             "writeQueueNums": 1, "perm": 6})  # fmt: skip
    r = client.call(305)
    assert r.code == Rs.SUCCESS
    topics = set(loads(r.body)["topicList"])
    assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "DefaultCluster", "broker-a"} <= topics
    assert "Mine" not in topics


def test_all_topic_configs_list_the_system_topics_and_created_ones(client: WireClient) -> None:
    ext = {"topic": "T1", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
    assert client.call(Rq.UPDATE_AND_CREATE_TOPIC, ext).code == Rs.SUCCESS
    r = client.call(Rq.GET_ALL_TOPIC_CONFIG)
    assert r.code == Rs.SUCCESS
    body = loads(r.body)
    assert set(body) == {"dataVersion", "topicConfigTable"}
    table = body["topicConfigTable"]
    assert {"TBW102", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC", "T1"} <= set(table)
    assert (table["T1"]["readQueueNums"], table["T1"]["perm"]) == (2, 6)


def test_all_subscription_groups_list_the_system_groups_and_created_ones(
    client: WireClient,
) -> None:
    cfg = b'{"groupName":"G1","retryMaxTimes":3}'
    assert client.call(Rq.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=cfg).code == Rs.SUCCESS
    r = client.call(Rq.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert r.code == Rs.SUCCESS
    body = loads(r.body)
    assert set(body) == {"dataVersion", "subscriptionGroupTable"}
    assert set(body["dataVersion"]) == {"counter", "timestamp"}
    table = body["subscriptionGroupTable"]
    assert {"TOOLS_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONSAPI_OWNER", "G1"} <= set(table)
    assert table["G1"]["retryMaxTimes"] == 3 and table["G1"]["groupName"] == "G1"


def test_delete_subscription_group_with_remove_offset_drops_config_and_offsets(
    client: WireClient, core: BrokerCore, store: MessageStore
) -> None:
    send(client, "T", 0, 2, store)
    commit(client, "G2", "T", 0, 2)
    client.call(Rq.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"G2"}')
    ext = {"groupName": "G2", "removeOffset": "true"}
    assert client.call(Rq.DELETE_SUBSCRIPTIONGROUP, ext).code == Rs.SUCCESS
    assert core.groups.get("G2") is None
    assert core.offsets.query("G2", "T", 0) is None


def test_delete_subscription_group_keeps_offsets_by_default(
    client: WireClient, core: BrokerCore, store: MessageStore
) -> None:
    send(client, "T", 0, 2, store)
    commit(client, "G3", "T", 0, 2)
    assert client.call(Rq.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G3"}).code == Rs.SUCCESS
    assert core.offsets.query("G3", "T", 0) == 2


# ------------------------------------------------------------- 300: who consumes


def test_topic_consumed_by_online_subscribers_and_groups_with_offsets(
    client: WireClient, store: MessageStore
) -> None:
    send(client, "T", 0, 1, store)
    commit(client, "offline", "T", 0, 1)
    assert client.call(Rq.HEART_BEAT, body=heartbeat("c1", group="online")).code == Rs.SUCCESS
    r = client.call(Rq.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"})
    assert r.code == Rs.SUCCESS
    assert loads(r.body) == {"groupList": ["offline", "online"]}


# ------------------------------------------------------------ 315: stats items


def test_stats_data_counts_a_topics_puts_and_a_groups_pulled_messages(
    client: WireClient, store: MessageStore
) -> None:
    send(client, "T", 0, 3, store)
    ext = {"consumerGroup": "g", "topic": "T", "queueId": 0, "queueOffset": 0,
           "maxMsgNums": 32, "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0,
           "subscription": "*", "subVersion": 0}  # fmt: skip
    assert client.call(Rq.PULL_MESSAGE, ext).code == Rs.SUCCESS
    for name, key in (("TOPIC_PUT_NUMS", "T"), ("GROUP_GET_NUMS", "T@g")):
        r = client.call(Rq.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
        assert r.code == Rs.SUCCESS, r.remark
        body = loads(r.body)
        assert set(body) == {"statsDay", "statsHour", "statsMinute"}
        for item in body.values():
            assert set(item) == {"avgpt", "sum", "tps"} and item["sum"] == 3
        assert body["statsMinute"]["tps"] > 0


def test_stats_data_of_an_item_never_counted_is_rocketmqs_error(client: WireClient) -> None:
    r = client.call(Rq.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "X"})
    assert (r.code, r.remark) == (Rs.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <X> not exist")


# ------------------------------------------------------- 317: broker consume stats


def test_broker_consume_stats_list_every_groups_lag_per_write_queue(
    client: WireClient, store: MessageStore, server: BrokerServer
) -> None:
    send(client, "T", 1, 4, store)
    client.call(Rq.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"g"}')
    commit(client, "g", "T", 1, 1)
    r = client.call(Rq.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    assert r.code == Rs.SUCCESS
    text = r.body.decode()
    assert text.startswith(f'{{"brokerAddr":"{server.address}","consumeStatsList":[')
    assert text.endswith('],"totalDiff":3}')
    entry = text[text.index('{"g":[') + len('{"g":[') :]
    head, table = split_table(entry[: entry.index("}}]}") + 2].encode())
    assert head == '{"consumeTps":0.0,'
    rows = {k["queueId"]: (v["brokerOffset"], v["consumerOffset"]) for k, v in mq_keyed(table)}
    assert rows == {0: (0, 0), 1: (4, 1), 2: (0, 0), 3: (0, 0)}


# ---------------------------------------------------------- 321: consume queue


def test_query_consume_queue_returns_the_units_from_an_index(
    client: WireClient, store: MessageStore
) -> None:
    send(client, "T", 0, 3, store)
    ext = {"topic": "T", "queueId": 0, "index": 1, "count": 5}
    r = client.call(Rq.QUERY_CONSUME_QUEUE, ext)
    assert r.code == Rs.SUCCESS and r.remark is None
    body = loads(r.body)
    assert (body["minQueueIndex"], body["maxQueueIndex"]) == (0, 3)
    units = body["queueData"]
    assert len(units) == 2
    cq = store.queues.find("T", 0)
    assert cq is not None
    for i, unit in enumerate(units, start=1):
        assert (unit["physicOffset"], unit["physicSize"], unit["tagsCode"]) == cq.unit_at(i)


def test_query_consume_queue_of_a_missing_queue_and_index(
    client: WireClient, store: MessageStore
) -> None:
    r = client.call(Rq.QUERY_CONSUME_QUEUE, {"topic": "T", "queueId": 0, "index": 0, "count": 1})
    assert (r.code, r.remark) == (Rs.SYSTEM_ERROR, "0@T is not exist!")
    send(client, "T", 0, 1, store)
    r = client.call(Rq.QUERY_CONSUME_QUEUE, {"topic": "T", "queueId": 0, "index": 9, "count": 1})
    assert (r.code, r.remark, r.body) == (Rs.SUCCESS, "Index 9 of 0@T is not exist!", b"")


# ------------------------------------------------ 307: relayed to the client


def test_running_info_is_relayed_to_the_client_and_its_answer_returned(
    server: BrokerServer,
) -> None:
    with WireClient(server.address) as consumer, WireClient(server.address) as admin:
        assert consumer.call(Rq.HEART_BEAT, body=heartbeat("c1")).code == Rs.SUCCESS

        def answer() -> None:
            while not any(p.code == Rq.GET_CONSUMER_RUNNING_INFO for p in consumer.pushed):
                consumer._file_next()
            req = next(p for p in consumer.pushed if p.code == Rq.GET_CONSUMER_RUNNING_INFO)
            assert req.ext_fields["clientId"] == "c1"
            resp = req.make_response(Rs.SUCCESS, "from c1", body=b'{"properties":{}}')
            consumer.send_raw(encode(resp))

        t = threading.Thread(target=answer)
        t.start()
        ext = {"consumerGroup": "g", "clientId": "c1", "jstackEnable": "false"}
        r = admin.call(Rq.GET_CONSUMER_RUNNING_INFO, ext)
        t.join(10)
        assert (r.code, r.remark, r.body) == (Rs.SUCCESS, "from c1", b'{"properties":{}}')


def test_running_info_of_a_client_not_online_is_rocketmqs_error(client: WireClient) -> None:
    r = client.call(Rq.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "g", "clientId": "nobody"})
    assert (r.code, r.remark) == (Rs.SYSTEM_ERROR, "The Consumer <g> <nobody> not online")


def test_the_python_push_consumer_answers_running_info(
    server: BrokerServer, core: BrokerCore
) -> None:
    core.create_topic(TopicConfig("T", 2, 2))
    cfg = ConsumerConfig(rebalance_interval_ms=500)
    with RemoteTransport(server.address) as transport:
        consumer = PushConsumer("pg", transport, cfg)
        consumer.subscribe("T")
        consumer.register_message_listener(
            lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        )
        consumer.start()
        try:
            with WireClient(server.address) as admin:

                def both_queues() -> tuple[str, str] | None:
                    ext = {"consumerGroup": "pg", "clientId": consumer.client_id}
                    r = admin.call(Rq.GET_CONSUMER_RUNNING_INFO, ext)
                    assert r.code == Rs.SUCCESS, r.remark
                    text = r.body.decode()
                    table = text[len('{"mqTable":') : text.index(',"properties":')]
                    mine = {k["queueId"] for k, _ in mq_keyed(table) if k["topic"] == "T"}
                    return (text, table) if mine == {0, 1} else None

                text, table = until(both_queues, 60, 0.1, "T's two queues in the running info")
        finally:
            consumer.shutdown()
    assert {k["queueId"] for k, _ in mq_keyed(table)} == {0, 1}
    info = loads(text.replace(table, "{}", 1))
    assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert int(info["properties"]["PROP_CONSUMER_START_TIMESTAMP"]) > 0
    assert {s["topic"] for s in info["subscriptionSet"]} == {"T", "%RETRY%pg"}


# ------------------------------------------------------ name server: 216, 319


@pytest.fixture
def namesrv() -> Iterator[NameServer]:
    ns = NameServer(port=0)
    ns.start()
    yield ns
    ns.stop()


# ------------------------------------------------- 306, 328, 329: housekeeping


def test_clean_expired_consume_queue_drops_the_queues_wholly_below_the_commitlog(
    tmp_path: Path,
) -> None:
    with make_store(tmp_path, commitlog_file_size=64 * 1024) as store:
        for topic in ("Old", "New"):
            for _ in range(40):
                store.put_message(Message(topic=topic, body=b"x" * 4000))
        assert store.wait_dispatched(60)
        assert store.clean_expired_files(immediately=True).commitlog_files > 0
        core = BrokerCore(store, BrokerConfig())
        srv = BrokerServer(core, host="127.0.0.1", port=0)
        srv.start()
        try:
            with WireClient(srv.address) as c:
                assert c.call(Rq.CLEAN_EXPIRED_CONSUMEQUEUE).code == Rs.SUCCESS
        finally:
            srv.stop()
            core.shutdown()
        assert store.queues.find("Old", 0) is None
        assert store.queues.find("New", 0) is not None


def test_delete_expired_commitlog_runs_a_manual_cleanup_round(
    client: WireClient, store: MessageStore
) -> None:
    assert client.call(Rq.DELETE_EXPIRED_COMMITLOG).code == Rs.SUCCESS


def test_all_producer_info_lists_the_announced_producer_groups(client: WireClient) -> None:
    assert client.call(Rq.HEART_BEAT, body=heartbeat("cid-1", "", producer="PG")).code == 0
    r = client.call(Rq.GET_ALL_PRODUCER_INFO)
    assert r.code == Rs.SUCCESS
    [info] = loads(r.body)["data"]["PG"]
    assert info["clientId"] == "cid-1" and info["lastUpdateTimestamp"] > 0


def test_delete_topic_in_namesrv_forgets_its_route(namesrv: NameServer) -> None:
    topics = (TopicConfig("Gone"), TopicConfig("Kept"))
    namesrv.routes.register(Registration("C", "b", "127.0.0.1:1", 0, topics=topics))
    with WireClient(namesrv.address) as c:
        assert c.call(Rq.DELETE_TOPIC_IN_NAMESRV, {"topic": "Gone"}).code == Rs.SUCCESS
        assert c.call(Rq.GET_ROUTEINFO_BY_TOPIC, {"topic": "Gone"}).code == Rs.TOPIC_NOT_EXIST
    assert namesrv.routes.route("Kept") is not None


def test_namesrv_config_names_its_port(namesrv: NameServer) -> None:
    with WireClient(namesrv.address) as c:
        r = c.call(Rq.GET_NAMESRV_CONFIG)
    assert r.code == Rs.SUCCESS
    lines = r.body.decode().splitlines()
    assert f"listenPort={namesrv.port}" in lines
    assert all(line.count("=") == 1 for line in lines)
