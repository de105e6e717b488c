"""``read_batch``: an embedded consumer's columnar read gives what ``get_message`` gives.

Whatever path a batch takes (the columnar one over the mapped log, or ``get_message``
for records of another shape), its queue offsets, bodies and tags are those of
``get_message`` read to the end of the queue, and its statuses at the queue's bounds are
``get_message``'s.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore import Message, MessageStore
from mqstore.consumequeue.filter import SQL92, Subscription, parse_subscription
from mqstore.status import GetStatus
from tests.helpers import make_store

TOPIC = "orders"


def _pulled(s: MessageStore, topic: str, qid: int) -> list[tuple[int, bytes, str | None]]:
    out: list[tuple[int, bytes, str | None]] = []
    offset = 0
    while True:
        r = s.get_message("g", topic, qid, offset, 32)
        if not r.messages:
            return out
        out += [(m.queue_offset, m.body, m.tags) for m in r.messages]
        offset = r.next_begin_offset


def _batched(
    s: MessageStore, topic: str, qid: int, count: int
) -> list[tuple[int, bytes, str | None]]:
    out: list[tuple[int, bytes, str | None]] = []
    offset = 0
    while True:
        b = s.read_batch(topic, qid, offset, count, tags=True)
        if not b.bodies:
            return out
        assert b.tags is not None and b.status is GetStatus.FOUND
        out += list(zip(b.queue_offsets, b.bodies, b.tags, strict=True))
        offset = b.next_begin_offset


messages = st.lists(
    st.tuples(
        st.integers(0, 2),  # queue
        st.binary(min_size=1, max_size=300),
        st.one_of(st.none(), st.sampled_from(["A", "TagB", "ünï"])),
    ),
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(msgs=messages, count=st.integers(1, 70))
def test_read_batch_gives_get_messages_offsets_bodies_and_tags(
    tmp_path_factory: object, msgs: list[tuple[int, bytes, str | None]], count: int
) -> None:
    root = tmp_path_factory.mktemp("s")  # type: ignore[attr-defined]
    # small files: batches end at consume-queue and CommitLog file ends
    s = make_store(root, commitlog_file_size=8192, mapped_file_size_consume_queue=20 * 16)
    try:
        for q, body, tags in msgs:
            s.put_message(Message(topic=TOPIC, body=body, tags=tags, queue_id=q))
        assert s.wait_dispatched(30)
        for q in range(3):
            assert _batched(s, TOPIC, q, count) == _pulled(s, TOPIC, q)
    finally:
        s.close()


def test_compressed_bodies_come_back_inflated(tmp_path: Path) -> None:
    s = make_store(tmp_path, compress_msg_body_over=64)
    try:
        bodies = [bytes([i]) * 5000 for i in range(5)]
        for b in bodies:
            s.put_message(Message(topic=TOPIC, body=b, tags="z"))
        assert s.wait_dispatched(30)
        assert [b for _q, b, _t in _batched(s, TOPIC, 0, 1024)] == bodies
    finally:
        s.close()


def test_a_batch_is_not_held_to_a_pulls_32_messages(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    try:
        s.put_messages([Message(topic=TOPIC, body=b"%d" % i) for i in range(100)])
        assert s.wait_dispatched(30)
        b = s.read_batch(TOPIC, 0, 10, 1000)
        assert (len(b), b.next_begin_offset, b.queue_offsets[0], b.tags) == (90, 100, 10, None)
        assert b.bodies[0] == b"10"
    finally:
        s.close()


def test_statuses_at_the_bounds_are_get_messages(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    try:
        s.put_message(Message(topic=TOPIC, body=b"x"))
        assert s.wait_dispatched(30)
        for topic, offset in ((TOPIC, 1), (TOPIC, 5), ("other", 0)):
            r = s.get_message("g", topic, 0, offset)
            b = s.read_batch(topic, 0, offset)
            assert (b.status, b.next_begin_offset, b.min_offset, b.max_offset, b.bodies) == (
                r.status, r.next_begin_offset, r.min_offset, r.max_offset, [],
            )  # fmt: skip
    finally:
        s.close()


def _filtered_pulled(s: MessageStore, qid: int, sub: Subscription) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset, end = 0, s.max_offset_in_queue(TOPIC, qid)
    while offset < end:
        r = s.get_message("g", TOPIC, qid, offset, 32, sub)
        out += [(m.queue_offset, m.body) for m in r.messages]
        offset = r.next_begin_offset
    return out


def _filtered_batched(
    s: MessageStore, qid: int, sub: Subscription, count: int
) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset, end = 0, s.max_offset_in_queue(TOPIC, qid)
    while offset < end:
        b = s.read_batch(TOPIC, qid, offset, count, subscription=sub)
        assert b.status is (GetStatus.FOUND if b.bodies else GetStatus.NO_MATCHED_MESSAGE)
        assert offset < b.next_begin_offset
        out += list(zip(b.queue_offsets, b.bodies, strict=True))
        offset = b.next_begin_offset
    return out


SUBSCRIPTIONS = [
    parse_subscription("TagB || Aa"),
    parse_subscription("hit = 'yes'", SQL92),
    parse_subscription("TAGS = 'TagB' AND hit = 'yes'", SQL92),
    parse_subscription("n > 3 OR TAGS IN ('BB')", SQL92),
    parse_subscription("hit <> 'yes'", SQL92),
]


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    msgs=st.lists(
        st.tuples(
            st.integers(0, 1),  # queue
            st.sampled_from(["TagB", "Aa", "BB", None]),  # "Aa" and "BB" share a hash code
            st.sampled_from(["yes", "no", None]),
            st.integers(0, 6),
            st.booleans(),  # compressed
        ),
        min_size=1,
        max_size=50,
    ),
    count=st.integers(1, 9),
)
def test_filtered_read_batch_delivers_what_get_message_delivers(
    tmp_path_factory: object, msgs: list[tuple[int, str | None, str | None, int, bool]], count: int
) -> None:
    root = tmp_path_factory.mktemp("s")  # type: ignore[attr-defined]
    s = make_store(
        root, commitlog_file_size=8192, mapped_file_size_consume_queue=20 * 16,
        compress_msg_body_over=64,
    )  # fmt: skip
    try:
        for i, (q, tags, hit, n, big) in enumerate(msgs):
            props = {"n": str(n)} | ({"hit": hit} if hit else {})
            body = f"{i}".encode() * (40 if big else 1)
            s.put_message(Message(topic=TOPIC, body=body, tags=tags, queue_id=q, properties=props))
        assert s.wait_dispatched(30)
        for sub in SUBSCRIPTIONS:
            for q in range(2):
                assert _filtered_batched(s, q, sub, count) == _filtered_pulled(s, q, sub)
    finally:
        s.close()


def test_filtered_read_batch_skips_a_queue_without_matches_in_one_call(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    try:
        for i in range(500):
            s.put_message(Message(topic=TOPIC, body=b"x", properties={"hit": "no", "i": str(i)}))
        s.put_message(Message(topic=TOPIC, body=b"last", properties={"hit": "yes"}))
        assert s.wait_dispatched(30)
        b = s.read_batch(TOPIC, 0, 0, 10, subscription=parse_subscription("hit = 'yes'", SQL92))
        assert (b.status, b.queue_offsets, b.bodies) == (GetStatus.FOUND, [500], [b"last"])
        assert b.next_begin_offset == 501
    finally:
        s.close()
