"""SQL92 verdicts computed at dispatch (``mqstore.consumequeue.filter_bits``): reads that
take them answer exactly what reads without them answer, whatever was registered when,
and whatever state a crash left the verdict files in."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from mqstore import Message, MessageStore, StoreConfig
from mqstore.consumequeue import filter_bits
from mqstore.consumequeue.batch_read import read_filtered
from mqstore.consumequeue.filter import SQL92, Subscription, parse_subscription
from mqstore.consumequeue.get import PullLimits, select
from mqstore.message import properties_to_string
from mqstore.pull import _decoder, _raw_filter
from mqstore.sql92 import SqlParseError
from mqstore.status import GetStatus

TOPIC = "T"
EXPRESSIONS = (
    "a > 5",
    "a = 1 OR b = 'abc'",
    "TAGS = 'TagA' AND a BETWEEN 1 AND 10",
    "TAGS IN ('TagA', 'TagB') OR b IS NULL",
    "NOT (a = 2)",
    "a <> 3",
    "b CONTAINS 'b' AND a IS NOT NULL",
    "a = 2.0 OR a IN ('x', '7')",
    "b = 'abc'",
    "TAGS = 'TagB'",
)
"""Expressions of every kind of bound: a TAGS bound, a substring bound, none."""
VALUES = ("0", "1", "2", "3", "7", "10", "11", "abc", "xbz", "", "2.0", "NaN")

messages = st.lists(
    st.tuples(
        st.sampled_from(("TagA", "TagB", None)),
        st.dictionaries(st.sampled_from(("a", "b")), st.sampled_from(VALUES), max_size=2),
    ),
    min_size=1,
    max_size=40,
)
registrations = st.lists(
    st.tuples(st.integers(0, 40), st.sampled_from(EXPRESSIONS)),
    max_size=4,
    unique_by=lambda t: t[1],
)


def _config(root: Path) -> StoreConfig:
    """Small files, so reads and verdicts cross file boundaries; a pull that scans 5
    units at most, so its bound matters."""
    return StoreConfig(
        root_dir=root, mapped_file_size_consume_queue=20 * 16, max_filter_message_size=100
    )


@contextmanager
def _store(root: Path) -> Iterator[MessageStore]:
    with (
        mock.patch.object(filter_bits, "SEGMENT_UNITS", 8),
        MessageStore.open(_config(root)) as store,
    ):
        yield store


def _put(
    store: MessageStore, msgs: list[tuple[str | None, dict[str, str]]], first: int = 0
) -> None:
    for i, (tags, props) in enumerate(msgs, first):
        store.put_message(Message(topic=TOPIC, body=b"m%d" % i, tags=tags, properties=props))


def _expected(msgs: list[tuple[str | None, dict[str, str]]], sub: Subscription) -> list[int]:
    """The queue offsets ``sub`` delivers, each message evaluated on its own."""
    out = []
    for i, (tags, props) in enumerate(msgs):
        full = {**props, "TAGS": tags} if tags is not None else dict(props)
        if sub.matches_properties(properties_to_string(full)):
            out.append(i)
    return out


def _batch_all(store: MessageStore, sub: Subscription, count: int) -> list[int]:
    end, offset, got = store.max_offset_in_queue(TOPIC, 0), 0, []
    while offset < end:
        b = store.read_batch(TOPIC, 0, offset, count, tags=True, subscription=sub)
        got += b.queue_offsets
        offset = b.next_begin_offset
    return got


def _pull_all(store: MessageStore, sub: Subscription) -> list[int]:
    end, offset, got = store.max_offset_in_queue(TOPIC, 0), 0, []
    while offset < end:
        r = store.get_message("g", TOPIC, 0, offset, 3, sub)
        got += [m.queue_offset for m in r.messages]
        offset = r.next_begin_offset
    return got


def _same_with_and_without(store: MessageStore, sub: Subscription, want: list[int]) -> None:
    """From every offset: the pull (decoded and raw) and the batch read give the same
    answer with the verdicts as without them; with the match list too, the batch read
    gives the same answer and the pull the matches ``want`` up to its next offset (after
    the last unit it covered)."""
    cq = store.consume_queue(TOPIC, 0)
    assert cq is not None
    bits = store.logics.filter_bits
    assert bits is not None
    verdicts = bits.reader(TOPIC, 0, sub)
    matches = bits.match_reader(TOPIC, 0, sub)
    log, limits = store.segments, PullLimits.from_config(store.cfg)
    for offset in range(cq.min_offset, cq.max_offset):
        for take in (_decoder(sub), _raw_filter(sub, False)):
            with_, without = (
                select(cq, log, offset, 3, sub, limits, take, verdicts=v) for v in (verdicts, None)
            )
            assert (with_.status, with_.next_begin_offset, with_.queue_offsets) == (
                without.status, without.next_begin_offset, without.queue_offsets,
            )  # fmt: skip
            if matches is None:
                continue
            listed = select(
                cq, log, offset, 3, sub, limits, take, verdicts=verdicts, matches=(matches, take)
            )
            nxt = listed.next_begin_offset
            assert nxt > offset
            assert listed.queue_offsets == [q for q in want if offset <= q < nxt][:3]
            assert listed.status is (GetStatus.FOUND if listed.queue_offsets else without.status)
        a, b, c = (
            read_filtered(cq, log, offset, 2, sub, with_tags=True, verdicts=v, matches=m)
            for v, m in ((verdicts, None), (None, None), (verdicts, matches))
        )
        assert a == b == c


@settings(max_examples=30)  # each example a store: about 0.3 s
@given(messages, registrations, st.integers(1, 5))
def test_reads_with_verdicts_answer_what_reads_without_them_answer(
    msgs: list[tuple[str | None, dict[str, str]]],
    regs: list[tuple[int, str]],
    count: int,
) -> None:
    with tempfile.TemporaryDirectory() as tmp, _store(Path(tmp)) as store:
        at = 0
        for position, expression in sorted(regs):
            upto = max(at, min(position, len(msgs)))
            _put(store, msgs[at:upto], at)
            at = upto
            assert store.register_sql_filter(TOPIC, expression) is not None
        _put(store, msgs[at:], at)
        assert store.wait_dispatched(60)
        for expression in {e for _, e in regs} | {EXPRESSIONS[0]}:
            sub = parse_subscription(expression, SQL92)
            want = _expected(msgs, sub)
            assert _batch_all(store, sub, count) == want
            assert _pull_all(store, sub) == want
            _same_with_and_without(store, sub, want)


def _registered_store(root: Path, n: int = 40) -> list[tuple[str | None, dict[str, str]]]:
    """A store whose expressions were all registered before its ``n`` messages; closed."""
    msgs = [("TagA" if i % 3 else "TagB", {"a": str(i % 12), "b": "abc"}) for i in range(n)]
    with _store(root) as store:
        for e in EXPRESSIONS:
            store.register_sql_filter(TOPIC, e)
        _put(store, msgs)
        assert store.wait_dispatched(60)
    return msgs


def _reads_match(root: Path, msgs: list[tuple[str | None, dict[str, str]]]) -> None:
    with _store(root) as store:
        for e in EXPRESSIONS:
            sub = parse_subscription(e, SQL92)
            assert _batch_all(store, sub, 4) == _expected(msgs, sub), e
            assert _pull_all(store, sub) == _expected(msgs, sub), e


def _low32(store: MessageStore, n: int) -> NDArray[np.uint32]:
    """The low 32 bits of the physical offsets of the queue's first ``n`` units."""
    cq = store.consume_queue(TOPIC, 0)
    assert cq is not None
    units = [cq.unit_at(q) for q in range(n)]
    return np.array([u[0] & 0xFFFFFFFF for u in units if u is not None], np.uint32)


