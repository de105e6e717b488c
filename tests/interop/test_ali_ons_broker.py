"""A third-party client, node ali-ons 3.12.0, against our broker over real TCP.

ali-ons is an independent JavaScript RocketMQ client. It finds the broker through the
name server (GET_ROUTEINFO_BY_TOPIC; the TBW102 route for a topic not created yet),
sends with SEND_MESSAGE_V2, consumes with a push consumer (heartbeats, consumer list,
offsets on the broker, long-polling pulls) and persists offsets with oneway
UPDATE_CONSUMER_OFFSET on close. Each node script is a separate process.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mqstore.client.producer import Producer
from mqstore.client.remote import RemoteTransport
from mqstore.client.transport import PullQuery
from mqstore.consumequeue.results import StoredMessage
from mqstore.message import Message
from tests.interop.broker_harness import BrokerProcess, LiveBroker, live_broker, run_node

pytestmark = [pytest.mark.interop, pytest.mark.integration]


broker = live_broker


def read_all(transport: RemoteTransport, topic: str, expect: int) -> list[StoredMessage]:
    """Every message of ``topic`` through our TCP client (waits for dispatch)."""
    out: list[StoredMessage] = []
    deadline = time.monotonic() + 60
    while len(out) < expect and time.monotonic() < deadline:
        out = []
        for mq in transport.topic_queues(topic):
            out.extend(transport.pull(PullQuery("py-reader", mq, 0, 64, suspend_ms=0)).messages)
    return out


def python_send(broker: LiveBroker | BrokerProcess, topic: str, tags: list[str]) -> list[str]:
    with RemoteTransport(broker.address) as t, Producer("py-pg", t) as p:
        return [
            p.send(Message(topic, f"{tag}-{i}".encode(), tags=tag, keys=[f"k{i}"])).msg_id
            for i, tag in enumerate(tags)
        ]


def ons_consume(
    node: str, broker: LiveBroker | BrokerProcess, **opts: object
) -> tuple[list[dict], dict]:
    lines = run_node(node, "ons_consume.js", {"nameSrv": broker.address, **opts})
    return lines[:-1], lines[-1]


def test_ali_ons_produced_messages_read_field_by_field_by_our_client(
    node: str, broker: LiveBroker
) -> None:
    # ali-ons, unlike the Java client, throws on TOPIC_NOT_EXIST instead of falling back
    # to TBW102's route, so the topic must exist first (as `mqadmin updateTopic` would).
    python_send(broker, "OnsT", ["seed"])
    big = "z" * 5000  # over ali-ons' 4 KiB threshold: it zlib-compresses the body
    sent = [
        {"tags": "TagA", "keys": ["k1", "k2"], "body": "hello", "props": {"color": "red"}},
        {"tags": "TagB", "keys": ["k3"], "body": "消息 body", "props": {}},
        {"tags": "TagC", "keys": [], "body": big, "props": {}},
    ]
    results = run_node(
        node, "ons_produce.js", {"nameSrv": broker.address, "group": "ons-pg", "topic": "OnsT",
                                 "messages": sent},
    )  # fmt: skip
    assert [r["sendStatus"] for r in results] == ["SEND_OK"] * 3
    with RemoteTransport(broker.address) as t:
        by_id = {m.msg_id: m for m in read_all(t, "OnsT", 4)}  # ali-ons: offset ids
        for spec, r in zip(sent, results, strict=True):
            got = by_id[r["msgId"]]
            assert got.topic == "OnsT"
            assert got.tags == spec["tags"]
            assert got.keys == spec["keys"]
            assert got.body == spec["body"].encode()
            assert got.properties.get("color") == spec["props"].get("color")
            assert got.queue_id == r["queueId"]
            assert got.queue_offset == int(r["queueOffset"])
            assert r["brokerName"] == t.broker_name


def test_ali_ons_tag_subscription_gets_only_matching_python_messages(
    node: str, broker: LiveBroker
) -> None:
    tags = ["TagA", "TagB", "TagC"] * 4
    ids = python_send(broker, "PyT", tags)
    wanted = {i for i, tag in zip(ids, tags, strict=True) if tag in ("TagA", "TagC")}
    msgs, summary = ons_consume(
        node, broker, group="ons-cg-tags", topic="PyT", expression="TagA || TagC",
        expect=len(wanted), timeoutMs=20000, settleMs=1000,
    )  # fmt: skip
    assert summary["done"]
    assert {m["uniqKey"] for m in msgs} == wanted
    assert {m["tags"] for m in msgs} == {"TagA", "TagC"}
    assert all(m["body"].startswith(m["tags"]) for m in msgs)


def test_ali_ons_consumer_resumes_from_its_offsets_after_a_broker_restart(
    node: str, broker: LiveBroker
) -> None:
    first = set(python_send(broker, "ResumeT", ["A"] * 6))
    msgs, summary = ons_consume(
        node, broker, group="ons-cg-resume", topic="ResumeT", expect=6, settleMs=300
    )
    assert summary["done"] and {m["uniqKey"] for m in msgs} == first
    broker.restart()
    with RemoteTransport(broker.address) as t:  # the offsets came back from disk
        mqs = t.topic_queues("ResumeT")
        committed = sum(t.query_offset("ons-cg-resume", mq) or 0 for mq in mqs)
    assert committed == 6
    second = set(python_send(broker, "ResumeT", ["A"] * 4))
    msgs, summary = ons_consume(
        node, broker, group="ons-cg-resume", topic="ResumeT", expect=4, settleMs=1000
    )
    assert summary["done"]
    assert {m["uniqKey"] for m in msgs} == second  # nothing from before the restart


def test_python_reader_sees_ali_ons_consumer_offsets_on_the_broker(
    node: str, broker: LiveBroker
) -> None:
    python_send(broker, "OffT", ["A"] * 5)
    _, summary = ons_consume(node, broker, group="ons-cg-off", topic="OffT", expect=5)
    assert summary["done"]
    with RemoteTransport(broker.address) as t:
        for mq in t.topic_queues("OffT"):
            assert (t.query_offset("ons-cg-off", mq) or 0) == t.max_offset(mq)


def test_ali_ons_inflates_a_body_our_producer_compressed(node: str, broker: LiveBroker) -> None:
    body = "compressible " * 500  # 6500 bytes: over our producer's 4 KiB threshold
    with RemoteTransport(broker.address) as t, Producer("py-pg", t) as p:
        uniq = p.send(Message("ZipT", body.encode(), tags="Z")).msg_id
    msgs, summary = ons_consume(node, broker, group="ons-cg-zip", topic="ZipT", expect=1)
    assert summary["done"]
    assert [(m["uniqKey"], m["body"]) for m in msgs] == [(uniq, body)]


def test_ali_ons_consumes_what_ali_ons_produced_through_our_broker(
    node: str, broker: LiveBroker
) -> None:
    python_send(broker, "OnsOnsT", ["seed"])  # the topic must exist for ali-ons
    sent = [{"tags": "Keep", "keys": ["a"], "body": "x" * 5000}, {"tags": "Drop", "body": "no"},
            {"tags": "Keep", "keys": ["b"], "body": "kept"}]  # fmt: skip
    results = run_node(
        node, "ons_produce.js",
        {"nameSrv": broker.address, "group": "ons-pg2", "topic": "OnsOnsT", "messages": sent},
    )  # fmt: skip
    keep = {r["msgId"] for r, s in zip(results, sent, strict=True) if s["tags"] == "Keep"}
    msgs, summary = ons_consume(
        node, broker, group="ons-cg-ons", topic="OnsOnsT", expression="Keep", expect=2,
        settleMs=800,
    )  # fmt: skip
    assert summary["done"]
    assert {m["msgId"] for m in msgs} == keep
    assert sorted(m["body"] for m in msgs) == sorted(["x" * 5000, "kept"])


def test_ali_ons_offsets_survive_a_sigterm_restart_of_the_broker_process(
    node: str, tmp_path: Path
) -> None:
    proc = BrokerProcess(tmp_path / "store").start()
    try:
        first = set(python_send(proc, "SigT", ["A"] * 5))
        msgs, summary = ons_consume(node, proc, group="g-sig", topic="SigT", expect=5)
        assert summary["done"] and {m["uniqKey"] for m in msgs} == first
        assert proc.stop() == 0
        proc.start()
        second = set(python_send(proc, "SigT", ["A"] * 3))
        msgs, summary = ons_consume(
            node,
            proc,
            group="g-sig",
            topic="SigT",
            expect=3,
            settleMs=1000,
        )
        assert summary["done"] and {m["uniqKey"] for m in msgs} == second
    finally:
        if proc.proc is not None:
            proc.stop()
