"""SQL92 subscriptions over real TCP: PULL_MESSAGE (in the request and from the heartbeat),
CHECK_CLIENT_CONFIG and POP_MESSAGE, with RocketMQ's answers for a bad expression and for
a broker without ``enablePropertyFilter``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest

from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.consumequeue.filter import SQL92, parse_subscription
from mqstore.message_store import MessageStore
from mqstore.remoting.codes import V4_9_8
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from tests.broker.test_server import pull_ext, records, send_v2
from tests.broker.wire_client import WireClient

pytestmark = pytest.mark.integration


@pytest.fixture
def client(server: BrokerServer) -> Iterator[WireClient]:
    with WireClient(server.address) as c:
        yield c


@pytest.fixture
def filtering(core: BrokerCore) -> BrokerCore:
    """``core`` with ``enablePropertyFilter`` on."""
    core.config = replace(core.config, enable_property_filter=True)
    return core


def _send_numbered(client: WireClient, store: MessageStore, n: int = 10) -> None:
    for i in range(n):
        tag = "TagA" if i % 2 else "TagB"
        send_v2(client, f"m{i}".encode(), props=f"TAGS\x01{tag}\x02a\x01{i}\x02")
    store.wait_dispatched(60)


def _sql_pull(client: WireClient, expression: str, offset: int = 0) -> object:
    ext = {**pull_ext(offset, sys_flag=0x4, sub=expression), "expressionType": "SQL92"}
    return client.call(Rq.PULL_MESSAGE, ext)


def test_a_sql_pull_returns_only_the_matching_messages(
    filtering: BrokerCore, client: WireClient, store: MessageStore
) -> None:
    _send_numbered(client, store)
    r = _sql_pull(client, "a BETWEEN 3 AND 7 AND TAGS = 'TagA'")
    assert r.code == Rs.SUCCESS
    assert [rec.body for rec in records(r.body)] == [b"m3", b"m5", b"m7"]
    assert r.ext_fields["nextBeginOffset"] == "10"


def test_a_sql_pull_with_no_match_is_retry_immediately_past_the_scanned_units(
    filtering: BrokerCore, client: WireClient, store: MessageStore
) -> None:
    _send_numbered(client, store)
    r = _sql_pull(client, "b IS NOT NULL")
    assert (r.code, r.ext_fields["nextBeginOffset"]) == (Rs.PULL_RETRY_IMMEDIATELY, "10")


def test_without_enable_property_filter_a_sql_pull_is_system_error(
    core: BrokerCore, client: WireClient, store: MessageStore
) -> None:
    _send_numbered(client, store, 1)
    r = _sql_pull(client, "a > 1")
    assert r.code == Rs.SYSTEM_ERROR
    assert r.remark == "The broker does not support consumer to filter message by SQL92"


def test_an_empty_sql_expression_in_the_request_is_subscription_parse_failed(
    filtering: BrokerCore, client: WireClient
) -> None:
    ext = {**pull_ext(0, sys_flag=0x4, sub=""), "expressionType": "SQL92"}
    r = client.call(Rq.PULL_MESSAGE, ext)
    assert (r.code, r.remark) == (
        Rs.SUBSCRIPTION_PARSE_FAILED,
        "parse the consumer's subscription failed",
    )


def test_a_bad_sql_expression_in_the_request_passes_every_message_as_rocketmq_does(
    filtering: BrokerCore, client: WireClient, store: MessageStore
) -> None:
    _send_numbered(client, store, 3)
    r = _sql_pull(client, "a >")
    assert r.code == Rs.SUCCESS
    assert len(records(r.body)) == 3


def _heartbeat(client: WireClient, expression: str) -> None:
    hb = {
        "clientID": "c1",
        "consumerDataSet": [
            {
                "groupName": "g",
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "subscriptionDataSet": [
                    {"topic": "T", "subString": expression, "expressionType": "SQL92"}
                ],
            }
        ],
        "producerDataSet": [],
    }
    assert client.call(Rq.HEART_BEAT, None, json.dumps(hb).encode()).code == Rs.SUCCESS


def test_the_heartbeat_response_carries_a_version_a_java_client_pulls_sql92_from(
    client: WireClient,
) -> None:
    hb = {"clientID": "c1", "consumerDataSet": [], "producerDataSet": []}
    r = client.call(Rq.HEART_BEAT, None, json.dumps(hb).encode())
    assert r.code == Rs.SUCCESS and r.version == V4_9_8  # >= V4_1_0_SNAPSHOT (238)


def test_a_push_pull_filters_by_the_heartbeat_subscription(
    filtering: BrokerCore, client: WireClient, store: MessageStore
) -> None:
    _send_numbered(client, store)
    _heartbeat(client, "a >= 8")
    r = client.call(Rq.PULL_MESSAGE, {**pull_ext(0), "expressionType": "SQL92"})
    assert [rec.body for rec in records(r.body)] == [b"m8", b"m9"]


def test_a_bad_heartbeat_expression_is_filter_data_not_exist(
    filtering: BrokerCore, client: WireClient, store: MessageStore
) -> None:
    _send_numbered(client, store, 1)
    _heartbeat(client, "a >")
    r = client.call(Rq.PULL_MESSAGE, {**pull_ext(0), "expressionType": "SQL92"})
    assert r.code == Rs.FILTER_DATA_NOT_EXIST


def _check_client(client: WireClient, expression: str) -> object:
    body = {"clientId": "c1", "group": "g",
            "subscriptionData": {"topic": "T", "subString": expression, "expressionType": "SQL92"}}  # fmt: skip
    return client.call(Rq.CHECK_CLIENT_CONFIG, None, json.dumps(body).encode())


def test_check_client_config_accepts_a_good_expression(
    filtering: BrokerCore, client: WireClient
) -> None:
    assert _check_client(client, "a > 1").code == Rs.SUCCESS


def test_check_client_config_refuses_a_bad_expression(
    filtering: BrokerCore, client: WireClient
) -> None:
    r = _check_client(client, "a > 'x'")
    assert (r.code, r.remark) == (Rs.SUBSCRIPTION_PARSE_FAILED, "Invalid MessageSelector. ")


def test_check_client_config_without_property_filter_is_system_error(
    core: BrokerCore, client: WireClient
) -> None:
    r = _check_client(client, "a > 1")
    assert r.code == Rs.SYSTEM_ERROR


def _pop(client: WireClient, expression: str) -> object:
    ext = {"consumerGroup": "g", "topic": "T", "queueId": -1, "maxMsgNums": 32,
           "invisibleTime": 60_000, "pollTime": 0, "bornTime": 0, "initMode": 0,
           "exp": expression, "expType": "SQL92", "order": "false"}  # fmt: skip
    return client.call(Rq.POP_MESSAGE, ext)


def test_pop_returns_only_the_matching_messages(client: WireClient, store: MessageStore) -> None:
    _send_numbered(client, store)
    r = _pop(client, "a IN ('1', '4') OR a > 8")
    assert r.code == Rs.SUCCESS
    assert sorted(rec.body for rec in records(r.body)) == [b"m1", b"m4", b"m9"]


def test_pop_with_a_bad_expression_is_subscription_parse_failed(
    client: WireClient, store: MessageStore
) -> None:
    _send_numbered(client, store, 1)
    r = _pop(client, "a = ")
    assert (r.code, r.remark) == (
        Rs.SUBSCRIPTION_PARSE_FAILED,
        "parse the consumer's subscription failed",
    )


def _slot(store: MessageStore, expression: str) -> int | None:
    bits = store.logics.filter_bits
    assert bits is not None
    return bits.slot_of("T", parse_subscription(expression, SQL92))


def test_a_heartbeat_sql92_subscription_is_registered_for_verdicts_at_dispatch(
    filtering: BrokerCore, client: WireClient, store: MessageStore
) -> None:
    _heartbeat(client, "a >= 8")
    assert _slot(store, "a >= 8") == 0
    _send_numbered(client, store)  # dispatched after it: the pull takes their verdicts
    r = client.call(Rq.PULL_MESSAGE, {**pull_ext(0), "expressionType": "SQL92"})
    assert [rec.body for rec in records(r.body)] == [b"m8", b"m9"]


def test_without_enable_property_filter_a_heartbeat_registers_no_sql92_filter(
    core: BrokerCore, client: WireClient, store: MessageStore
) -> None:
    _heartbeat(client, "a >= 8")
    assert _slot(store, "a >= 8") is None


def test_a_pop_sql92_subscription_is_registered_for_verdicts_at_dispatch(
    client: WireClient, store: MessageStore
) -> None:
    _send_numbered(client, store, 1)
    _pop(client, "a > 8")
    assert _slot(store, "a > 8") == 0
