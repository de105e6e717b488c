"""Pure client-side codecs: routes, batch bodies, pull bodies, request bodies."""

from __future__ import annotations

import json
import zlib

import pytest

from mqstore.client import wire
from mqstore.client.allocate import MessageQueue
from mqstore.client.producer import java_hash, select_by_hash
from mqstore.client.route import RouteError, parse_route
from mqstore.client.transport import ConsumerData, Heartbeat, SubscriptionData, TransportError
from mqstore.commitlog.format import COMPRESSED_FLAG, encode, make_record
from mqstore.errors import CorruptRecordError
from mqstore.message import Message, properties_to_string

FASTJSON_ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":3,'
    b'"topicSysFlag":0,"writeQueueNums":2}]}'
)


def test_route_with_unquoted_broker_ids_gives_master_address_and_sorted_queues() -> None:
    route = parse_route("T", FASTJSON_ROUTE)
    assert route.master_addr("broker-a") == "127.0.0.1:10911"
    assert route.read_queues() == [MessageQueue("T", "broker-a", i) for i in range(3)]
    assert route.write_queues() == [MessageQueue("T", "broker-a", i) for i in range(2)]


def test_route_in_standard_json_reads_the_same() -> None:
    standard = FASTJSON_ROUTE.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')
    assert parse_route("T", standard) == parse_route("T", FASTJSON_ROUTE)


def test_route_broker_without_master_offers_no_queues() -> None:
    body = FASTJSON_ROUTE.replace(b"{0:", b"{2:")
    assert parse_route("T", body).read_queues() == []


def test_route_unreadable_perm_offers_no_read_queues() -> None:
    body = FASTJSON_ROUTE.replace(b'"perm":6', b'"perm":2')
    assert parse_route("T", body).read_queues() == []


def test_route_garbage_raises_route_error() -> None:
    with pytest.raises(RouteError):
        parse_route("T", b"{not json")


def record(offset: int, tags: str | None, body: bytes = b"b", sys_flag: int = 0) -> bytes:
    props = {"TAGS": tags} if tags else {}
    return encode(
        make_record(
            topic="T",
            body=body,
            properties_string=properties_to_string(props),
            queue_offset=offset,
            physical_offset=offset * 100,
            sys_flag=sys_flag,
        )
    )


def test_pull_body_is_refiltered_by_exact_tag_after_a_hash_collision() -> None:
    # "Aa" and "BB" have the same String.hashCode: the broker lets both through.
    body = record(0, "Aa") + record(1, "BB") + record(2, "Aa")
    got = wire.decode_pull_body(body, "Aa")
    assert [m.queue_offset for m in got] == [0, 2]


def test_pull_body_star_keeps_everything_including_untagged() -> None:
    body = record(0, None) + record(1, "X")
    assert len(wire.decode_pull_body(body, "*")) == 2


def test_pull_body_compressed_body_comes_back_inflated() -> None:
    plain = b"hello " * 1000
    body = record(0, None, zlib.compress(plain), COMPRESSED_FLAG)
    (msg,) = wire.decode_pull_body(body, "*")
    assert msg.body == plain


def test_pull_body_with_a_torn_record_raises_corrupt_record_error() -> None:
    body = record(0, "A") + record(1, "A")[:-3]
    with pytest.raises(CorruptRecordError):
        wire.decode_pull_body(body, "*")


def test_send_header_uses_the_v2_short_field_names() -> None:
    msg = Message("T", b"x", tags="A", keys=["k1", "k2"], born_timestamp=5, flag=3)
    header = wire.ext(wire.send_header("pg", MessageQueue("T", "b", 2), msg, batch=False))
    assert header["a"] == "pg" and header["b"] == "T" and header["e"] == "2"
    assert header["g"] == "5" and header["h"] == "3" and header["m"] == "false"
    assert header["i"] == "TAGS\x01A\x02KEYS\x01k1 k2\x02"


def test_uniq_key_is_added_to_a_copy_and_kept_when_present() -> None:
    msg = Message("T", b"x")
    stamped = wire.with_uniq_key(msg)
    assert msg.properties == {}
    assert len(stamped.properties[wire.UNIQ_KEY]) == 32
    assert wire.with_uniq_key(stamped) is stamped


def test_heartbeat_body_lists_subscription_tags_and_their_hash_codes() -> None:
    hb = Heartbeat(
        "c1",
        consumers=(ConsumerData("g", subscriptions=(SubscriptionData("T", "A || B"),)),),
        producer_groups=("pg",),
    )
    data = json.loads(json.dumps(wire.heartbeat_body(hb)))
    sub = data["consumerDataSet"][0]["subscriptionDataSet"][0]
    assert sub["tagsSet"] == ["A", "B"] and sub["codeSet"] == [65, 66]
    assert data["producerDataSet"] == [{"groupName": "pg"}]


def test_lock_response_queues_are_parsed() -> None:
    items = [{"topic": "T", "brokerName": "b", "queueId": 1}]
    assert wire.parse_queues(items) == {MessageQueue("T", "b", 1)}


@pytest.mark.parametrize(
    "items", [{"topic": "T"}, [{"topic": "T", "brokerName": "b"}], [{"queueId": "x"}], ["T"]]
)
def test_malformed_lock_response_queues_raise_transport_error(items: object) -> None:
    with pytest.raises(TransportError, match="lock response queue set"):
        wire.parse_queues(items)


def test_hash_selector_uses_java_hash_codes_and_java_remainder() -> None:
    queues = [MessageQueue("T", "b", i) for i in range(3)]
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE: Java's |h % 3| is 2
    assert java_hash("polygenelubricants") == -(2**31)
    assert select_by_hash(queues, Message("T", b"x"), "polygenelubricants").queue_id == 2
    assert java_hash(7) == 7
    assert java_hash(2**40 + 5) == 261  # Long.hashCode: (int) (v ^ (v >>> 32)) = 5 ^ 256
    assert select_by_hash(queues, Message("T", b"x"), -4).queue_id == 1  # |-4 % 3| in Java
