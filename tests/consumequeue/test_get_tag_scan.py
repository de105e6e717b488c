"""The pull's tag-code test and a SQL92 expression's substring bound applied to a whole
range at once (only the units passing them are visited one by one) answer exactly as
visiting every unit does: status, next offset, messages, byte total and the slave
suggestion alike."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore import Message, MessageStore, StoreConfig
from mqstore.commitlog.segments import Segments
from mqstore.consumequeue.filter import ALL, SQL92, Subscription, parse_subscription
from mqstore.consumequeue.get import PullLimits, Selection, select
from mqstore.consumequeue.queue import ConsumeQueue
from mqstore.pull import _decoder, _raw_filter

TAGS = ("A", "B", "C", "D")
MESSAGES = 400
PREFILL = 37
"""The queue's first unit is at this offset: the units before it are blank."""


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ConsumeQueue, Segments]]:
    """A queue of blank units, then messages of random tags (mostly A) and sizes, with
    messages of another queue between them in the CommitLog."""
    root: Path = tmp_path_factory.mktemp("tagscan")
    rnd = random.Random(7)
    cfg = StoreConfig(root_dir=root / "s", commitlog_file_size=1 << 20, max_hash_slot_num=64,
                      max_index_num=256, mapped_file_size_consume_queue=1000 * 20)  # fmt: skip
    with MessageStore.open(cfg) as s:
        for i in range(MESSAGES):
            tag = rnd.choices(TAGS, weights=(90, 5, 4, 1))[0]
            body = b"m%d." % i + b"x" * rnd.randrange(0, 3000)
            hit = {"hit": rnd.choice(("yes", "no", "no", "nope"))} if i % 3 else {}
            s.put_message(Message(topic="T", body=body, tags=tag, queue_id=0, properties=hit))
            s.put_message(Message(topic="T", body=b"other", tags="A", queue_id=1))
        assert s.wait_dispatched(30)
        written = s.queues.find("T", 0)
        assert written is not None
        # The same units from offset PREFILL on, in a queue of their own: blanks before.
        cq = ConsumeQueue(root / "cq" / "T" / "0", "T", 0, 1000 * 20)
        for i in range(MESSAGES):
            unit = written.unit_at(i)
            assert unit is not None
            assert cq.put(unit[0], unit[1], unit[2], PREFILL + i)
        assert cq.min_offset == PREFILL
        yield cq, s.segments


def _same(a: Selection[object], b: Selection[object]) -> tuple[object, ...]:
    return (a.status, a.next_begin_offset, a.queue_offsets, a.total_size,
            a.suggest_pulling_from_slave, [bytes(v) for v in a.items])  # type: ignore[arg-type]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    offset=st.integers(0, PREFILL + MESSAGES - 1),
    count=st.integers(1, 40),
    max_bytes=st.sampled_from([100, 3_000, 20_000, 1 << 20]),
    tags=st.sets(st.sampled_from((*TAGS, "Z")), min_size=1, max_size=3),
    behind=st.floats(0, 1.1),
    filter_bytes=st.sampled_from([20, 400, 2_000, 16_000]),
)
def test_a_tag_filtered_pull_answers_as_visiting_every_unit_would(
    queue: tuple[ConsumeQueue, Segments],
    offset: int,
    count: int,
    max_bytes: int,
    tags: set[str],
    behind: float,
    filter_bytes: int,
) -> None:
    cq, log = queue
    sub: Subscription = parse_subscription(" || ".join(sorted(tags)))
    # "in memory" from a random point of the log: some records in, some out
    limits = PullLimits(filter_bytes, 256 * 1024, 32, 64 * 1024, 8, int(log.max_offset * behind))
    at_once = select(cq, log, offset, count, sub, limits, None, max_bytes=max_bytes)

    def by_code(view: memoryview, q: int) -> memoryview | None:
        unit = cq.unit_at(q)
        assert unit is not None
        return view if sub.matches_code(unit[2]) else None

    one_by_one = select(cq, log, offset, count, ALL, limits, by_code, max_bytes=max_bytes)
    assert _same(at_once, one_by_one) == _same(one_by_one, one_by_one)


@settings(max_examples=200, deadline=None)
@given(
    offset=st.integers(0, PREFILL + MESSAGES - 1),
    count=st.integers(1, 40),
    expression=st.sampled_from(
        ["hit = 'yes'", "TAGS = 'B' AND hit = 'yes'", "hit IN ('yes', 'nope')", "hit IS NULL"]
    ),
    decoded=st.booleans(),
    behind=st.floats(0, 1.1),
    filter_bytes=st.sampled_from([400, 16_000]),
)
def test_a_sql92_filtered_pull_answers_as_visiting_every_unit_would(
    queue: tuple[ConsumeQueue, Segments],
    offset: int,
    count: int,
    expression: str,
    decoded: bool,
    behind: float,
    filter_bytes: int,
) -> None:
    cq, log = queue
    sub = parse_subscription(expression, SQL92)
    limits = PullLimits(filter_bytes, 256 * 1024, 32, 64 * 1024, 8, int(log.max_offset * behind))
    take = _decoder(sub) if decoded else _raw_filter(sub, False)
    assert take is not None
    at_once = select(cq, log, offset, count, sub, limits, take)

    def one_by_one_take(view: memoryview, q: int) -> object:
        unit = cq.unit_at(q)
        assert unit is not None
        return take(view, q) if sub.matches_code(unit[2]) else None

    one_by_one = select(cq, log, offset, count, ALL, limits, one_by_one_take)

    def shown(sel: Selection[object]) -> tuple[object, ...]:
        items = [m if decoded else bytes(m) for m in sel.items]  # type: ignore[arg-type]
        return (sel.status, sel.next_begin_offset, sel.queue_offsets, sel.total_size,
                sel.suggest_pulling_from_slave, items)  # fmt: skip

    assert shown(at_once) == shown(one_by_one)
