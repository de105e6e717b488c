"""Where brokers meet name servers: each scenario runs on a real 4.9.8 name server and on
``mqstore namesrv``, each with one real 4.9.8 broker and one mqstore broker registered
(:func:`~tests.oracle.conftest.real_ns_mixed`, :func:`~tests.oracle.conftest.mq_ns_mixed`),
and both must give the answers the real pair gives."""

from __future__ import annotations

import pytest

from mqstore.remoting import fastjson
from mqstore.remoting.codes import RequestCode, ResponseCode
from tests.broker.wire_client import WireClient
from tests.oracle.conftest import Side
from tests.oracle.harness import (
    Fleet,
    Proc,
    create_topic,
    queues,
    remoting_call,
    send_new,
    wait_until,
)

pytestmark = pytest.mark.integration

SIDES = ["real_ns_mixed", "mq_ns_mixed"]


def _side(request: pytest.FixtureRequest, name: str) -> Side:
    side: Side = request.getfixturevalue(name)
    return side


def test_the_real_name_server_routes_the_topics_of_a_mqstore_broker(
    real_ns_mixed: Side, unique: str
) -> None:
    # version 0 made 4.9.8 read the body as a bare wrapper: the broker, no topics (the
    # request below is the one `mqadmin topicRoute` sends)
    ns, (real, mq) = real_ns_mixed.ns, real_ns_mixed.brokers
    create_topic(real.address, f"{unique}_r", 8)
    create_topic(mq.address, f"{unique}_m", 8)
    wait_until(lambda: bool(queues(ns, f"{unique}_r")), 10)
    wait_until(lambda: bool(queues(ns, f"{unique}_m")), 10)
    assert queues(ns, f"{unique}_r") == {"real-x": (8, 8, 6)}
    assert queues(ns, f"{unique}_m") == {"mq-x": (8, 8, 6)}


@pytest.mark.parametrize("ns", ["real_ns", "mq_ns"])
def test_a_oneway_request_is_not_answered_and_the_connection_stays(
    ns: str, request: pytest.FixtureRequest
) -> None:
    addr = request.getfixturevalue(ns).address
    with WireClient(addr) as w:
        w.request(RequestCode.GET_BROKER_CLUSTER_INFO, oneway=True)
        resp = w.call(RequestCode.GET_BROKER_CLUSTER_INFO)
        assert resp.code == ResponseCode.SUCCESS and resp.opaque == 2
        assert w.responses == {}  # nothing answered the oneway request


@pytest.mark.parametrize("side", SIDES)
def test_a_real_broker_auto_creating_a_topic_keeps_its_routes(
    side: str, request: pytest.FixtureRequest, unique: str
) -> None:
    # the 4.9.8 broker registers oneway after auto-creating; a name server that answered
    # and closed the connection dropped the broker from every route
    s = _side(request, side)
    real = s.brokers[0]
    send_new(real.address, unique)
    wait_until(lambda: real.label.split()[-1] in queues(s.ns, unique), 10)
    for topic in (unique, "TBW102"):
        assert real.label.split()[-1] in queues(s.ns, topic), (s.label, topic)


@pytest.mark.parametrize("side", SIDES)
def test_an_incremental_registration_keeps_the_brokers_other_topics(
    side: str, request: pytest.FixtureRequest, unique: str
) -> None:
    s = _side(request, side)
    real = s.brokers[0]
    name = real.label.split()[-1]
    create_topic(real.address, f"{unique}_1")
    wait_until(lambda: name in queues(s.ns, f"{unique}_1"), 10)
    create_topic(real.address, f"{unique}_2")  # 4.9.8 registers only this one, version+1
    wait_until(lambda: name in queues(s.ns, f"{unique}_2"), 10)
    for topic in (f"{unique}_1", "TBW102"):
        assert name in queues(s.ns, topic), (s.label, topic)


@pytest.mark.parametrize("side", SIDES)
def test_created_and_auto_created_topics_reach_the_name_server_at_once(
    side: str, request: pytest.FixtureRequest, unique: str
) -> None:
    # 4.9.8: within milliseconds; a broker registering only every 30 s left them unrouted
    s = _side(request, side)
    for broker in s.brokers:
        name = broker.label.split()[-1]
        create_topic(broker.address, f"{unique}_{name}_c")
        send_new(broker.address, f"{unique}_{name}_a")
        for topic in (f"{unique}_{name}_c", f"{unique}_{name}_a"):
            wait_until(lambda t=topic, n=name: n in queues(s.ns, t), 3)  # type: ignore[misc]


def _first_ms(fleet: Fleet, side: Side, topic: str) -> int:
    """Milliseconds from a new topic's first send to its consumption by a push consumer
    started right after the send (the Java client warmed first)."""
    group = fleet.java_session("Group", side.ns, topic, f"G{topic}", "1")
    group.ask("warm", "warmed")
    assert group.ask("send 1", "sent") == [1, 0]
    group.ask("start", "started")
    distinct, _, first_ms = group.ask("wait 1 40000", "got")
    group.ask("quit", "summary")
    assert distinct == 1, side.label
    return first_ms