def _verdict_files(root: Path) -> list[Path]:
    return sorted(f for f in (root / "filterbits" / TOPIC / "0").iterdir() if f.name.isdigit())


def test_every_unit_dispatched_after_registration_has_a_verdict(tmp_path: Path) -> None:
    _registered_store(tmp_path, 20)
    with _store(tmp_path) as store:
        bits = store.logics.filter_bits
        assert bits is not None
        verdicts = bits.reader(TOPIC, 0, parse_subscription("a > 5", SQL92))
        assert verdicts is not None
        v = verdicts(0, _low32(store, 20))
        assert v is not None
        # the first record sits at physical offset 0, like a blank unit: read the old way
        assert v[0].tolist() == [False] + [True] * 19
        assert v[1].tolist() == [False] + [i % 12 > 5 for i in range(1, 20)]


def test_a_torn_verdict_file_is_read_the_old_way(tmp_path: Path) -> None:
    msgs = _registered_store(tmp_path)
    files = _verdict_files(tmp_path)
    with files[1].open("r+b") as f:  # a file cut short, another with zeroed entries
        f.truncate(12)
    with files[2].open("r+b") as f:
        f.write(bytes(24))
    files[3].unlink()
    _reads_match(tmp_path, msgs)


def test_stale_verdicts_naming_other_records_are_not_taken(tmp_path: Path) -> None:
    msgs = _registered_store(tmp_path)
    for f in _verdict_files(tmp_path):  # every entry says TRUE for all slots, of another record
        e = np.fromfile(f, filter_bits.ENTRY)
        e["check"] += 1
        e["hit"] = 0xFFFF
        e.tofile(f)
    _reads_match(tmp_path, msgs)


