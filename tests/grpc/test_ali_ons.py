"""A third-party remoting client and the 5.x gRPC client on one broker: node ali-ons
reads what the Python 5.x client sent over gRPC, and the other way round."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.broker.topics import TopicConfig
from mqstore.grpc import GrpcConfig, GrpcEndpoint
from tests.grpc.conftest import client_config, consuming, message, quick_service, until
from tests.interop.broker_harness import LiveBroker, run_node
from tests.interop.conftest import node  # noqa: F401  (the fixture: node with ali-ons)

pytestmark = [pytest.mark.interop, pytest.mark.integration]

TOPIC = "OnsGrpcTopic"


@pytest.fixture
def both(tmp_path: Path) -> Iterator[tuple[LiveBroker, GrpcEndpoint]]:
    b = LiveBroker(tmp_path / "store").start()
    assert b.core is not None
    b.core.create_topic(TopicConfig(TOPIC, 4, 4))
    ep = GrpcEndpoint(b.core, GrpcConfig(port=0, service=quick_service()))
    ep.start()
    yield b, ep
    ep.stop(grace=0.2)
    b.stop()


def test_ali_ons_reads_what_the_5x_client_sent(
    node: str,  # noqa: F811
    both: tuple[LiveBroker, GrpcEndpoint],
) -> None:
    from rocketmq import Producer

    broker, ep = both
    p: Any = Producer(client_config(ep), (TOPIC,))
    p.startup()
    sent = {p.send(message(f"v5-{i}".encode(), topic=TOPIC, tag="T5")).message_id: f"v5-{i}"
            for i in range(5)}  # fmt: skip
    p.shutdown()
    lines = run_node(node, "ons_consume.js", {"nameSrv": broker.address, "group": "ons-readers",
                                              "topic": TOPIC, "expect": 5, "timeoutMs": 20000})  # fmt: skip
    msgs, done = lines[:-1], lines[-1]
    assert done["done"] is True
    assert {m["uniqKey"]: m["body"] for m in msgs} == sent
    assert {m["tags"] for m in msgs} == {"T5"}


def test_the_5x_client_receives_what_ali_ons_sent(
    node: str,  # noqa: F811
    both: tuple[LiveBroker, GrpcEndpoint],
) -> None:
    broker, ep = both
    bodies = [f"ons-{i}" for i in range(5)]
    run_node(node, "ons_produce.js", {
        "nameSrv": broker.address, "group": "ons-pg", "topic": TOPIC,
        "messages": [{"tags": "TO", "keys": [f"k{i}"], "body": b} for i, b in enumerate(bodies)],
    })  # fmt: skip
    with consuming(ep, "v5-readers", topic=TOPIC) as c:
        got: list[Any] = []
        until(lambda: got.extend(c.receive(32, 30)) or len(got) >= len(bodies))
        for m in got:
            c.ack(m)
    assert sorted(m.body.decode() for m in got) == bodies
    assert {m.tag for m in got} == {"TO"}
    assert not any(m.corrupted for m in got)
