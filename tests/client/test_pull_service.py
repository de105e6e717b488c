"""The pull service: one thread pulls every owned queue (RocketMQ ``PullMessageService``).

A consumer owning 1,000 queues of a ``mqstore broker`` process keeps a long poll
outstanding on each of them from one thread, and its thread count does not grow
with the queues (before: one pull thread per owned queue, 1,003 threads).
"""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from mqstore.client.consumer import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer
from mqstore.client.remote import RemoteTransport
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from tests.client.consumer_harness import FIRST, wait_until
from tests.interop.broker_harness import broker_with_topic
from tests.thousand_queues import MESSAGES, QUEUES, TOPIC

pytestmark = pytest.mark.integration

THREAD_BOUND = 10
CFG = dataclasses.replace(FIRST, suspend_ms=2000, consume_thread_max=4)


class Bodies:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[str] = []

    def __call__(self, msgs, ctx):
        with self.lock:
            self.seen.extend(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def test_a_consumer_owning_1000_queues_runs_on_a_bounded_number_of_threads(thousand_queues):
    before = set(threading.enumerate())
    bodies = Bodies()
    transport = RemoteTransport(thousand_queues.address)
    c = PushConsumer("g-threads", transport, CFG)
    c.subscribe(TOPIC)
    c.register_message_listener(bodies)
    c.start()
    peak: set[threading.Thread] = set()
    try:
        deadline = time.monotonic() + 60
        while len(bodies.seen) < MESSAGES and time.monotonic() < deadline:
            peak |= set(threading.enumerate()) - before
            time.sleep(0.01)
        peak |= set(threading.enumerate()) - before
        owned = [mq for mq in c.owned() if mq.topic == TOPIC]
    finally:
        c.shutdown()
        transport.close()
    assert len(owned) == QUEUES
    names = sorted(t.name for t in peak)
    assert len(peak) <= THREAD_BOUND, names
    assert sorted(bodies.seen) == sorted(f"m-{i}" for i in range(MESSAGES))


def test_every_idle_owned_queue_keeps_a_long_poll_outstanding_from_one_thread(thousand_queues):
    transport = RemoteTransport(thousand_queues.address)
    c = PushConsumer(
        "g-idle",
        transport,
        dataclasses.replace(CFG, consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET),
    )
    c.subscribe(TOPIC)
    c.register_message_listener(Bodies())
    c.start()
    try:
        service = c._pull_service
        assert service is not None
        # every queue is caught up: each pull is held by the broker at the same time
        assert wait_until(lambda: service.outstanding >= QUEUES, 20)
        pull_threads = [t for t in threading.enumerate() if t.name == "g-idle-pull"]
    finally:
        c.shutdown()
        transport.close()
    assert len(pull_threads) == 1


# -- a pull the broker never answers ------------------------------------------------------


def test_a_pull_the_broker_never_answers_is_sent_again_after_suspend_plus_margin():
    """A scripted peer serves the route and swallows the first PULL_MESSAGE (a broker
    lost without the connection closing); the service sends the pull again once
    ``suspend_ms + pull_reply_margin_ms`` and the exception delay have passed."""
    import json as _json
    import queue

    from mqstore.client.allocate import MessageQueue
    from mqstore.client.brokers import Brokers
    from mqstore.client.offset_store import RemoteBrokerOffsetStore
    from mqstore.client.process_queue import ProcessQueue
    from mqstore.client.pull_service import PullContext, PullMessageService, PullTask
    from mqstore.client.rebalance import PullRequest
    from tests.client.scripted_peer import ScriptedPeer

    pulls: queue.Queue[float] = queue.Queue()
    peer: ScriptedPeer

    def respond(req: RemotingCommand) -> list[RemotingCommand]:
        if req.is_oneway or req.is_response:
            return []
        if req.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            route = {
                "brokerDatas": [{"brokerAddrs": {"0": peer.address}, "brokerName": "broker-a",
                                 "cluster": "c"}],
                "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 1,
                                "writeQueueNums": 1}],
            }  # fmt: skip
            return [req.make_response(0, body=_json.dumps(route).encode())]
        if req.code == RequestCode.PULL_MESSAGE:
            pulls.put(time.monotonic())
            if pulls.qsize() == 1:
                return []  # swallowed
            ext = {"nextBeginOffset": "0", "minOffset": "0", "maxOffset": "0"}
            return [req.make_response(ResponseCode.PULL_NOT_FOUND, ext_fields=ext)]
        return [req.make_response(0)]

    peer = ScriptedPeer(respond).start()
    transport = RemoteTransport(peer.address)
    brokers = Brokers(transport)
    cfg = dataclasses.replace(
        CFG, suspend_ms=100, pull_reply_margin_ms=300, exception_delay_ms=100, pull_interval_ms=0
    )
    stopped = threading.Event()
    ctx = PullContext(
        "g", cfg, brokers, RemoteBrokerOffsetStore("g", brokers), {"T": "*"},
        consumer=Bodies(), stopped=stopped, orderly=False,  # type: ignore[arg-type]
        on_offset_illegal=lambda mq: None, relocate_offset=lambda mq: 0,
    )  # fmt: skip
    service = PullMessageService("g-pull", ctx)
    service.start()
    try:
        mq = MessageQueue("T", "broker-a", 0)
        service.execute_now(PullTask(PullRequest("g", mq, ProcessQueue(), 0)))
        first = pulls.get(timeout=5)
        second = pulls.get(timeout=5)
    finally:
        stopped.set()
        service.stop()
        transport.close()
        peer.stop()
    assert second - first >= 0.1 + 0.3 + 0.1 - 0.02
    assert second - first < 3.0


