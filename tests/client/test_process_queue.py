"""ProcessQueue accounting and the commit-offset rule (docs/client.md §2.1)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqstore.client.process_queue import ProcessQueue
from mqstore.consumequeue.results import StoredMessage


def msg(offset: int, body: bytes = b"x") -> StoredMessage:
    return StoredMessage("T", 0, offset, offset * 100, 100, body, 0, 0, 0, 0, 0, 0, "", 0, b"", b"")


def held(pq: ProcessQueue, *offsets: int) -> list[StoredMessage]:
    ms = [msg(o) for o in offsets]
    pq.put_messages(ms)
    return ms


def test_put_counts_messages_and_body_bytes():
    pq = ProcessQueue()
    pq.put_messages([msg(10, b"abc"), msg(11, b"de")])
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max) == (2, 5, 11)


def test_put_of_an_already_held_offset_is_ignored():
    pq = ProcessQueue()
    pq.put_messages([msg(10, b"abc")])
    pq.put_messages([msg(10, b"abc")])
    assert (pq.msg_count, pq.msg_size) == (1, 3)


def test_commit_offset_stops_at_the_smallest_unfinished_message():
    pq = ProcessQueue()
    ms = held(pq, 10, 11, 12, 13, 14)
    assert pq.remove_messages([ms[0], ms[2]]) == 11
    assert pq.remove_messages([ms[1]]) == 13
    assert pq.remove_messages([ms[3], ms[4]]) == 15


def test_remove_from_an_empty_queue_has_nothing_to_commit():
    pq = ProcessQueue()
    assert pq.remove_messages([msg(1)]) is None


def test_remove_updates_count_and_size():
    pq = ProcessQueue()
    ms = held(pq, 1, 2, 3)
    pq.remove_messages(ms[:2])
    assert (pq.msg_count, pq.msg_size) == (1, 1)


def test_max_span_is_last_minus_first_held():
    pq = ProcessQueue()
    ms = held(pq, 5, 6, 900)
    assert pq.max_span() == 895
    pq.remove_messages(ms[:1])
    assert pq.max_span() == 894


def test_orderly_take_returns_lowest_offsets_in_order():
    pq = ProcessQueue()
    held(pq, 3, 1, 2)
    assert [m.queue_offset for m in pq.take_messages(2)] == [1, 2]


def test_orderly_commit_returns_last_taken_plus_one_and_frees_them():
    pq = ProcessQueue()
    held(pq, 1, 2, 3)
    pq.take_messages(2)
    assert pq.commit() == 3
    assert pq.msg_count == 1


def test_orderly_rollback_gives_taken_messages_back_first():
    pq = ProcessQueue()
    held(pq, 1, 2, 3)
    pq.take_messages(2)
    pq.rollback()
    assert [m.queue_offset for m in pq.take_messages(3)] == [1, 2, 3]


def test_orderly_take_from_empty_ends_the_consume_request():
    pq = ProcessQueue()
    assert pq.put_messages([msg(1)]) is True  # dispatch a consume request
    assert pq.put_messages([msg(2)]) is False  # one is already running
    pq.take_messages(5)
    pq.commit()
    assert pq.take_messages(5) == []
    assert pq.put_messages([msg(3)]) is True


@given(
    st.integers(1, 60).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.permutations(range(n)), min_size=1, max_size=1))
    ),
    st.integers(1, 7),
)
def test_commit_offset_never_passes_an_unfinished_message(case, chunk):
    n, (order,) = case
    pq = ProcessQueue()
    ms = held(pq, *range(100, 100 + n))
    done: set[int] = set()
    for i in range(0, n, chunk):
        part = [ms[j] for j in order[i : i + chunk]]
        done.update(m.queue_offset for m in part)
        offset = pq.remove_messages(part)
        assert offset is not None
        unfinished = [o for o in range(100, 100 + n) if o not in done]
        assert offset == (min(unfinished) if unfinished else 100 + n)
