"""POP long polling over TCP (``mqstore.broker.pop_polling``): a POP_MESSAGE that finds
nothing is suspended without a worker thread and answered when a message arrives, when
its poll time runs out, or when the broker stops."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from mqstore.broker.pop_polling import Held, PopPolling
from mqstore.broker.pop_processors import broker_pop
from mqstore.client.remoting_client import RemotingClient
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import ResponseCode
from tests.helpers import until
from tests.pop.conftest import Broker, send

pytestmark = pytest.mark.integration


def pop_cmd(poll_ms: int, group: str = "g", order: bool = False) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": "T", "queueId": "-1", "maxMsgNums": "4",
           "invisibleTime": "60000", "pollTime": str(poll_ms),
           "bornTime": str(int(time.time() * 1000)),
           "initMode": "0", "expType": "TAG", "exp": "*",
           "order": "true" if order else "false"}  # fmt: skip
    return RemotingCommand(code=200050, ext_fields=ext)


class Answers:
    """Responses of asynchronous requests, by arrival."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self.arrived = threading.Condition()

    def __call__(self, resp: RemotingCommand | None, err: object) -> None:
        with self.arrived:
            self.codes.append(-1 if resp is None else resp.code)
            self.arrived.notify_all()

    def wait(self, n: int, timeout: float) -> list[int]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.codes) >= n, timeout)
            return list(self.codes)


def test_more_held_pops_than_workers_leave_a_send_free_and_are_woken_by_it(
    broker: Broker, client: RemotingClient
) -> None:
    send(broker, [b"first"])
    addr = broker.server.address
    assert client.invoke(addr, pop_cmd(0), 5).code == ResponseCode.SUCCESS
    answers = Answers()
    for _ in range(40):  # the server has 16 request workers
        client.invoke_async(addr, pop_cmd(10_000), answers)
    polling = broker_pop(broker.core).polling
    until(lambda: polling.held_count >= 40, timeout=9, what="40 held pops")
    assert polling.held_count == 40 and answers.codes == []
    send(broker, [b"second"])
    got = answers.wait(1, 5.0)
    assert got == [ResponseCode.SUCCESS]  # answered long before its 10 s poll time


def test_a_held_pop_answers_not_found_when_its_poll_time_runs_out(
    broker: Broker, client: RemotingClient
) -> None:
    broker.core.topics.learn("T", 4)
    answers = Answers()
    client.invoke_async(broker.server.address, pop_cmd(600), answers)
    assert answers.wait(1, 10.0) == [ResponseCode.POLLING_TIMEOUT]
    assert broker_pop(broker.core).polling.held_count == 0


def test_held_pops_are_answered_at_stop_without_a_traceback(
    tmp_path: object, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    from pathlib import Path

    b = Broker(Path(str(tmp_path)))
    b.core.topics.learn("T", 4)
    answers = Answers()
    for _ in range(20):
        client.invoke_async(b.server.address, pop_cmd(20_000), answers)
    polling = broker_pop(b.core).polling
    until(lambda: polling.held_count >= 20, timeout=18, what="20 held pops")
    with caplog.at_level(logging.DEBUG):
        b.close()
    assert polling.held_count == 0
    assert "CancelledError" not in caplog.text
    assert "Traceback" not in caplog.text


def test_holding_past_the_per_key_bound_is_refused_full() -> None:
    polling = PopPolling(max_total=10, max_per_key=1)
    try:
        far = time.monotonic() + 60
        marks = polling.marks(("T",))
        assert polling.hold(("T", "g", -1), ("T",), marks, far, lambda: None) is Held.HELD
        assert polling.hold(("T", "g", -1), ("T",), marks, far, lambda: None) is Held.FULL
        assert polling.hold(("T", "h", -1), ("T",), marks, far, lambda: None) is Held.HELD
    finally:
        polling.stop()


def test_an_arrival_between_the_attempt_and_the_hold_wakes_at_once() -> None:
    from mqstore.consumequeue.dispatch import Arrival

    polling = PopPolling()
    woken = threading.Event()
    try:
        marks = polling.marks(("T",))
        polling.on_arrival(Arrival("T", 0, 0, 0, 0))  # after the attempt, before the hold
        polling.hold(("T", "g", -1), ("T",), marks, time.monotonic() + 60, woken.set)
        assert woken.wait(5.0)
    finally:
        polling.stop()