def test_an_unreadable_slots_file_drops_every_verdict(tmp_path: Path) -> None:
    msgs = _registered_store(tmp_path)
    slots = tmp_path / "filterbits" / filter_bits.SLOTS_FILE
    slots.write_text('{"version": 1, "topics": {"T": ["a >')
    with _store(tmp_path) as store:
        assert not (tmp_path / "filterbits").exists()
        assert store.register_sql_filter(TOPIC, "b = 'abc'") == 0  # slots start afresh
    _reads_match(tmp_path, msgs)


def test_registrations_survive_a_reopen_in_their_slots(tmp_path: Path) -> None:
    _registered_store(tmp_path, 1)
    with _store(tmp_path) as store:
        assert [store.register_sql_filter(TOPIC, e) for e in EXPRESSIONS] == list(
            range(len(EXPRESSIONS))
        )
    doc = json.loads((tmp_path / "filterbits" / filter_bits.SLOTS_FILE).read_text())
    assert doc == {"version": 1, "topics": {TOPIC: list(EXPRESSIONS)}}


def test_a_topic_takes_at_most_max_slots_expressions(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        slots = [store.register_sql_filter(TOPIC, f"a = {i}") for i in range(17)]
    assert slots == [*range(filter_bits.MAX_SLOTS), None]


def test_an_expression_that_does_not_compile_is_refused(tmp_path: Path) -> None:
    with _store(tmp_path) as store, pytest.raises(SqlParseError):
        store.register_sql_filter(TOPIC, "a >")


def test_a_topic_without_registered_expressions_writes_no_verdicts(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        store.register_sql_filter("Other", "a > 5")
        _put(store, [("TagA", {"a": "7"})] * 50)
        assert store.wait_dispatched(60)
    assert os.listdir(tmp_path / "filterbits") == [filter_bits.SLOTS_FILE]


def test_verdicts_beyond_a_recovered_queue_end_are_cut(tmp_path: Path) -> None:
    _registered_store(tmp_path, 20)
    extra = tmp_path / "filterbits" / TOPIC / "0" / f"{24:020d}"  # entries 24.. and 21..23
    extra.write_bytes(bytes(range(64)))
    tail = _verdict_files(tmp_path)[2]  # entries 16..23: 20..23 are past the end
    with tail.open("ab") as f:
        f.write(bytes(range(32)))
    with _store(tmp_path):
        pass
    assert not extra.exists()
    entries = np.fromfile(tail, "<u8")
    assert entries[:4].all()
    assert not entries[4:].any()


def test_recovery_after_a_crash_writes_the_verdicts_again(tmp_path: Path) -> None:
    msgs = [("TagA", {"a": str(i % 12)}) for i in range(100)]
    with _store(tmp_path) as store:
        store.register_sql_filter(TOPIC, "a > 5")
        _put(store, msgs)
        assert store.wait_dispatched(60)
        store.flush()
        store.abandon()
    for f in _verdict_files(tmp_path):
        f.unlink()
    with _store(tmp_path) as store:  # the abnormal recovery dispatches every record again
        bits = store.logics.filter_bits
        assert bits is not None
        sub = parse_subscription("a > 5", SQL92)
        verdicts = bits.reader(TOPIC, 0, sub)
        assert verdicts is not None
        v = verdicts(0, _low32(store, 100))
        assert v is not None and v[0][1:].all()
        assert _batch_all(store, sub, 7) == _expected(msgs, sub)
