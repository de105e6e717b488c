"""RemotingClient over real loopback TCP against a scripted remoting peer."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from mqstore.client.remoting_client import RemotingClient
from mqstore.client.transport import TransportError
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RemotingFlag, RequestCode, ResponseCode
from tests.client.scripted_peer import ScriptedPeer, echo

pytestmark = pytest.mark.integration


@pytest.fixture
def peer() -> Iterator[ScriptedPeer]:
    with ScriptedPeer() as p:
        yield p


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    with RemotingClient() as c:
        yield c


def request(n: int) -> RemotingCommand:
    return RemotingCommand(code=RequestCode.GET_MAX_OFFSET, ext_fields={"n": str(n)})


def reversed_batches(size: int) -> Callable[[RemotingCommand], list[RemotingCommand]]:
    """A peer script: hold requests until ``size`` have come, then answer that batch in
    reverse order, each response echoing its request's ext fields."""
    held: list[RemotingCommand] = []
    lock = threading.Lock()

    def answer(req: RemotingCommand) -> list[RemotingCommand]:
        with lock:
            held.append(req)
            if len(held) < size:
                return []
            batch = held[::-1]
            held.clear()
        return [r.make_response(0, ext_fields=r.ext_fields) for r in batch]

    return answer


def test_concurrent_callers_each_get_their_own_response_when_answers_come_out_of_order(
    client: RemotingClient,
) -> None:
    peer = ScriptedPeer(reversed_batches(8)).start()
    errors: list[str] = []

    def caller(t: int) -> None:
        for i in range(25):
            n = t * 1000 + i
            resp = client.invoke(peer.address, request(n), timeout_s=5)
            if resp.ext_fields["n"] != str(n):
                errors.append(f"{n} got {resp.ext_fields['n']}")

    threads = [
        threading.Thread(target=caller, args=(t,)) for t in range(8)
    ]  # one request each in every batch
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    peer.stop()
    assert errors == []


def test_unanswered_request_times_out_with_transport_error(client: RemotingClient) -> None:
    silent = ScriptedPeer(lambda req: []).start()
    started = time.monotonic()
    with pytest.raises(TransportError, match="no response"):
        client.invoke(silent.address, request(1), timeout_s=0.2)
    assert 0.2 <= time.monotonic() - started < 2
    silent.stop()


def test_late_response_after_a_timeout_does_not_disturb_the_next_call(
    client: RemotingClient,
) -> None:
    first = threading.Event()

    def late_first(req: RemotingCommand) -> list[RemotingCommand]:
        if req.ext_fields["n"] == "1":
            first.wait(5)  # answered only after the caller gave up
        return echo(req)

    peer = ScriptedPeer(late_first).start()
    with pytest.raises(TransportError):
        client.invoke(peer.address, request(1), timeout_s=0.1)
    first.set()
    assert client.invoke(peer.address, request(2), timeout_s=5).ext_fields["n"] == "2"
    peer.stop()


def test_waiting_call_fails_at_once_when_the_connection_drops(client: RemotingClient) -> None:
    peer = ScriptedPeer(lambda req: []).start()
    result: queue.Queue[BaseException | None] = queue.Queue()

    def call() -> None:
        try:
            client.invoke(peer.address, request(1), timeout_s=30)
            result.put(None)
        except TransportError as e:
            result.put(e)

    threading.Thread(target=call).start()
    peer.received.get(timeout=5)  # the request is on the wire
    started = time.monotonic()
    peer.stop()
    err = result.get(timeout=5)
    assert isinstance(err, TransportError)
    assert time.monotonic() - started < 5


def test_client_reconnects_after_the_server_restarts(
    client: RemotingClient, peer: ScriptedPeer
) -> None:
    assert client.invoke(peer.address, request(1), timeout_s=5).code == ResponseCode.SUCCESS
    peer.stop()
    peer.start()  # same port
    deadline = time.monotonic() + 30
    while True:  # the first call may still meet the dead socket
        try:
            resp = client.invoke(peer.address, request(2), timeout_s=5)
            break
        except TransportError:
            assert time.monotonic() < deadline
    assert resp.ext_fields["n"] == "2"


def test_connect_to_a_closed_port_raises_transport_error(client: RemotingClient) -> None:
    peer = ScriptedPeer().start()
    addr = peer.address
    peer.stop()
    with pytest.raises(TransportError, match="cannot connect"):
        client.invoke(addr, request(1), timeout_s=1)


