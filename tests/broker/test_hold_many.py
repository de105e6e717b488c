"""The pull-hold service with many held pulls (a consumer of a 1,000-queue topic holds
one per queue): each is answered once, at its own deadline, whatever order the
deadlines were registered in, and a pull released by a message is not answered again
when its deadline passes."""

from __future__ import annotations

import threading
import time

from mqstore.broker.hold import PullHoldService
from mqstore.broker.pulls import PullRequest
from mqstore.consumequeue.dispatch import Arrival
from mqstore.message import tags_code
from tests.broker.core_helpers import query


class Answers:
    def __init__(self, expect: int) -> None:
        self.lock = threading.Lock()
        self.at: list[tuple[PullRequest, float]] = []
        self.expect = expect
        self.done = threading.Event()

    def __call__(self, request: PullRequest, _on_done: object) -> None:
        with self.lock:
            self.at.append((request, time.monotonic()))
            if len(self.at) >= self.expect:
                self.done.set()


def test_2000_held_pulls_registered_latest_deadline_first_are_each_answered_at_their_deadline():
    n = 2000
    answers = Answers(n)
    hold = PullHoldService(answers, lambda t, q: 0, check_interval_ms=60_000)
    hold.start()
    try:
        t0 = time.monotonic()
        deadline_of: dict[int, float] = {}
        for i in range(n):  # later holds expire sooner: each must move the loop's wake-up
            hold_ms = 300 + (n - i) // 4  # 300 ms .. 800 ms
            req = PullRequest(query("T", i % 1000, i, suspend_ms=hold_ms))
            deadline_of[id(req)] = time.monotonic() + hold_ms / 1000
            hold.hold(req, lambda _o: None, hold_ms)
        assert answers.done.wait(60), f"{len(answers.at)} of {n} answered"
        late = [at - deadline_of[id(r)] for r, at in answers.at]
    finally:
        hold.stop()
    assert len({id(r) for r, _ in answers.at}) == n  # each once
    assert min(late) >= -0.001  # none before its deadline
    # at its own deadline, not at the re-check 60 s away (slack for a loaded machine)
    assert max(late) < 30, f"answered up to {max(late):.2f} s late ({time.monotonic() - t0:.1f} s)"
    assert hold.held_count == 0


def test_a_pull_released_by_a_message_is_not_answered_again_at_its_deadline():
    answers = Answers(2)
    hold = PullHoldService(answers, lambda t, q: 0, check_interval_ms=60_000)
    hold.start()
    try:
        woken = PullRequest(query("T", 1, 0, suspend_ms=300))
        idle = PullRequest(query("T", 2, 0, suspend_ms=300))
        hold.hold(woken, lambda _o: None, 300)
        hold.hold(idle, lambda _o: None, 300)
        hold.on_arrival(Arrival("T", 1, 0, tags_code("A"), 0))
        assert answers.done.wait(60)
        time.sleep(0.5)  # both deadlines have passed
    finally:
        hold.stop()
    assert sorted(r.query.queue.queue_id for r, _ in answers.at) == [1, 2]
