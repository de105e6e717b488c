"""POP over TCP: SimpleConsumers talking to a BrokerServer on 127.0.0.1 through the
POP request codes; queue-level pull consumers of another group on the same topic."""

from __future__ import annotations

import threading
import time

import pytest

from mqstore.broker.subscriptions import SubscriptionGroupConfig
from mqstore.client.lite_pull_consumer import LitePullConsumer
from mqstore.client.pop_remote import RemotePop
from mqstore.client.remote import RemoteTransport
from mqstore.client.remoting_client import RemotingClient
from mqstore.client.simple_consumer import SimpleConsumer
from mqstore.client.wire import decode_pull_body
from mqstore.errors import InvalidReceiptHandleError
from mqstore.pop.records import dlq_topic
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import ResponseCode
from mqstore.remoting.fastjson import dumps, loads
from tests.helpers import run_threads
from tests.pop.conftest import Broker, send, send_to_every_queue, until


def consumer(
    client: RemotingClient, broker: Broker, group: str = "g", **kw: object
) -> SimpleConsumer:
    return SimpleConsumer(group, {"T": "*"}, RemotePop(client, broker.server.address), **kw)  # type: ignore[arg-type]


def test_tcp_consumers_of_one_group_never_hold_the_same_message(
    broker: Broker, client: RemotingClient
) -> None:
    n = 200
    send(broker, [b"%d" % i for i in range(n)])
    held: set[bytes] = set()
    lock = threading.Lock()
    overlaps: list[bytes] = []
    acked: list[bytes] = []

    def run() -> None:
        c = consumer(client, broker, await_duration=0.05)
        idle = 0
        while idle < 10:
            got = c.receive(8, invisible_duration=5)
            if not got:
                idle += 1
                continue
            idle = 0
            with lock:
                overlaps.extend(m.body for m in got if m.body in held)
                held.update(m.body for m in got)
            for m in got:
                with lock:
                    held.discard(m.body)
                c.ack(m)
                with lock:
                    acked.append(m.body)

    run_threads(run, [()] * 3, 60)
    assert overlaps == []
    assert sorted(acked) == sorted(b"%d" % i for i in range(n))


def test_tcp_unacked_message_returns_with_attempt_raised(
    broker: Broker, client: RemotingClient
) -> None:
    send(broker, [b"a"])
    c = consumer(client, broker, await_duration=5)
    first = c.receive(1, invisible_duration=0.3)
    again = c.receive(1, invisible_duration=5)
    assert [m.body for m in again] == [b"a"]
    assert (first[0].delivery_attempt, again[0].delivery_attempt) == (1, 2)
    assert again[0].msg_id == first[0].msg_id
    with pytest.raises(InvalidReceiptHandleError):
        c.ack(first[0])
    c.ack(again[0])


def test_tcp_change_invisible_duration_extends(broker: Broker, client: RemotingClient) -> None:
    send(broker, [b"a"])
    c = consumer(client, broker, await_duration=5)
    m = c.receive(1, invisible_duration=0.3)[0]
    c.change_invisible_duration(m, 1.5)
    t0 = time.monotonic()
    again = c.receive(1, invisible_duration=5)
    assert time.monotonic() - t0 >= 1.2
    assert [x.body for x in again] == [b"a"]


def test_tcp_after_max_attempts_message_is_in_dlq(broker: Broker, client: RemotingClient) -> None:
    broker.core.groups.put(SubscriptionGroupConfig("g", retry_max_times=1))  # 2 attempts
    send(broker, [b"a"])
    c = consumer(client, broker, await_duration=3)
    assert [m.delivery_attempt for m in c.receive(1, 0.2)] == [1]
    assert [m.delivery_attempt for m in c.receive(1, 0.2)] == [2]
    until(lambda: broker.store.max_offset_in_queue(dlq_topic("g"), 0) == 1)
    assert c.receive(1, 0.2) == []


def test_tcp_fifo_in_order(broker: Broker, client: RemotingClient) -> None:
    send(broker, [b"1", b"2", b"3"])
    c = consumer(client, broker, fifo=True, await_duration=3)
    a = c.receive(2, invisible_duration=0.3)
    assert [m.body for m in a] == [b"1", b"2"]
    b = c.receive(2, invisible_duration=5)  # the batch expires: the same, attempt 2
    assert [(m.body, m.delivery_attempt) for m in b] == [(b"1", 2), (b"2", 2)]
    for m in b:
        c.ack(m)
    assert [m.body for m in c.receive(2, invisible_duration=5)] == [b"3"]


def test_tcp_in_flight_state_survives_broker_restart(
    broker: Broker, client: RemotingClient
) -> None:
    send(broker, [b"a", b"b"])
    c = consumer(client, broker)
    got = c.receive(2, invisible_duration=1.0)
    c.ack(got[0])
    broker.restart()
    c = consumer(client, broker, await_duration=5)
    again = c.receive(2, invisible_duration=5)
    assert [m.body for m in again] == [got[1].body]
    assert again[0].delivery_attempt == 2


