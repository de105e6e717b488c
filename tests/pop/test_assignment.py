"""Broker-side assignment (QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE) and the
PopPushConsumer that relies on it, over TCP."""

from __future__ import annotations

import threading
from pathlib import Path

from mqstore.broker.pop_assignment import MessageRequestMode, RequestMode, RequestModeTable, assign
from mqstore.client.pop_push_consumer import PopPushConsumer
from mqstore.client.remoting_client import RemotingClient
from mqstore.client.simple_consumer import ReceivedMessage
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import ResponseCode
from mqstore.remoting.fastjson import dumps, loads
from tests.pop.conftest import Broker, send_to_every_queue, until


def test_pull_mode_assigns_averaged_shares() -> None:
    m = RequestMode("T", "g", MessageRequestMode.PULL)
    shares = [assign(m, [0, 1, 2, 3, 4], ["a", "b"], c) for c in ("a", "b")]
    assert shares == [[0, 1, 2], [3, 4]]


def test_pop_mode_without_share_gives_every_client_every_queue() -> None:
    assert assign(RequestMode("T", "g", MessageRequestMode.POP, 0), [0, 1], ["a", "b"], "b") == [-1]


def test_pop_mode_with_share_adds_the_next_clients_queues() -> None:
    m = RequestMode("T", "g", MessageRequestMode.POP, 1)
    assert assign(m, [0, 1, 2, 3], ["a", "b"], "a") == [0, 1, 2, 3]


def test_unregistered_client_gets_no_answer() -> None:
    assert assign(RequestMode("T", "g"), [0, 1], ["a"], "z") is None


def test_request_mode_table_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "messageRequestMode.json"
    RequestModeTable(path).set(RequestMode("T", "g", MessageRequestMode.POP, 2))
    assert RequestModeTable(path).get("T", "g") == RequestMode("T", "g", MessageRequestMode.POP, 2)
    assert loads(path.read_bytes())["messageRequestModeMap"]["T"]["g"]["mode"] == "POP"


def test_retry_topic_mode_cannot_be_set(broker: Broker, client: RemotingClient) -> None:
    body = dumps({"topic": "%RETRY%g", "consumerGroup": "g", "mode": "POP"}).encode()
    resp = client.invoke(broker.server.address, RemotingCommand(401, body=body), 3)
    assert resp.code == ResponseCode.NO_PERMISSION


def test_unknown_request_mode_is_refused(broker: Broker, client: RemotingClient) -> None:
    body = dumps({"topic": "T", "consumerGroup": "g", "mode": "PUSH"}).encode()
    resp = client.invoke(broker.server.address, RemotingCommand(401, body=body), 3)
    assert resp.code == ResponseCode.INVALID_PARAMETER


def test_pop_push_consumers_share_every_queue_and_retry_failures(
    broker: Broker, client: RemotingClient
) -> None:
    n = 60
    send_to_every_queue(broker, n)
    lock = threading.Lock()
    seen: dict[bytes, list[int]] = {}

    def listener(m: ReceivedMessage) -> bool:
        with lock:
            seen.setdefault(m.body, []).append(m.delivery_attempt)
        return m.delivery_attempt > 1 or not m.body.endswith(b"-3")  # fail first tries of some

    consumers = [
        PopPushConsumer(
            "push-g",
            "T",
            listener,
            client,
            broker.server.address,
            invisible_duration=5,
            retry_delays=(0.2,),
        )
        for _ in range(2)
    ]
    for c in consumers:
        c.start()
    assert [c.assigned for c in consumers] == [[-1], [-1]]
    until(lambda: sum(c.consumed for c in consumers) == n, timeout=30)
    for c in consumers:
        c.shutdown()
    assert set(seen) == {f"{q}-{i}".encode() for q in range(4) for i in range(n // 4)}
    assert all(v == [1, 2] for k, v in seen.items() if k.endswith(b"-3"))
    assert all(v == [1] for k, v in seen.items() if not k.endswith(b"-3"))