def test_oneway_request_carries_the_oneway_flag_and_gets_no_wait(
    client: RemotingClient, peer: ScriptedPeer
) -> None:
    client.invoke_oneway(peer.address, request(7))
    got = peer.received.get(timeout=5)
    assert got.flag & RemotingFlag.ONEWAY
    assert got.ext_fields == {"n": "7"}


def test_notify_from_the_broker_reaches_the_request_handler(peer: ScriptedPeer) -> None:
    seen: queue.Queue[tuple[str, RemotingCommand]] = queue.Queue()

    def handler(addr: str, req: RemotingCommand) -> None:
        seen.put((addr, req))

    client = RemotingClient(handler)
    client.invoke(peer.address, request(1), timeout_s=5)  # open the connection
    peer.push(
        RemotingCommand(
            code=RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
            flag=RemotingFlag.ONEWAY,
            opaque=99,
            ext_fields={"consumerGroup": "g1"},
        )
    )
    addr, req = seen.get(timeout=5)
    client.close()
    assert addr == peer.address
    assert req.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
    assert req.ext_fields["consumerGroup"] == "g1"


def test_unhandled_broker_request_is_answered_request_code_not_supported(
    client: RemotingClient, peer: ScriptedPeer
) -> None:
    client.invoke(peer.address, request(1), timeout_s=5)
    peer.received.get(timeout=5)
    peer.push(RemotingCommand(code=RequestCode.GET_CONSUMER_RUNNING_INFO, opaque=42))
    answer = peer.received.get(timeout=5)
    assert answer.is_response
    assert answer.opaque == 42
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def test_garbage_from_the_peer_fails_the_call_without_hanging(client: RemotingClient) -> None:
    def garbage(req: RemotingCommand) -> list[RemotingCommand]:
        return []

    peer = ScriptedPeer(garbage).start()
    result: queue.Queue[BaseException] = queue.Queue()

    def call() -> None:
        try:
            client.invoke(peer.address, request(1), timeout_s=30)
        except TransportError as e:
            result.put(e)

    threading.Thread(target=call).start()
    peer.received.get(timeout=5)
    with peer._lock:
        conn = peer._conns[0]
    conn.sendall(b"\xff\xff\xff\xff garbage")  # a negative frame length
    assert "bad frame" in str(result.get(timeout=5))
    peer.stop()


# -- invoke_async: how one pull thread keeps many requests outstanding --------------------


def test_async_calls_get_their_own_responses_on_callbacks_without_a_waiting_thread(
    client: RemotingClient,
) -> None:
    peer = ScriptedPeer(reversed_batches(100)).start()
    got: queue.Queue[tuple[int, str]] = queue.Queue()
    threads_before = threading.active_count()
    for n in range(100):  # all sent from this one thread, none waits
        client.invoke_async(
            peer.address,
            request(n),
            lambda resp, err, n=n: got.put((n, resp.ext_fields["n"] if resp else str(err))),
        )
    threads_during = threading.active_count()
    pairs = [got.get(timeout=10) for _ in range(100)]
    peer.stop()
    assert sorted(pairs) == [(n, str(n)) for n in range(100)]
    assert threads_during <= threads_before + 2  # our reader and the peer's connection


def test_an_async_call_fails_on_its_callback_when_the_connection_drops(
    client: RemotingClient,
) -> None:
    peer = ScriptedPeer(lambda req: []).start()
    errors: queue.Queue[BaseException | None] = queue.Queue()
    client.invoke_async(peer.address, request(1), lambda resp, err: errors.put(err))
    peer.received.get(timeout=5)
    peer.stop()
    assert isinstance(errors.get(timeout=5), TransportError)


def test_a_cancelled_async_call_drops_its_late_response(client: RemotingClient) -> None:
    release = threading.Event()

    def late(req: RemotingCommand) -> list[RemotingCommand]:
        if req.ext_fields["n"] == "1":
            release.wait(5)
        return echo(req)

    peer = ScriptedPeer(late).start()
    calls: list[object] = []
    handle = client.invoke_async(peer.address, request(1), lambda r, e: calls.append(r))
    assert handle.cancel() is True
    release.set()
    assert client.invoke(peer.address, request(2), timeout_s=5).ext_fields["n"] == "2"
    peer.stop()
    assert calls == []
    assert handle.cancel() is False
