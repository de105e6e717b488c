"""One store, two protocols: what the 5.x client sends over gRPC is read by a remoting
consumer, and what a remoting producer sends is received over gRPC."""

from __future__ import annotations

import time
from typing import Any

from mqstore import Message
from mqstore.broker.server import BrokerServer
from mqstore.client.lite_pull_consumer import LitePullConsumer
from mqstore.client.producer import Producer as RemotingProducer
from mqstore.client.remote import RemoteTransport
from mqstore.grpc import GrpcEndpoint
from tests.broker import fixtures
from tests.grpc.conftest import TOPIC, consuming, message, until

remoting = fixtures.server
"""The grpc tests' ``core`` served over remoting on a free 127.0.0.1 port."""


def test_grpc_sent_messages_are_read_by_a_remoting_consumer(
    producer: Any, endpoint: GrpcEndpoint, remoting: BrokerServer
) -> None:
    sent = {}
    for i in range(8):
        m = message(f"g{i}".encode(), tag="TagG", keys=f"key{i}")
        m.add_property("color", "blue")
        sent[producer.send(m).message_id] = f"g{i}".encode()
    with RemoteTransport(remoting.address) as t:
        puller = LitePullConsumer("remoting-readers", t)
        puller.subscribe(TOPIC)
        puller.start()
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            got.extend(puller.poll(timeout=0.5))
        puller.shutdown()
    assert {m.uniq_key: m.body for m in got} == sent
    for m in got:
        assert m.tags == "TagG"
        assert m.properties["color"] == "blue"
        assert len(m.keys) == 1 and m.keys[0].startswith("key")


def test_remoting_sent_messages_are_received_over_grpc(
    endpoint: GrpcEndpoint, remoting: BrokerServer
) -> None:
    big = bytes(range(256)) * 40  # over 4 KiB: the remoting producer compresses it
    bodies = [b"small", big]
    with RemoteTransport(remoting.address) as t, RemotingProducer("remoting-senders", t) as p:
        ids = {
            p.send(Message(TOPIC, b, tags="TagR", keys=["kr"], properties={"k": "v"})).msg_id: b
            for b in bodies
        }
    with consuming(endpoint) as c:
        got: list[Any] = []
        until(lambda: got.extend(c.receive(32, 10)) or len(got) >= 2)
        for m in got:
            c.ack(m)
    assert {m.message_id: m.body for m in got} == ids
    for m in got:
        assert m.tag == "TagR"
        assert m.keys == {"kr"}
        assert m.properties == {"k": "v"}
        assert not m.corrupted
