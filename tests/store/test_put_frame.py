"""The framer's cache (the common message framed from each topic's and host's cached
parts, ``MessageFramer.frame``) writes exactly the bytes of its full steps
(validation, property format, compression), and takes those steps whenever it must."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore import Message, MessageStore, PutStatus
from mqstore.commitlog import format as fmt
from mqstore.errors import IllegalMessageError
from mqstore.message import decode_offset_msg_id
from tests.helpers import make_store

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"))
messages = st.builds(
    Message,
    topic=st.just("T"),
    body=st.binary(min_size=1, max_size=300),
    tags=st.none() | text,
    keys=st.none() | text | st.lists(text, max_size=3),
    queue_id=st.integers(0, 7),
    flag=st.integers(-(2**31), 2**31 - 1),
    born_timestamp=st.none() | st.integers(0, 2**62),
    born_host=st.sampled_from([("127.0.0.1", 0), ("10.0.0.1", 5), ("::1", 7)]),
    reconsume_times=st.integers(0, 16),
)


def record(s: MessageStore, phys: int, size: int) -> bytearray:
    raw = bytearray(s.commitlog.read(phys, size) or b"")
    for pos in (fmt.QUEUE_OFFSET_POS, fmt.PHYSICAL_OFFSET_POS):
        raw[pos : pos + 8] = bytes(8)
    return raw


@contextlib.contextmanager
def full_steps(s: MessageStore) -> Iterator[None]:
    """Every message framed by the full steps, none from the cache alone (as under a
    4.x property format, where no body is framed from the cache)."""
    framer = s.writer.framer
    limit = framer._plain_body_limit
    framer._plain_body_limit = 0
    try:
        yield
    finally:
        framer._plain_body_limit = limit


@settings(max_examples=60, deadline=None)
@given(msgs=st.lists(messages, min_size=1, max_size=4))
def test_cached_and_full_framing_write_the_same_bytes(tmp_path_factory, msgs) -> None:
    s = make_store(tmp_path_factory.mktemp("fast"))
    uniq = itertools.count()
    s.writer.framer.next_uniq = lambda: f"{next(uniq):032X}"
    s.commitlog._clock = lambda: 1_700_000_000_123
    try:
        for m in msgs:
            s.put_message(Message(topic="T", body=b"warm", born_host=m.born_host))
            a = s.put_message(m)  # framed from the cache when it applies
            s.writer.framer.next_uniq = lambda u=a.uniq_key: u  # same UNIQ_KEY for the full steps
            with full_steps(s):
                b = s.put_message(m)
            s.writer.framer.next_uniq = lambda: f"{next(uniq):032X}"
            assert a.status is b.status is PutStatus.PUT_OK
            assert (a.size, a.store_timestamp, a.uniq_key) == (
                b.size,
                b.store_timestamp,
                b.uniq_key,
            )
            assert b.queue_offset == a.queue_offset + 1
            assert b.physical_offset == a.physical_offset + a.size
            assert record(s, a.physical_offset, a.size) == record(s, b.physical_offset, b.size)
            assert s.look_message_by_offset(a.physical_offset) is not None
    finally:
        s.close()


def test_a_full_segment_rolls_to_the_next(tmp_path: Path) -> None:
    s = make_store(tmp_path, commitlog_file_size=4096)
    try:
        results = [
            s.put_message(Message(topic="T", body=b"x" * 100, keys=f"k{i}")) for i in range(60)
        ]
        assert all(r.status is PutStatus.PUT_OK for r in results)
        assert [r.queue_offset for r in results] == list(range(60))
        assert len(s.segments.files) > 1
        assert s.wait_dispatched(60)
        got = s.get_message("g", "T", 0, 0, 64).messages
        assert [m.keys for m in got] == [[f"k{i}"] for i in range(len(got))]
    finally:
        s.close()


def test_refusals_come_with_their_status(tmp_path: Path) -> None:
    s = make_store(tmp_path, max_message_size=64)
    try:
        assert s.put_message(Message(topic="T", body=b"ok")).status is PutStatus.PUT_OK
        too_big = s.put_message(Message(topic="T", body=b"x" * 65))
        assert too_big.status is PutStatus.MESSAGE_ILLEGAL
        long_props = s.put_message(Message(topic="T", body=b"x", keys="k" * 40000))
        assert long_props.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    finally:
        s.close()


def test_the_common_message_is_framed_from_the_cache(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    framer = s.writer.framer
    try:
        s.put_message(Message(topic="T", body=b"first sight of the topic and host"))
        full = framer._frame_any
        framer._frame_any = lambda *a: (_ for _ in ()).throw(AssertionError("full steps"))  # type: ignore[method-assign]
        r = s.put_message(Message(topic="T", body=b"abc", tags="A", keys=["k1", "k2"]))
        assert r.status is PutStatus.PUT_OK and r.queue_offset == 1
        framer._frame_any = full  # type: ignore[method-assign]
        rec = s.look_message_by_offset(r.physical_offset)
        assert rec is not None and rec.keys == ["k1", "k2"] and rec.tags == "A"
    finally:
        s.close()


@settings(max_examples=40, deadline=None)
@given(msgs=st.lists(messages, min_size=1, max_size=6))
def test_cached_and_full_framing_of_batches_write_the_same_bytes(tmp_path_factory, msgs) -> None:
    s = make_store(tmp_path_factory.mktemp("fastb"))
    s.commitlog._clock = lambda: 1_700_000_000_123
    try:
        for host in {m.born_host for m in msgs}:
            s.put_message(Message(topic="T", body=b"warm", born_host=host))
        uniq = itertools.count()
        s.writer.framer.next_uniq = lambda: f"{next(uniq):032X}"
        a = s.put_messages(msgs)
        same_keys = iter([x.uniq_key for x in a])
        s.writer.framer.next_uniq = lambda: next(same_keys)
        with full_steps(s):
            b = s.put_messages(msgs)
        for x, y in zip(a, b, strict=True):
            assert x.status is y.status is PutStatus.PUT_OK
            assert (x.size, x.store_timestamp, x.uniq_key) == (
                y.size,
                y.store_timestamp,
                y.uniq_key,
            )
            assert record(s, x.physical_offset, x.size) == record(s, y.physical_offset, y.size)
        n = len(msgs)
        for i, m in enumerate(msgs):  # queue offsets continue per queue across the batches
            same = [j for j in range(n) if msgs[j].queue_id == m.queue_id]
            assert b[i].queue_offset - a[i].queue_offset == len(same)
    finally:
        s.close()


def test_a_batch_that_does_not_fit_rolls_to_the_next_segment(tmp_path: Path) -> None:
    s = make_store(tmp_path, commitlog_file_size=4096)
    try:
        s.put_message(Message(topic="T", body=b"warm"))
        batch = [Message(topic="T", body=b"x" * 100, keys=f"k{i}") for i in range(8)]
        results = [r for _ in range(6) for r in s.put_messages(batch)]
        assert all(r.status is PutStatus.PUT_OK for r in results)
        assert [r.queue_offset for r in results] == list(range(1, 49))
        assert len(s.segments.files) > 1
        for r in results:
            rec = s.look_message_by_offset(r.physical_offset)
            assert rec is not None and rec.queue_offset == r.queue_offset
    finally:
        s.close()


def test_batch_results_carry_offset_msg_ids_and_record_sizes(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    try:
        msgs = [Message("T", b"m%d" % i, tags="a", keys=[f"k{i}"]) for i in range(5)]
        results = s.put_messages(msgs)
        assert isinstance(results, list) and len(results) == 5
        for r, nxt in itertools.pairwise(results):
            assert nxt.physical_offset == r.physical_offset + r.size
        for r in results:
            assert r.status is PutStatus.PUT_OK
            host, offset = decode_offset_msg_id(r.msg_id)
            assert offset == r.physical_offset
            assert host == s.cfg.store_host
            rec = s.look_message_by_offset(r.physical_offset)
            assert rec is not None and rec.queue_offset == r.queue_offset
    finally:
        s.close()


def _tail_after_write_position(s: MessageStore) -> bytes:
    mf = s.segments.last
    assert mf is not None
    return bytes(mf.view[mf.wrote_position : mf.wrote_position + 256])


@pytest.mark.parametrize(
    "field",
    [
        {"flag": 2**31},
        {"flag": -(2**31) - 1},
        {"reconsume_times": 2**31},
        {"queue_id": 2**31},
        {"born_timestamp": 2**63},
        {"born_timestamp": -(2**63) - 1},
        # Not ints, though within range: a pack would raise halfway through a header.
        {"flag": 2.0},
        {"reconsume_times": 1.0},
        {"queue_id": 1.0},
        {"born_timestamp": 1.5},
    ],
)
@pytest.mark.parametrize("batch", [False, True])
def test_a_number_out_of_its_field_is_refused_before_any_byte_is_written(
    tmp_path: Path, field: dict[str, float], batch: bool
) -> None:
    s = make_store(tmp_path)
    try:
        s.put_message(Message(topic="T", body=b"first sight of the topic and host"))
        before = s.max_physical_offset
        assert _tail_after_write_position(s) == bytes(256)
        bad = Message(topic="T", body=b"abc", **field)  # common in every other way
        with pytest.raises(IllegalMessageError):
            if batch:
                s.put_messages([Message(topic="T", body=b"fine"), bad])
            else:
                s.put_message(bad)
        assert s.max_physical_offset == before
        assert _tail_after_write_position(s) == bytes(256)
    finally:
        s.close()


topics = st.sampled_from(["T", "T-1", "Orders_2", "%RETRY%g", "x" * 127])
queue_ids = st.sampled_from([0, 1, 2, 12, 2**31 - 1]) | st.integers(0, 2**31 - 1)
mixed = st.builds(
    Message,
    topic=topics,
    body=st.binary(min_size=1, max_size=64),
    tags=st.none() | text,
    keys=st.none() | text,
    queue_id=queue_ids,
)


@settings(max_examples=40, deadline=None)
@given(msgs=st.lists(mixed, min_size=1, max_size=6), batch=st.booleans())
def test_cached_framing_keeps_each_topic_and_queue_apart(tmp_path_factory, msgs, batch) -> None:
    """Puts to several topics and queues (each topic's frame and queue keys cached by
    the framer) write the full steps' bytes and continue each queue's offsets."""
    s = make_store(tmp_path_factory.mktemp("topics"))
    s.commitlog._clock = lambda: 1_700_000_000_123
    try:
        for topic in {m.topic for m in msgs}:
            s.put_message(Message(topic=topic, body=b"warm"))
        uniq = itertools.count()
        s.writer.framer.next_uniq = lambda: f"{next(uniq):032X}"
        fast = s.put_messages(msgs) if batch else [s.put_message(m) for m in msgs]
        same_keys = iter([r.uniq_key for r in fast])
        s.writer.framer.next_uniq = lambda: next(same_keys)
        with full_steps(s):
            general = [s.put_message(m) for m in msgs]
        seen: dict[tuple[str, int], int] = {}
        for m, a, b in zip(msgs, fast, general, strict=True):
            assert a.status is b.status is PutStatus.PUT_OK
            assert record(s, a.physical_offset, a.size) == record(s, b.physical_offset, b.size)
            q = (m.topic, m.queue_id)
            assert a.queue_offset == seen.get(q, 0 if m.queue_id else 1)  # warm puts went to 0
            seen[q] = a.queue_offset + 1
            rec = s.look_message_by_offset(a.physical_offset)
            assert rec is not None and (rec.topic, rec.queue_id) == q
        for m, b in zip(msgs, general, strict=True):  # the full steps continue them
            q = (m.topic, m.queue_id)
            assert b.queue_offset == seen[q]
            seen[q] += 1
    finally:
        s.close()


def test_offset_msg_ids_of_any_offsets_are_the_hex_format(tmp_path: Path) -> None:
    """The writer's msg ids (the offset's high digits kept between ids) equal
    store host hex + the offset as 16 uppercase hex digits, for any offsets in order."""
    s = make_store(tmp_path)
    host = s.commitlog.store_host_hex
    try:

        @settings(max_examples=200, deadline=None)
        @given(physs=st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=12))
        def ids_match(physs: list[int]) -> None:
            physs.sort()
            assert s.writer._msg_ids(physs) == [f"{host}{p:016X}" for p in physs]

        ids_match()
    finally:
        s.close()


@pytest.mark.parametrize("batch", [False, True])
def test_msg_ids_stay_right_across_64_kib_of_log(tmp_path: Path, batch: bool) -> None:
    s = make_store(tmp_path)
    try:
        s.put_message(Message(topic="T", body=b"warm"))
        msgs = [Message(topic="T", body=b"x" * 200, keys=f"k{i}") for i in range(700)]
        if batch:
            results = [r for i in range(0, 700, 35) for r in s.put_messages(msgs[i : i + 35])]
        else:
            results = [s.put_message(m) for m in msgs]
        assert results[-1].physical_offset > 2 * 65536
        host = s.commitlog.store_host_hex
        assert [r.msg_id for r in results] == [f"{host}{r.physical_offset:016X}" for r in results]
    finally:
        s.close()