# -- a broker whose address drops SYNs --------------------------------------------------


def test_queues_of_a_broker_that_drops_syns_do_not_starve_a_live_brokers_queues(tmp_path):
    """The route names broker-a (a real broker process with 40 messages) and broker-b at
    an address whose accept queue is full, so every dial hangs until its 3 s timeout.
    Twenty broker-b queues are queued before broker-a's four: the service tries broker-b
    once, then leaves it alone long enough for broker-a's messages to come through."""
    import json as _json
    import socket

    from mqstore.client.allocate import MessageQueue
    from mqstore.client.brokers import Brokers
    from mqstore.client.offset_store import RemoteBrokerOffsetStore
    from mqstore.client.process_queue import ProcessQueue
    from mqstore.client.pull_service import PullContext, PullMessageService, PullTask
    from mqstore.client.rebalance import PullRequest
    from tests.client.scripted_peer import ScriptedPeer

    black = socket.socket()
    black.bind(("127.0.0.1", 0))
    black.listen(0)
    fill = []
    for _ in range(3):  # fill the accept queue: later SYNs are dropped
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(black.getsockname())
        fill.append(s)
    black_addr = f"127.0.0.1:{black.getsockname()[1]}"
    b = broker_with_topic(tmp_path / "store", "T", 4, 40)

    def respond(req: RemotingCommand) -> list[RemotingCommand]:
        if req.is_oneway or req.is_response:
            return []
        route = {
            "brokerDatas": [
                {"brokerAddrs": {"0": b.address}, "brokerName": "broker-a", "cluster": "c"},
                {"brokerAddrs": {"0": black_addr}, "brokerName": "broker-b", "cluster": "c"},
            ],
            "queueDatas": [
                {"brokerName": n, "perm": 6, "readQueueNums": q, "writeQueueNums": q}
                for n, q in (("broker-a", 4), ("broker-b", 20))
            ],
        }
        return [req.make_response(0, body=_json.dumps(route).encode())]

    peer = ScriptedPeer(respond).start()
    transport = RemoteTransport(peer.address)
    brokers = Brokers(transport)
    bodies = Bodies()

    class Consumer:
        def submit(self, msgs, pq, mq, dispatch):
            bodies(msgs, None)

    stopped = threading.Event()
    cfg = dataclasses.replace(CFG, suspend_ms=200, exception_delay_ms=200)
    ctx = PullContext(
        "g", cfg, brokers, RemoteBrokerOffsetStore("g", brokers), {"T": "*"},
        consumer=Consumer(), stopped=stopped, orderly=False,
        on_offset_illegal=lambda mq: None, relocate_offset=lambda mq: 0,
    )  # fmt: skip
    service = PullMessageService("g-pull", ctx)
    service.start()
    try:
        transport.route("T")  # both brokers known: no lookup on the service thread
        for q in range(20):
            mq = MessageQueue("T", "broker-b", q)
            service.execute_now(PullTask(PullRequest("g", mq, ProcessQueue(), 0)))
        for q in range(4):
            mq = MessageQueue("T", "broker-a", q)
            service.execute_now(PullTask(PullRequest("g", mq, ProcessQueue(), 0)))
        got_all = wait_until(lambda: len(bodies.seen) == 40, 10)
    finally:
        stopped.set()
        service.stop()
        transport.close()
        peer.stop()
        b.stop()
        for s in [*fill, black]:
            s.close()
    assert got_all, f"{len(bodies.seen)} of 40 consumed"
    assert sorted(bodies.seen) == sorted(f"m-{i}" for i in range(40))
