"""RemoteTransport against a real BrokerServer on a free 127.0.0.1 port."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.client.allocate import MessageQueue
from mqstore.client.producer import Producer
from mqstore.client.remote import RemoteTransport
from mqstore.client.transport import (
    BrokerError,
    ConsumerData,
    Heartbeat,
    PullQuery,
    PullStatus,
    SendBack,
    SendStatus,
    SubscriptionData,
    TransportError,
)
from mqstore.message import Message
from mqstore.message_store import MessageStore
from tests.broker import fixtures
from tests.helpers import until

pytestmark = pytest.mark.integration

# The shared broker fixtures, under their own names (pytest finds them here).
address = fixtures.address
core = fixtures.core
server = fixtures.server
store = fixtures.store


@pytest.fixture
def transport(address: str) -> Iterator[RemoteTransport]:
    with RemoteTransport(address) as t:
        yield t


def send(t: RemoteTransport, topic: str, body: bytes, queue_id: int = 0, tags: str | None = None):
    mq = MessageQueue(topic, t.broker_name, queue_id)
    return Producer("pg", t).start().send(Message(topic, body, tags=tags), queue=mq)


def pull_until(t: RemoteTransport, mq: MessageQueue, expect: int, expression: str = "*") -> list:
    out: list = []
    deadline = time.monotonic() + 60
    while len(out) < expect and time.monotonic() < deadline:
        out.extend(t.pull(PullQuery("cg", mq, len(out), 32, expression, suspend_ms=500)).messages)
    return out


def test_send_then_pull_round_trips_body_tags_and_ids(transport: RemoteTransport) -> None:
    result = send(transport, "rt", b"payload", tags="TagA")
    assert result.status is SendStatus.SEND_OK
    (msg,) = pull_until(transport, result.queue, 1)
    assert (msg.body, msg.tags, msg.uniq_key) == (b"payload", "TagA", result.msg_id)
    assert msg.queue_offset == result.queue_offset


def test_route_of_an_auto_created_topic_lists_its_queues(transport: RemoteTransport) -> None:
    assert transport.topic_queues("fresh") == []
    send(transport, "fresh", b"x")
    queues = transport.topic_queues("fresh")
    assert queues and all(q.topic == "fresh" for q in queues)


def test_pull_at_the_end_answers_no_new_msg_with_offsets(transport: RemoteTransport) -> None:
    result = send(transport, "end", b"x")
    pull_until(transport, result.queue, 1)
    reply = transport.pull(PullQuery("cg", result.queue, 1, 32))
    assert reply.status is PullStatus.NO_NEW_MSG
    assert (reply.next_begin_offset, reply.max_offset) == (1, 1)


def test_pull_far_past_the_end_is_offset_illegal(transport: RemoteTransport) -> None:
    result = send(transport, "far", b"x")
    pull_until(transport, result.queue, 1)
    assert (
        transport.pull(PullQuery("cg", result.queue, 1000, 32)).status is PullStatus.OFFSET_ILLEGAL
    )


def test_long_poll_is_answered_by_a_message_arrival_not_by_a_timer(store: MessageStore) -> None:
    # the hold's periodic re-check and the suspend are 120 s away: within the test only
    # the arrival can answer the held pull
    core = BrokerCore(store, BrokerConfig(hold_check_interval_ms=120_000))
    core.start()
    server = BrokerServer(core, host="127.0.0.1", port=0)
    server.start()
    try:
        with RemoteTransport(server.address) as transport:
            result = send(transport, "lp", b"first")
            pull_until(transport, result.queue, 1)
            answers: queue.Queue[object] = queue.Queue()

            def hold() -> None:
                answers.put(
                    transport.pull(PullQuery("cg", result.queue, 1, 32, suspend_ms=120_000))
                )

            threading.Thread(target=hold, daemon=True).start()
            until(lambda: core.hold.held_count == 1, what="the pull held")
            send(transport, "lp", b"second")
            reply = answers.get(timeout=60)
            assert reply.messages[0].body == b"second"  # type: ignore[attr-defined]
    finally:
        server.stop()
        core.shutdown()


def test_tag_expression_filters_on_the_broker_and_the_client(transport: RemoteTransport) -> None:
    for tag in ["A", "B", "A", "C"]:
        send(transport, "tags", tag.encode(), tags=tag)
    mq = MessageQueue("tags", transport.broker_name, 0)
    got = pull_until(transport, mq, 2, "A")
    assert [m.body for m in got] == [b"A", b"A"]


def test_consumer_offsets_update_and_query(transport: RemoteTransport) -> None:
    mq = MessageQueue("off", transport.broker_name, 0)
    send(transport, "off", b"x")
    # RocketMQ answers 0, not QUERY_NOT_FOUND, while the queue still starts at 0 in memory
    assert transport.query_offset("g-off", mq) in (None, 0)
    transport.update_offset("g-off", mq, 1)
    assert transport.query_offset("g-off", mq) == 1


def test_min_max_and_search_offsets(transport: RemoteTransport) -> None:
    before = int(time.time() * 1000) - 1
    for _ in range(3):
        result = send(transport, "mm", b"x")
    pull_until(transport, result.queue, 3)
    assert transport.min_offset(result.queue) == 0
    assert transport.max_offset(result.queue) == 3
    assert transport.search_offset(result.queue, before) == 0


def heartbeat(client_id: str, group: str) -> Heartbeat:
    sub = SubscriptionData("hb-topic", "*")
    return Heartbeat(client_id, consumers=(ConsumerData(group, subscriptions=(sub,)),))


def test_a_second_consumer_joining_notifies_the_first(address: str) -> None:
    with RemoteTransport(address) as a, RemoteTransport(address) as b:
        send(a, "hb-topic", b"x")
        notified: queue.Queue[str] = queue.Queue()
        a.set_consumer_ids_changed(notified.put)
        a.heartbeat(heartbeat("client-a", "g-hb"))
        b.heartbeat(heartbeat("client-b", "g-hb"))
        assert notified.get(timeout=5) == "g-hb"
        assert sorted(a.consumer_ids("g-hb")) == ["client-a", "client-b"]
        b.unregister("client-b", "g-hb")
        assert a.consumer_ids("g-hb") == ["client-a"]


def test_queue_lock_is_exclusive_until_unlocked(address: str) -> None:
    with RemoteTransport(address) as a, RemoteTransport(address) as b:
        send(a, "lk", b"x")
        mqs = [MessageQueue("lk", a.broker_name, 0)]
        assert a.lock_batch("g-lk", "client-a", mqs) == set(mqs)
        assert b.lock_batch("g-lk", "client-b", mqs) == set()
        a.unlock_batch("g-lk", "client-a", mqs)
        assert b.lock_batch("g-lk", "client-b", mqs) == set(mqs)


def test_send_back_puts_the_message_on_the_retry_topic(transport: RemoteTransport) -> None:
    result = send(transport, "sb", b"retry me")
    (msg,) = pull_until(transport, result.queue, 1)
    transport.send_back(
        SendBack("g-sb", msg, delay_level=0, max_reconsume_times=0)
    )  # straight to DLQ
    dlq = MessageQueue("%DLQ%g-sb", transport.broker_name, 0)
    (dead,) = pull_until(transport, dlq, 1)
    assert dead.body == b"retry me"


def test_illegal_queue_id_is_a_broker_error(transport: RemoteTransport) -> None:
    send(transport, "q", b"x")
    with pytest.raises(BrokerError):
        send(transport, "q", b"x", queue_id=500)


def test_unreachable_name_server_is_a_transport_error(tmp_path: Path) -> None:
    with RemoteTransport("127.0.0.1:1", timeout_s=0.5) as t, pytest.raises(TransportError):
        t.topic_queues("x")


def test_transport_reconnects_after_the_broker_server_restarts(store: MessageStore) -> None:
    server_mod = pytest.importorskip("mqstore.broker.server")
    core = BrokerCore(store)
    core.start()
    server = server_mod.BrokerServer(core, host="127.0.0.1", port=0)
    port = server.start()
    try:
        with RemoteTransport(f"127.0.0.1:{port}") as t:
            send(t, "re", b"before")
            server.stop()
            with pytest.raises(TransportError):
                send(t, "re", b"while down")
            server = server_mod.BrokerServer(core, host="127.0.0.1", port=port)
            server.start()
            result = send(t, "re", b"after")  # a new connection, the same transport
            assert result.status is SendStatus.SEND_OK
            bodies = [m.body for m in pull_until(t, result.queue, 2)]
            assert bodies == [b"before", b"after"]
    finally:
        server.stop()
        core.shutdown()


def test_one_transport_shared_by_eight_threads_stores_every_send_once(
    transport: RemoteTransport,
) -> None:
    producer = Producer("pg", transport).start()
    results: list = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        for k in range(40):
            r = producer.send(Message("shared", f"{i}-{k}".encode()))
            with lock:
                results.append(r)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.msg_id for r in results}) == 320
    assert len({(r.queue, r.queue_offset) for r in results}) == 320
    until(  # consume queues fill asynchronously (dispatch)
        lambda: sum(transport.max_offset(q) for q in transport.topic_queues("shared")) >= 320,
        what="every message dispatched",
    )


def test_broker_back_on_another_port_is_found_again_through_the_name_server(
    store: MessageStore,
) -> None:
    server_mod = pytest.importorskip("mqstore.broker.server")
    from tests.client.scripted_peer import ScriptedPeer

    broker_addr = {"now": ""}

    def name_server(req):  # type: ignore[no-untyped-def]
        if req.is_response or req.is_oneway:
            return []
        route = (
            '{"brokerDatas":[{"brokerAddrs":{0:"' + broker_addr["now"] + '"},'
            '"brokerName":"broker-a","cluster":"c"}],"queueDatas":[{"brokerName":"broker-a",'
            '"perm":6,"readQueueNums":4,"writeQueueNums":4}]}'
        )
        return [req.make_response(0, body=route.encode())]

    namesrv = ScriptedPeer(name_server).start()
    core = BrokerCore(store)
    core.start()
    first = server_mod.BrokerServer(core, host="127.0.0.1", port=0)
    broker_addr["now"] = f"127.0.0.1:{first.start()}"
    second = server_mod.BrokerServer(core, host="127.0.0.1", port=0)
    try:
        with RemoteTransport(namesrv.address) as t:
            producer = Producer("pg", t).start()
            assert producer.send(Message("moved", b"1")).status is SendStatus.SEND_OK
            first.stop()
            broker_addr["now"] = f"127.0.0.1:{second.start()}"
            # the first attempt meets the dead address and forgets it; the retry re-routes
            assert producer.send(Message("moved", b"2")).status is SendStatus.SEND_OK
    finally:
        second.stop()
        core.shutdown()
        namesrv.stop()
