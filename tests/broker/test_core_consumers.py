"""Consumer groups: heartbeats, change notifications, expiry, queue locks."""

from __future__ import annotations

from mqstore.broker.consumers import ConsumerManager
from mqstore.broker.core import BrokerCore
from mqstore.broker.locks import RebalanceLockManager
from mqstore.remoting.values import ConsumerData, Heartbeat, MessageQueue


class Channel:
    """A client channel recording the notifications it receives."""

    def __init__(self) -> None:
        self.notified: list[str] = []

    def notify_consumer_ids_changed(self, group: str) -> None:
        self.notified.append(group)


def hb(cid: str, group: str = "g") -> Heartbeat:
    return Heartbeat(cid, (ConsumerData(group),))


def test_second_consumer_joining_notifies_the_first(core: BrokerCore) -> None:
    a, b = Channel(), Channel()
    core.heartbeat(hb("A"), a)
    a.notified.clear()
    core.heartbeat(hb("B"), b)
    assert a.notified == ["g"]
    assert sorted(core.consumer_ids("g")) == ["A", "B"]


def test_repeated_heartbeat_does_not_notify(core: BrokerCore) -> None:
    a = Channel()
    core.heartbeat(hb("A"), a)
    a.notified.clear()
    core.heartbeat(hb("A"), a)
    assert a.notified == []


def test_unregister_notifies_the_remaining_member(core: BrokerCore) -> None:
    a, b = Channel(), Channel()
    core.heartbeat(hb("A"), a)
    core.heartbeat(hb("B"), b)
    a.notified.clear()
    core.unregister("B", "g")
    assert a.notified == ["g"]
    assert core.consumer_ids("g") == ["A"]


def test_closed_channel_leaves_every_group(core: BrokerCore) -> None:
    a, b = Channel(), Channel()
    core.heartbeat(Heartbeat("A", (ConsumerData("g1"), ConsumerData("g2"))), a)
    core.heartbeat(hb("B", "g1"), b)
    core.channel_closed(a)
    assert core.consumer_ids("g1") == ["B"]
    assert core.consumer_ids("g2") == []


def test_heartbeat_creates_the_retry_topic(core: BrokerCore) -> None:
    core.heartbeat(hb("A", "grp"), Channel())
    cfg = core.topic_config("%RETRY%grp")
    assert cfg is not None and cfg.read_queue_nums == 1


def test_silent_channel_expires_after_the_timeout() -> None:
    now = [0]
    m = ConsumerManager(channel_expired_ms=120_000, clock=lambda: now[0])
    a, b = Channel(), Channel()
    m.heartbeat(hb("A"), a)
    now[0] = 100_000
    m.heartbeat(hb("B"), b)
    now[0] = 120_001
    assert m.scan_expired() == ["A"]
    assert m.consumer_ids("g") == ["B"]
    assert b.notified[-1] == "g"


def test_lock_is_exclusive_while_live() -> None:
    now = [0]
    locks = RebalanceLockManager(60_000, clock=lambda: now[0])
    mq = MessageQueue("T", "broker-a", 0)
    assert locks.try_lock_batch("g", [mq], "A") == {mq}
    now[0] = 59_000
    assert locks.try_lock_batch("g", [mq], "B") == set()


def test_lock_expires_after_sixty_seconds() -> None:
    now = [0]
    locks = RebalanceLockManager(60_000, clock=lambda: now[0])
    mq = MessageQueue("T", "broker-a", 0)
    locks.try_lock_batch("g", [mq], "A")
    now[0] = 60_001
    assert locks.try_lock_batch("g", [mq], "B") == {mq}


def test_unlock_by_another_client_keeps_the_lock() -> None:
    locks = RebalanceLockManager()
    mq = MessageQueue("T", "broker-a", 0)
    locks.try_lock_batch("g", [mq], "A")
    locks.unlock_batch("g", [mq], "B")
    assert locks.is_locked("g", mq, "A")
    locks.unlock_batch("g", [mq], "A")
    assert not locks.is_locked("g", mq, "A")
