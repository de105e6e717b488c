"""PopService: invisibility, acks, redelivery with attempts, DLQ, change of invisible
time, peek, batch ack. Real store (SYNC_FLUSH), real threads, invisible times of a few
hundred ms, deadlines instead of sleeps."""

from __future__ import annotations

import threading
import time

from mqstore import MessageStore
from mqstore.pop import AckStatus, PopService, PopStatus, ReceiptHandle
from mqstore.pop.records import dlq_topic, pop_retry_topic
from tests.helpers import run_threads
from tests.pop.conftest import put, until


def drain(pop: PopService, group: str, topic: str, invisible: int = 5000) -> list[bytes]:
    out: list[bytes] = []
    while True:
        r = pop.pop(group, topic, 32, invisible)
        if not r.messages:
            return out
        for m in r.messages:
            out.append(m.body)
            assert pop.ack(group, topic, m.receipt_handle) is AckStatus.OK


def test_popped_messages_are_invisible_to_the_group(store: MessageStore, pop: PopService) -> None:
    put(store, "T", [b"a", b"b"])
    first = pop.pop("g", "T", 32, 5000)
    assert [m.body for m in first.messages] == [b"a", b"b"]
    assert pop.pop("g", "T", 32, 5000).status is PopStatus.NO_NEW_MSG


def test_other_groups_see_the_same_messages(store: MessageStore, pop: PopService) -> None:
    put(store, "T", [b"a"])
    assert [m.body for m in pop.pop("g1", "T", 32, 5000).messages] == [b"a"]
    assert [m.body for m in pop.pop("g2", "T", 32, 5000).messages] == [b"a"]


def test_receipt_handle_is_in_extra_info_format(store: MessageStore, pop: PopService) -> None:
    put(store, "T", [b"a", b"b"], queue_id=1)
    r = pop.pop("g", "T", 32, 5000)
    h = ReceiptHandle.parse(r.messages[1].receipt_handle)
    assert (h.ck_start_offset, h.queue_id, h.queue_offset, h.retry) == (0, 1, 1, "0")
    assert (h.pop_time, h.invisible_time, h.revive_qid) == (r.pop_time, 5000, r.revive_qid)
    assert len(r.messages[1].receipt_handle.split(" ")) == 8


def test_unacked_message_returns_after_invisible_time_with_attempt_raised(
    store: MessageStore, pop: PopService
) -> None:
    put(store, "T", [b"a"])
    t0 = time.monotonic()
    first = pop.pop("g", "T", 32, 300).messages[0]
    assert first.delivery_attempt == 1
    again = pop.pop("g", "T", 32, 5000, wait_ms=5000).messages
    assert time.monotonic() - t0 >= 0.3
    assert [m.body for m in again] == [b"a"]
    assert again[0].delivery_attempt == 2
    assert again[0].msg_id == first.msg_id
    assert again[0].message.topic == pop_retry_topic("T", "g")
    assert again[0].topic == "T"


def test_acked_message_does_not_return(store: MessageStore, pop: PopService) -> None:
    put(store, "T", [b"a", b"b"])
    r = pop.pop("g", "T", 32, 300)
    assert pop.ack("g", "T", r.messages[0].receipt_handle) is AckStatus.OK
    again = pop.pop("g", "T", 32, 5000, wait_ms=3000).messages
    assert [m.body for m in again] == [b"b"]
    assert pop.pop("g", "T", 32, 5000, wait_ms=600).messages == ()


def test_second_ack_of_a_handle_is_no_exist(store: MessageStore, pop: PopService) -> None:
    put(store, "T", [b"a"])
    h = pop.pop("g", "T", 32, 5000).messages[0].receipt_handle
    assert pop.ack("g", "T", h) is AckStatus.OK
    assert pop.ack("g", "T", h) is AckStatus.NO_EXIST


def test_ack_after_revive_is_no_exist(store: MessageStore, pop: PopService) -> None:
    put(store, "T", [b"a"])
    h = pop.pop("g", "T", 32, 200).messages[0].receipt_handle
    until(lambda: pop.reviver.revived >= 1)
    assert pop.ack("g", "T", h) is AckStatus.NO_EXIST


