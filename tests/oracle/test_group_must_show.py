"""Issue 37's must-show: a real Java producer and push group (two consumers, each its own
client instance) across two brokers: a new topic's first message consumed within 1 s,
nothing delivered twice at group start or after a broker SIGKILL + restart, nothing
acknowledged lost. Set-ups: two mqstore brokers on ``mqstore namesrv``; one real 4.9.8
and one mqstore broker behind the real name server and behind ``mqstore namesrv``. The
same scenario on a real name server with a real broker and a real broker is the
reference for the first-message time."""

from __future__ import annotations

import time

import pytest

from tests.oracle.conftest import Side
from tests.oracle.harness import Fleet, Proc, create_topic, queues, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.crash]

GROUP_START_S = 3.0
"""From the consumers' start to the first send: their heartbeats reach both brokers and
the notified rebalance splits the queues. A message consumed while a queue is handed
over can be delivered again (the old owner drops the queue before it commits the
offset): at-least-once, in RocketMQ as here."""
SETTLE_S = 11.0
"""After the group caught up, before the kill: a 4.9.8 push consumer sends its offsets
every 5 s and a 4.9.8 broker (as mqstore's) writes them to disk every 5 s, so a SIGKILL
inside that window may re-deliver, as RocketMQ does; past it nothing may be delivered
twice."""


@pytest.fixture(scope="module")
def two_mq(fleet: Fleet) -> Side:
    """``mqstore namesrv`` with two mqstore brokers, ``mq-1`` and ``mq-2``."""
    ns = fleet.mq_namesrv()
    return Side("two mqstore brokers", ns, (fleet.mq_broker("mq-1", ns.address),
                                            fleet.mq_broker("mq-2", ns.address)))  # fmt: skip


@pytest.fixture(scope="module")
def two_real(fleet: Fleet, real_side: Side) -> Side:
    """The reference: the real name server with two real brokers."""
    return Side("two real brokers", real_side.namesrv,
                (*real_side.brokers, fleet.real_broker("real-b", real_side.ns)))  # fmt: skip


def _name(broker: Proc) -> str:
    return broker.label.split()[-1]


def _scenario(fleet: Fleet, side: Side, topic: str, kill: Proc | None) -> tuple[int, list[int]]:
    """(first-message ms, summary [acked, distinct, redelivered, lost, stored twice])."""
    for b in side.brokers:
        create_topic(b.address, topic, 4)
    names = {_name(b) for b in side.brokers}
    wait_until(lambda: set(queues(side.ns, topic)) == names, 10)
    group = fleet.java_session("Group", side.ns, topic, f"G{topic}", "2")
    group.ask("warm", "warmed")
    group.ask("start", "started")
    time.sleep(GROUP_START_S)
    assert group.ask("send 1", "sent") == [1, 0]
    distinct, _, first_ms = group.ask("wait 1 40000", "got")
    assert distinct == 1, side.label
    acked, _ = group.ask("send 200", "sent")
    distinct, deliveries, _ = group.ask(f"wait {acked} 90000", "got")
    assert (distinct, deliveries) == (acked, acked), f"{side.label}: at group start"
    if kill is not None:
        time.sleep(SETTLE_S)
        kill.kill()
        group.ask("send 50", "sent")  # the producer's retries move them to the other broker
        kill.start()
        wait_until(lambda: _name(kill) in queues(side.ns, topic), 30)
        acked, _ = group.ask("send 100", "sent")
        assert group.ask(f"wait {acked} 90000", "got")[0] == acked, side.label
    return first_ms, group.ask("quit", "summary")


@pytest.fixture(scope="module")
def reference_ms(fleet: Fleet, two_real: Side) -> int:
    """The real pair's first-message time (nothing re-delivered, nothing lost)."""
    ms, summary = _scenario(fleet, two_real, "oracle_ref_group", None)
    assert summary[2:4] == [0, 0], summary
    return ms


@pytest.mark.parametrize("side", ["two_mq", "real_ns_mixed", "mq_ns_mixed"])
def test_a_java_group_across_two_brokers_gets_every_message_once(
    side: str, fleet: Fleet, reference_ms: int, unique: str, request: pytest.FixtureRequest
) -> None:
    s: Side = request.getfixturevalue(side)
    mq_broker = next(b for b in reversed(s.brokers) if b.label.startswith("mqstore"))
    first_ms, (acked, distinct, redelivered, lost, twice) = _scenario(fleet, s, unique, mq_broker)
    assert (redelivered, lost, distinct) == (0, 0, acked), (s.label, twice)
    assert first_ms < max(1000, 2 * reference_ms), (first_ms, reference_ms)
