"""FIFO POP: per queue, a group gets the next messages only when the earlier ones are
acknowledged or their invisible time is over, whichever consumer holds them."""

from __future__ import annotations

import random
import threading
import time

from mqstore import MessageStore
from mqstore.pop import AckStatus, PopConfig, PopService
from mqstore.pop.records import dlq_topic
from tests.helpers import run_threads
from tests.pop.conftest import put, until


def test_fifo_queue_is_blocked_while_its_batch_is_in_flight(
    store: MessageStore, pop: PopService
) -> None:
    put(store, "F", [b"1", b"2", b"3"])
    r = pop.pop("g", "F", 2, 5000, fifo=True)
    assert [m.body for m in r.messages] == [b"1", b"2"]
    assert pop.pop("g", "F", 2, 5000, fifo=True).messages == ()
    pop.ack("g", "F", r.messages[0].receipt_handle)
    assert pop.pop("g", "F", 2, 5000, fifo=True).messages == ()
    pop.ack("g", "F", r.messages[1].receipt_handle)
    assert [m.body for m in pop.pop("g", "F", 2, 5000, fifo=True).messages] == [b"3"]


def test_fifo_expired_batch_is_redelivered_in_order_with_attempt(
    store: MessageStore, pop: PopService
) -> None:
    put(store, "F", [b"1", b"2"])
    r = pop.pop("g", "F", 2, 200, fifo=True)
    again = pop.pop("g", "F", 2, 5000, fifo=True, wait_ms=3000)
    assert [m.body for m in again.messages] == [b"1", b"2"]
    assert [m.delivery_attempt for m in again.messages] == [2, 2]
    assert pop.ack("g", "F", r.messages[0].receipt_handle) is AckStatus.NO_EXIST  # stale


def test_fifo_change_invisible_duration_extends(store: MessageStore, pop: PopService) -> None:
    put(store, "F", [b"1"])
    m = pop.pop("g", "F", 1, 200, fifo=True).messages[0]
    ch = pop.change_invisible_time("g", "F", m.receipt_handle, 1200)
    assert ch.status is AckStatus.OK
    t0 = time.monotonic()
    again = pop.pop("g", "F", 1, 5000, fifo=True, wait_ms=5000).messages
    assert time.monotonic() - t0 >= 0.9
    assert [x.body for x in again] == [b"1"]
    assert pop.ack("g", "F", again[0].receipt_handle) is AckStatus.OK


def test_fifo_message_past_max_attempts_goes_to_dlq(store: MessageStore, pop: PopService) -> None:
    put(store, "F", [b"1", b"2"])
    for _ in range(3):  # max_attempts=3
        r = pop.pop("g", "F", 1, 150, fifo=True, wait_ms=3000)
        assert [m.body for m in r.messages] == [b"1"]
    nxt = pop.pop("g", "F", 1, 5000, fifo=True, wait_ms=3000)
    assert [m.body for m in nxt.messages] == [b"2"]
    until(lambda: store.max_offset_in_queue(dlq_topic("g"), 0) == 1)


def test_fifo_groups_stay_in_order_across_consumers_with_random_failures(
    store: MessageStore,
) -> None:
    pop = PopService(store, PopConfig(max_attempts=1000))  # no message dead-lettered
    pop.start()
    groups, per_group = 4, 15
    for q in range(groups):  # a message group is routed to one queue, as producers do
        put(store, "F", [f"{q}:{i}".encode() for i in range(per_group)], queue_id=q)
    done: dict[int, list[int]] = {q: [] for q in range(groups)}
    violations: list[str] = []
    lock = threading.Lock()

    def consumer(seed: int) -> None:
        rnd = random.Random(seed)
        idle = 0
        while idle < 30:
            r = pop.pop("g", "F", 3, 150, fifo=True, wait_ms=30)
            if not r.messages:
                idle += 1
                continue
            idle = 0
            got = [tuple(int(x) for x in m.body.decode().split(":")) for m in r.messages]
            with lock:
                for q in {q for q, _ in got}:
                    idx = [i for qq, i in got if qq == q]
                    # consecutive, and not past the first unacknowledged one
                    if idx != list(range(idx[0], idx[0] + len(idx))) or idx[0] > len(done[q]):
                        violations.append(f"queue {q}: got {idx} with {len(done[q])} acked")
            for m, (q, i) in zip(r.messages, got, strict=True):
                if rnd.random() < 0.25:
                    break  # fail: leave the rest of the batch to expire
                with lock:  # acks counted as the service applies them
                    if pop.ack("g", "F", m.receipt_handle) is AckStatus.OK:
                        done[q].append(i)

    run_threads(consumer, [(s,) for s in range(3)], 120)
    assert violations == [], violations
    pop.stop()
    assert all(done[q] == list(range(per_group)) for q in range(groups)), done