def test_after_max_attempts_message_is_in_dlq_and_not_delivered_again(
    store: MessageStore, pop: PopService
) -> None:
    put(store, "T", [b"a"])
    attempts = []
    for _ in range(3):  # max_attempts=3 in the fixture
        m = pop.pop("g", "T", 32, 200, wait_ms=5000).messages
        attempts.append(m[0].delivery_attempt)
    assert attempts == [1, 2, 3]
    until(lambda: store.max_offset_in_queue(dlq_topic("g"), 0) == 1)
    dead = store.get_message("x", dlq_topic("g"), 0, 0, 32).messages
    assert [d.body for d in dead] == [b"a"]
    assert pop.pop("g", "T", 32, 200, wait_ms=800).messages == ()


def test_change_invisible_duration_extends(store: MessageStore, pop: PopService) -> None:
    put(store, "T", [b"a"])
    m = pop.pop("g", "T", 32, 300).messages[0]
    ch = pop.change_invisible_time("g", "T", m.receipt_handle, 1500)
    assert ch.status is AckStatus.OK
    t0 = time.monotonic()
    again = pop.pop("g", "T", 32, 5000, wait_ms=5000).messages
    assert time.monotonic() - t0 >= 1.2
    assert [x.body for x in again] == [b"a"]


def test_new_handle_acks_after_change_and_old_one_is_stale(
    store: MessageStore, pop: PopService
) -> None:
    put(store, "T", [b"a"])
    m = pop.pop("g", "T", 32, 300).messages[0]
    ch = pop.change_invisible_time("g", "T", m.receipt_handle, 600)
    assert pop.ack("g", "T", m.receipt_handle) is AckStatus.NO_EXIST
    assert pop.ack("g", "T", ch.receipt_handle) is AckStatus.OK
    assert pop.pop("g", "T", 32, 5000, wait_ms=1200).messages == ()


def test_batch_ack_acks_each(store: MessageStore, pop: PopService) -> None:
    put(store, "T", [b"a", b"b", b"c"])
    r = pop.pop("g", "T", 32, 300)
    st = pop.batch_ack("g", "T", [m.receipt_handle for m in r.messages[:2]])
    assert st == [AckStatus.OK, AckStatus.OK]
    again = pop.pop("g", "T", 32, 5000, wait_ms=3000).messages
    assert [m.body for m in again] == [b"c"]


def test_peek_does_not_hide(store: MessageStore, pop: PopService) -> None:
    put(store, "T", [b"a"])
    assert [m.body for m in pop.peek("g", "T")] == [b"a"]
    assert [m.body for m in pop.pop("g", "T", 32, 5000).messages] == [b"a"]


def test_long_poll_wakes_on_arrival(store: MessageStore, pop: PopService) -> None:
    threading.Timer(0.2, lambda: put(store, "T", [b"late"])).start()
    t0 = time.monotonic()
    r = pop.pop("g", "T", 32, 5000, queue_id=0, wait_ms=120_000)
    assert [m.body for m in r.messages] == [b"late"]
    assert time.monotonic() - t0 < 60  # woken by the arrival, not the 120 s wait's end


def test_consumers_of_one_group_on_one_queue_never_hold_the_same_message(
    store: MessageStore, pop: PopService
) -> None:
    n = 300
    put(store, "T", [b"%d" % i for i in range(n)])
    held: dict[bytes, str] = {}
    lock = threading.Lock()
    overlaps: list[bytes] = []
    acked: list[bytes] = []

    def consumer(name: str) -> None:
        idle = 0
        while idle < 20:
            r = pop.pop("g", "T", 8, 2000, wait_ms=50)
            if not r.messages:
                idle += 1
                continue
            idle = 0
            for m in r.messages:
                with lock:
                    if m.body in held:
                        overlaps.append(m.body)
                    held[m.body] = name
            for m in r.messages:
                with lock:
                    del held[m.body]
                if pop.ack("g", "T", m.receipt_handle) is AckStatus.OK:
                    with lock:
                        acked.append(m.body)

    run_threads(consumer, [(f"c{i}",) for i in range(3)], 60)
    assert overlaps == []
    assert sorted(acked) == sorted(b"%d" % i for i in range(n))


def test_forward_to_dlq_moves_a_held_message_and_settles_it(
    store: MessageStore, pop: PopService
) -> None:
    put(store, "T", [b"a", b"b"])
    r = pop.pop("g", "T", 32, 300)
    assert pop.forward_to_dlq("g", "T", r.messages[0].receipt_handle) is AckStatus.OK
    assert pop.forward_to_dlq("g", "T", r.messages[0].receipt_handle) is AckStatus.NO_EXIST
    until(lambda: store.max_offset_in_queue(dlq_topic("g"), 0) == 1)
    again = pop.pop("g", "T", 32, 5000, wait_ms=3000).messages
    assert [m.body for m in again] == [b"b"]
