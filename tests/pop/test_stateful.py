"""Hypothesis stateful test: PopService against a model of each message's state
(visible, invisible until a deadline, acknowledged, dead), on a fake clock, with
restarts."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mqstore import FlushDiskType, Message, MessageStore
from mqstore.pop import AckStatus, PopConfig, PopService
from mqstore.pop.records import dlq_topic
from tests.helpers import make_store

MAX_ATTEMPTS = 3


@dataclass
class Model:
    state: str  # visible | invisible | acked | dead
    attempts: int = 0
    handle: str = ""
    pop_time: int = 0
    deadline: int = 0


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000_000_000

    def __call__(self) -> float:
        return self.ms / 1000


class PopMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="popsm"))
        self.clock = Clock()
        self.model: dict[str, Model] = {}
        self.bodies = 0
        self._open()

    def _open(self) -> None:
        self.store: MessageStore = make_store(self.dir, flush_disk_type=FlushDiskType.SYNC_FLUSH)
        self.pop = PopService(
            self.store, PopConfig(max_attempts=MAX_ATTEMPTS, persist_interval_ms=10**9),
            clock=self.clock,
        )  # fmt: skip
        self.pop.start()

    def teardown(self) -> None:
        try:
            self.pop.stop()
            self.store.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _holding(self) -> list[str]:
        return [k for k, m in self.model.items() if m.state == "invisible"]

    @rule(n=st.integers(1, 4))
    def put(self, n: int) -> None:
        for _ in range(n):
            r = self.store.put_message(Message(topic="T", body=b"%d" % self.bodies))
            self.bodies += 1
            self.model[r.uniq_key] = Model("visible")
        assert self.store.wait_dispatched(60)

    @rule(k=st.integers(1, 5), invisible=st.sampled_from([100, 1000]))
    def pop_some(self, k: int, invisible: int) -> None:
        visible = [m for m in self.model.values() if m.state == "visible"]
        r = self.pop.pop("g", "T", k, invisible)
        assert len(r.messages) == min(k, len(visible))
        for pm in r.messages:
            m = self.model[pm.msg_id]
            assert m.state == "visible", (pm.msg_id, m)
            assert pm.delivery_attempt == m.attempts + 1
            m.state, m.attempts, m.handle = "invisible", m.attempts + 1, pm.receipt_handle
            m.pop_time, m.deadline = r.pop_time, r.pop_time + invisible

    @precondition(lambda self: bool(self._holding()))
    @rule(i=st.integers(0, 100))
    def ack(self, i: int) -> None:
        key = self._holding()[i % len(self._holding())]
        m = self.model[key]
        assert self.pop.ack("g", "T", m.handle) is AckStatus.OK
        m.state = "acked"
        assert self.pop.ack("g", "T", m.handle) is AckStatus.NO_EXIST

    @precondition(lambda self: bool(self._holding()))
    @rule(i=st.integers(0, 100), ms=st.sampled_from([50, 2000]))
    def change(self, i: int, ms: int) -> None:
        key = self._holding()[i % len(self._holding())]
        m = self.model[key]
        r = self.pop.change_invisible_time("g", "T", m.handle, ms)
        assert r.status is AckStatus.OK
        m.pop_time = max(self.clock.ms, m.pop_time + 1)
        m.handle, m.deadline = r.receipt_handle, m.pop_time + ms

    @rule(ms=st.sampled_from([60, 150, 1100, 2500]))
    def advance(self, ms: int) -> None:
        self.clock.ms += ms
        self.pop._revive_locked()
        assert self.store.wait_dispatched(60)
        for m in self.model.values():
            if m.state == "invisible" and m.deadline <= self.clock.ms:
                m.state = "dead" if m.attempts >= MAX_ATTEMPTS else "visible"

    @rule()
    def restart(self) -> None:
        self.pop.stop()
        self.store.close()
        self._open()
        self.pop._revive_locked()
        assert self.store.wait_dispatched(60)

    @invariant()
    def dead_are_in_dlq(self) -> None:
        dead = sum(1 for m in self.model.values() if m.state == "dead")
        assert self.store.max_offset_in_queue(dlq_topic("g"), 0) == dead


TestPopMachine = pytest.mark.slow(PopMachine.TestCase)
TestPopMachine.settings = settings(max_examples=20, stateful_step_count=20, deadline=None)


def test_falsifying_example_change_then_restart_hands_out_one_message() -> None:
    """The example Hypothesis found: the changed message was revived a second time by
    the replay after the restart (two copies in the retry topic)."""
    m = PopMachine()
    try:
        m.dead_are_in_dlq()
        m.put(n=2)
        m.pop_some(invisible=100, k=2)
        m.change(i=0, ms=50)
        m.advance(ms=60)
        m.restart()
        m.pop_some(invisible=100, k=2)
        m.dead_are_in_dlq()
    finally:
        m.teardown()
