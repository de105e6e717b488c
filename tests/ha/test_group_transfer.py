"""SYNC_MASTER replication waits (GroupTransfer): the 4.9 rules, without sockets."""

from __future__ import annotations

import threading

import pytest

from mqstore.ha.group_transfer import GroupTransfer
from mqstore.status import PutStatus


def group(connections: int = 1, timeout_ms: int = 3000, fallbehind: int = 1 << 28):
    woken: list[int] = []
    g = GroupTransfer(
        timeout_ms=timeout_ms,
        fallbehind_max=fallbehind,
        connections=lambda: connections,
        wake_writers=lambda: woken.append(1),
    )
    return g, woken


def test_an_offset_already_acked_is_ok_at_once():
    g, woken = group(connections=0)
    g.notify_ack(500)
    assert g.wait_for_replica(500) is PutStatus.PUT_OK
    assert woken == []


def test_no_connected_slave_is_slave_not_available():
    g, _ = group(connections=0)
    assert g.wait_for_replica(1) is PutStatus.SLAVE_NOT_AVAILABLE


def test_a_slave_fallbehind_max_behind_is_not_available():
    g, _ = group(fallbehind=1000)
    g.notify_ack(100)
    assert not g.slave_ok(1100)
    assert g.slave_ok(1099)
    assert g.wait_for_replica(1100) is PutStatus.SLAVE_NOT_AVAILABLE


def test_no_ack_in_time_is_flush_slave_timeout():
    g, woken = group(timeout_ms=30)
    assert g.wait_for_replica(10) is PutStatus.FLUSH_SLAVE_TIMEOUT
    assert woken == [1]
    assert g.timeouts == 1


def test_an_ack_releases_every_waiter_at_or_below_it():
    g, _ = group(timeout_ms=10_000)
    results: dict[int, PutStatus] = {}
    waiting = [threading.Thread(target=lambda o=o: results.__setitem__(o, g.wait_for_replica(o)))
               for o in (100, 200, 300)]  # fmt: skip
    for t in waiting:
        t.start()
    g.notify_ack(250)
    waiting[0].join(5)
    waiting[1].join(5)
    assert results == {100: PutStatus.PUT_OK, 200: PutStatus.PUT_OK}
    assert waiting[2].is_alive()
    g.notify_ack(300)
    waiting[2].join(5)
    assert results[300] is PutStatus.PUT_OK


def test_acks_never_go_backwards():
    g, _ = group()
    g.notify_ack(300)
    g.notify_ack(100)  # a restarted slave reporting less
    assert g.push_to_slave_max_offset == 300


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        GroupTransfer(timeout_ms=0, fallbehind_max=1, connections=lambda: 0)