def test_pull_and_pop_consumers_of_different_groups_read_the_same_topic(
    broker: Broker, client: RemotingClient
) -> None:
    n = 40
    send_to_every_queue(broker, n)
    popper = consumer(client, broker, group="pop-group", await_duration=0.2)
    popped: list[bytes] = []
    while len(popped) < n:
        got = popper.receive(16, invisible_duration=10)
        assert got, popped
        for m in got:
            popper.ack(m)
        popped.extend(m.body for m in got)
    with RemoteTransport(broker.server.address) as t:
        puller = LitePullConsumer("pull-group", t)
        puller.subscribe("T")
        puller.start()
        pulled: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(pulled) < n and time.monotonic() < deadline:
            pulled.extend(m.body for m in puller.poll(timeout=0.5))
        puller.shutdown()
    assert sorted(popped) == sorted(pulled)
    assert len(set(popped)) == n


def _pull_all(broker: Broker, group: str, seconds: float) -> list[bytes]:
    """What a LitePullConsumer of ``group`` pulls in ``seconds`` (then it commits)."""
    with RemoteTransport(broker.server.address) as t:
        puller = LitePullConsumer(group, t)
        puller.subscribe("T")
        puller.start()
        pulled: list[bytes] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            pulled.extend(m.body for m in puller.poll(timeout=0.2))
        puller.shutdown()
    return pulled


def test_pop_of_a_group_starts_where_its_pulls_committed(
    broker: Broker, client: RemotingClient
) -> None:
    """One position per group and queue, as upstream's PopMessageProcessor reads and
    commits the ConsumerOffsetManager (docs/pop.md §11): nothing is consumed twice."""
    send_to_every_queue(broker, 8)
    assert len(_pull_all(broker, "mixed", 3)) == 8
    assert consumer(client, broker, group="mixed", await_duration=0.5).receive(16, 10) == []


def test_pull_of_a_group_starts_where_its_pops_went(broker: Broker, client: RemotingClient) -> None:
    send_to_every_queue(broker, 8)
    popper = consumer(client, broker, group="mixed2", await_duration=0.5)
    popped: list[bytes] = []
    until(lambda: popped.extend(m.body for m in popper.receive(16, 10)) or len(popped) >= 8)
    assert _pull_all(broker, "mixed2", 2) == []


def call(client: RemotingClient, broker: Broker, code: int, ext: dict[str, str], body: bytes = b""):  # type: ignore[no-untyped-def]
    return client.invoke(broker.server.address, RemotingCommand(code, ext_fields=ext, body=body), 5)


def test_tcp_peek_notification_and_batch_ack(broker: Broker, client: RemotingClient) -> None:
    send(broker, [b"a", b"b"])
    base = {"consumerGroup": "g", "topic": "T", "queueId": "-1"}
    peek = call(client, broker, 200052, {**base, "maxMsgNums": "8"})
    assert [m.body for m in decode_pull_body(peek.body, "*")] == [b"a", b"b"]
    note = call(client, broker, 200054, {**base, "pollTime": "0"})
    assert note.ext_fields["hasMsg"] == "true"
    got = consumer(client, broker).receive(8, invisible_duration=0.3)
    body = dumps({"consumerGroup": "g", "topic": "T",
                  "extraInfoList": [m.receipt_handle for m in got]}).encode()  # fmt: skip
    resp = call(client, broker, 200151, {}, body)
    assert loads(resp.body)["statusList"] == ["OK", "OK"]
    note = call(client, broker, 200054, {**base, "pollTime": "800"})
    assert note.ext_fields["hasMsg"] == "false"  # acked: nothing comes back


def test_tcp_bad_requests_get_codes_and_the_broker_keeps_serving(
    broker: Broker, client: RemotingClient
) -> None:
    send(broker, [b"a"])
    base = {"consumerGroup": "g", "topic": "T", "queueId": "0", "offset": "0"}
    assert (
        call(client, broker, 200051, {**base, "extraInfo": "x y"}).code
        == ResponseCode.INVALID_PARAMETER
    )
    assert call(client, broker, 200151, {}, b"{not json").code == ResponseCode.INVALID_PARAMETER
    # no invisibleTime: RocketMQ 5.3.3 pops with 0, the message comes back at once (docs/pop.md §10)
    popped = call(client, broker, 200050, {"consumerGroup": "g", "topic": "T", "queueId": "0"})
    assert (popped.code, popped.ext_fields["invisibleTime"]) == (ResponseCode.SUCCESS, "0")
    missing = call(
        client, broker, 200050, {"consumerGroup": "g", "topic": "Nope", "invisibleTime": "1"}
    )
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    send(broker, [b"b"])
    assert [m.body for m in consumer(client, broker).receive(1, 5)] in ([b"a"], [b"b"])


def test_tcp_ack_all_acknowledges_a_received_batch_in_one_request(
    broker: Broker, client: RemotingClient
) -> None:
    send(broker, [b"a", b"b", b"c"])
    c = consumer(client, broker, await_duration=5)
    got = c.receive(8, invisible_duration=0.3)
    assert sorted(m.body for m in got) == [b"a", b"b", b"c"]
    c.ack_all(got)
    note = {"consumerGroup": "g", "topic": "T", "queueId": "-1", "pollTime": "800"}
    assert call(client, broker, 200054, note).ext_fields["hasMsg"] == "false"


def test_tcp_ack_all_acknowledges_the_held_and_names_the_stale(
    broker: Broker, client: RemotingClient
) -> None:
    send(broker, [b"a", b"b"])
    c = consumer(client, broker, await_duration=5)
    got = c.receive(8, invisible_duration=30)
    c.ack(got[0])
    with pytest.raises(InvalidReceiptHandleError, match=got[0].msg_id):
        c.ack_all(got)
    with pytest.raises(InvalidReceiptHandleError):
        c.ack(got[1])  # acknowledged by ack_all despite the stale one