def test_a_new_topics_first_message_is_consumed_within_2_s_through_mqstore_namesrv(
    real_side: Side, mq_side: Side, fleet: Fleet, unique: str
) -> None:
    # issue 33: the consumer found the topic only after the broker's next 30 s registration
    real_ms = _first_ms(fleet, real_side, f"{unique}_r")
    mq_ms = _first_ms(fleet, mq_side, f"{unique}_m")
    assert mq_ms < max(2000, 2 * real_ms), (mq_ms, real_ms)


# ------------------------------------------------------------- admin codes (issue 37)


def _answer(ns: str, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> tuple:  # type: ignore[type-arg]
    """What a client reads of an answer: code, remark, the header fields asked for by
    the admin tool, the body (a KVTable parsed)."""
    r = remoting_call(ns, code, ext, body)
    fields = {k: v for k, v in (r.ext_fields or {}).items()
              if k in ("value", "wipeTopicCount", "addTopicCount")}  # fmt: skip
    return r.code, r.remark, fields, fastjson.loads(r.body) if r.body else None


def _kv_scenario(ns: str, namespace: str) -> list[tuple]:  # type: ignore[type-arg]
    kv = {"namespace": namespace, "key": "k1"}
    return [
        _answer(ns, RequestCode.GET_KV_CONFIG, kv),
        _answer(ns, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace}),
        _answer(ns, RequestCode.PUT_KV_CONFIG, {**kv, "value": "v1"}),
        _answer(ns, RequestCode.PUT_KV_CONFIG, {**kv, "key": "k2", "value": "v2"}),
        _answer(ns, RequestCode.GET_KV_CONFIG, kv),
        _answer(ns, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace}),
        _answer(ns, RequestCode.DELETE_KV_CONFIG, kv),
        _answer(ns, RequestCode.DELETE_KV_CONFIG, kv),  # already gone: SUCCESS again
        _answer(ns, RequestCode.GET_KV_CONFIG, kv),
        _answer(ns, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace}),
    ]


def test_the_kv_table_answers_as_the_real_name_servers(
    real_ns: Proc, mq_ns: Proc, unique: str
) -> None:
    real, ours = _kv_scenario(real_ns.address, unique), _kv_scenario(mq_ns.address, unique)
    assert ours == real
    assert real[4][2] == {"value": "v1"}  # what the oracle showed


def _config_scenario(ns: str) -> list[object]:
    update = RequestCode.UPDATE_NAMESRV_CONFIG
    out: list[object] = [
        _answer(ns, update, body=b"clusterTest=true\nnoSuchKey=1\n"),
        _answer(ns, update, body=b"kvConfigPath=/tmp/elsewhere\n"),  # black-listed
        _answer(ns, update, body=b"configBlackList=\n"),
    ]
    shown = remoting_call(ns, RequestCode.GET_NAMESRV_CONFIG).body.decode()
    out.append(sorted(ln for ln in shown.splitlines() if ln.startswith(("clusterTest=",
                                                                          "configBlackList="))))  # fmt: skip
    out.append(_answer(ns, update, body=b"clusterTest=false\n"))
    return out


def test_update_namesrv_config_answers_as_the_real_name_servers(real_ns: Proc, mq_ns: Proc) -> None:
    real, ours = _config_scenario(real_ns.address), _config_scenario(mq_ns.address)
    assert ours == real
    assert real[3] == [
        "clusterTest=true",
        "configBlackList=configBlackList;configStorePath;kvConfigPath",
    ]


def _perm_scenario(s: Side, topic: str) -> list[object]:
    """Wipe then add the write perm of each broker of the side; the perms of ``topic``'s
    route after each, and whether each count is the number of topics the broker holds."""
    out: list[object] = []
    topics = fastjson.loads(
        remoting_call(s.ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body
    )
    for broker in s.brokers:
        name = broker.label.split()[-1]
        held = sum(1 for t in topics["topicList"] if name in queues(s.ns, t))
        try:
            for code, header in ((RequestCode.WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount"),
                                 (RequestCode.ADD_WRITE_PERM_OF_BROKER, "addTopicCount")):  # fmt: skip
                r = remoting_call(s.ns, code, {"brokerName": name})
                out.append(
                    (r.code, int(r.ext_fields[header]) == held, queues(s.ns, topic)[name][2])
                )
        finally:  # the routes are shared by the session's other tests
            remoting_call(s.ns, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": name})
    r = remoting_call(s.ns, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "no-such-broker"})
    out.append((r.code, r.ext_fields.get("wipeTopicCount")))
    return out


def test_write_perm_of_a_broker_is_wiped_and_added_as_on_the_real_name_server(
    real_ns_mixed: Side, mq_ns_mixed: Side, unique: str
) -> None:
    for s in (real_ns_mixed, mq_ns_mixed):
        for broker in s.brokers:
            create_topic(broker.address, unique)
        wait_until(lambda s=s: len(queues(s.ns, unique)) == 2, 10)  # type: ignore[misc]
    real, ours = _perm_scenario(real_ns_mixed, unique), _perm_scenario(mq_ns_mixed, unique)
    assert ours == real
    assert real[:2] == [(0, True, 4), (0, True, 6)]  # what the oracle showed
