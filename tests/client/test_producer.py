"""Producer behaviour, the same against the embedded broker and over TCP.

Every test runs twice: through ``InProcessTransport`` (a BrokerCore in this process)
and through ``RemoteTransport`` to a ``BrokerServer`` on a free 127.0.0.1 port.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest

from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.client.allocate import MessageQueue
from mqstore.client.producer import Producer, select_by_hash
from mqstore.client.transport import PullQuery, SendStatus, Transport
from mqstore.compression import COMPRESSED_FLAG
from mqstore.consumequeue.results import StoredMessage
from mqstore.errors import IllegalMessageError, IllegalTopicError
from mqstore.message import Message, decode_offset_msg_id
from mqstore.message_store import MessageStore
from tests.broker import fixtures

pytestmark = pytest.mark.integration  # half of the cases run over loopback TCP

STORE_COMPRESS_OVER = 4096  # the store's own threshold (RocketMQ default)

# The shared broker fixtures, under their own names (pytest finds them here).
core = fixtures.core
server = fixtures.server
store = fixtures.store


@pytest.fixture(params=["inprocess", "remote"])
def transport(request: pytest.FixtureRequest, core: BrokerCore) -> Iterator[Transport]:
    if request.param == "inprocess":
        from mqstore.broker.inprocess import InProcessTransport

        t: Transport = InProcessTransport(core)
        yield t
        t.close()
        return
    from mqstore.client.remote import RemoteTransport

    server: BrokerServer = request.getfixturevalue("server")
    remote = RemoteTransport(server.address)
    yield remote
    remote.close()


@pytest.fixture
def producer(transport: Transport) -> Iterator[Producer]:
    with Producer("pg", transport) as p:
        yield p


def pull_all(transport: Transport, mq: MessageQueue, expect: int) -> list[StoredMessage]:
    """The first ``expect`` messages of ``mq``, long-polling while dispatch (which is
    asynchronous) catches up; fewer only after 30 s."""
    out: list[StoredMessage] = []
    deadline = time.monotonic() + 30
    while len(out) < expect and time.monotonic() < deadline:
        out.extend(transport.pull(PullQuery("cg", mq, len(out), 64, suspend_ms=500)).messages)
    return out


def test_round_robin_spreads_sends_evenly_over_the_topic_queues(producer: Producer) -> None:
    results = [producer.send(Message("rr", b"x")) for _ in range(12)]
    assert Counter(r.queue.queue_id for r in results) == {0: 3, 1: 3, 2: 3, 3: 3}
    assert {r.status for r in results} == {SendStatus.SEND_OK}


def test_hash_selector_keeps_each_order_on_one_queue_in_send_order(
    producer: Producer, transport: Transport
) -> None:
    sent: Counter[MessageQueue] = Counter()
    for i in range(30):
        order = f"order-{i % 3}"
        msg = Message("orders", f"{order}:{i}".encode())
        sent[producer.send(msg, selector=select_by_hash, arg=order).queue] += 1
    seen: dict[str, list[int]] = {}
    queues_of: dict[str, set[MessageQueue]] = {}
    for mq, count in sent.items():
        for m in pull_all(transport, mq, count):
            order, step = m.body.decode().split(":")
            seen.setdefault(order, []).append(int(step))
            queues_of.setdefault(order, set()).add(mq)
    assert all(len(q) == 1 for q in queues_of.values())
    assert all(steps == sorted(steps) and len(steps) == 10 for steps in seen.values())


def test_explicit_queue_is_used_as_given(producer: Producer, transport: Transport) -> None:
    mq = MessageQueue("direct", transport.broker_name, 2)
    assert producer.send(Message("direct", b"x"), queue=mq).queue == mq


def test_batch_lands_contiguously_in_one_queue_with_every_id(
    producer: Producer, transport: Transport
) -> None:
    msgs = [Message("batch", f"m{i}".encode(), tags="T", keys=[f"k{i}"]) for i in range(5)]
    result = producer.send_batch(msgs)
    ids = result.msg_id.split(",")
    got = pull_all(transport, result.queue, 5)
    assert [m.body for m in got] == [f"m{i}".encode() for i in range(5)]
    assert [m.uniq_key for m in got] == ids
    assert [m.queue_offset for m in got] == list(
        range(result.queue_offset, result.queue_offset + 5)
    )
    assert [m.keys for m in got] == [[f"k{i}"] for i in range(5)]


def test_batch_of_two_topics_is_refused(producer: Producer) -> None:
    with pytest.raises(IllegalMessageError):
        producer.send_batch([Message("a", b"x"), Message("b", b"x")])


def test_tags_keys_properties_and_uniq_key_arrive_as_sent(
    producer: Producer, transport: Transport
) -> None:
    msg = Message("props", b"body", tags="TagA", keys=["k1", "k2"], properties={"color": "red"})
    result = producer.send(msg)
    (got,) = pull_all(transport, result.queue, 1)
    assert (got.tags, got.keys, got.properties["color"]) == ("TagA", ["k1", "k2"], "red")
    assert got.uniq_key == result.msg_id
    assert got.msg_id == result.offset_msg_id
    assert msg.properties == {"color": "red"}  # the caller's message is not modified


def test_body_over_the_threshold_is_stored_compressed_and_read_back_whole(
    transport: Transport, store: MessageStore
) -> None:
    body = b"compress me " * 100  # 1200 bytes: under the store's own threshold
    assert len(body) < STORE_COMPRESS_OVER
    with Producer("pg", transport, compress_over=1024) as p:
        result = p.send(Message("zip", body))
    stored = store.look_message_by_offset(decode_offset_msg_id(result.offset_msg_id)[1])
    assert stored is not None and stored.sys_flag & COMPRESSED_FLAG
    assert len(stored.body) < len(body)
    (got,) = pull_all(transport, result.queue, 1)
    assert got.body == body


def test_body_under_the_threshold_is_sent_plain(transport: Transport, store: MessageStore) -> None:
    with Producer("pg", transport, compress_over=1024) as p:
        result = p.send(Message("plain", b"y" * 1000))
    stored = store.look_message_by_offset(decode_offset_msg_id(result.offset_msg_id)[1])
    assert stored is not None and not stored.sys_flag & COMPRESSED_FLAG


def test_illegal_topic_is_refused_before_sending(producer: Producer) -> None:
    with pytest.raises(IllegalTopicError):
        producer.send(Message("bad topic", b"x"))


def test_send_before_start_raises(transport: Transport) -> None:
    with pytest.raises(RuntimeError):
        Producer("pg", transport).send(Message("t", b"x"))
