"""SQL92 match lists (``mqstore.consumequeue.match_list``): reads jump from match to match,
and whatever state a crash leaves the lists in, reads answer what the messages say."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mqstore.consumequeue import match_list
from mqstore.consumequeue.filter import SQL92, parse_subscription
from mqstore.consumequeue.match_list import CHECK_MASK, GAP_SHIFT, Q_SHIFT
from mqstore.message import properties_to_string
from tests.consumequeue.test_filter_bits import (
    EXPRESSIONS,
    TOPIC,
    _batch_all,
    _expected,
    _pull_all,
    _put,
    _reads_match,
    _registered_store,
    _store,
)

REPO = Path(__file__).resolve().parents[2]


def _lists(root: Path, slot: int = 0) -> list[Path]:
    """The queue's list files of one slot, in offset order."""
    return sorted((root / "filterbits" / TOPIC / "0").glob(f"*{match_list.SUFFIX}{slot}"))


def _entries(root: Path, slot: int = 0) -> list[tuple[int, int, int]]:
    """(queue offset, stretch start, check) of every entry of a slot's lists."""
    out = []
    for f in _lists(root, slot):
        base = int(f.name.partition(match_list.SUFFIX)[0])
        for w in np.fromfile(f, "<u8").tolist():
            if w:
                q = base + (w >> Q_SHIFT)
                out.append((q, q - (w >> GAP_SHIFT & match_list.REL_MASK), w & CHECK_MASK))
    return out


def test_a_list_names_each_true_unit_and_covers_the_units_before_it(tmp_path: Path) -> None:
    msgs = _registered_store(tmp_path, 40)
    sub = parse_subscription(EXPRESSIONS[0], SQL92)  # slot 0: a > 5
    want = _expected(msgs, sub)
    entries = _entries(tmp_path)
    assert [q for q, _, _ in entries] == [q for q in want if q]  # unit 0 sits at physical 0
    with _store(tmp_path) as store:
        cq = store.consume_queue(TOPIC, 0)
        assert cq is not None
        for q, _, check in entries:
            unit = cq.unit_at(q)
            assert unit is not None and unit[0] & CHECK_MASK == check
    assert entries[0][1] == 1  # registered before unit 0, which has no verdict
    for (q0, _, _), (_, start, _) in itertools.pairwise(entries):
        assert start == q0 + 1  # each stretch starts after the previous match


def test_a_pull_through_the_list_reaches_past_its_bound_of_examined_units(
    tmp_path: Path,
) -> None:
    """The store's pull examines about 5 units (``max_filter_message_size`` 100): without
    the list, matches 4 units apart come one per pull; with it, 3 per pull, to the end of
    the consume-queue file (16 units) at most."""
    msgs = [("TagA", {"a": "9" if i % 4 == 1 else "1"}) for i in range(48)]
    sub = parse_subscription("a > 5", SQL92)
    with _store(tmp_path) as store:
        _put(store, msgs[:20])
        assert store.wait_dispatched(60)  # so none of the first 20 has a verdict
        store.register_sql_filter(TOPIC, "a > 5")
        _put(store, msgs[20:], 20)
        assert store.wait_dispatched(60)
        pulls = [store.get_message("g", TOPIC, 0, q, 3, sub) for q in (2, 32, 42, 46)]
    got = [([m.queue_offset for m in r.messages], r.next_begin_offset) for r in pulls]
    assert got[0] == ([5], 8)  # dispatched before the registration: 6 units examined
    assert got[1] == ([33, 37, 41], 42)
    assert got[2] == ([45], 46)  # the list ends at its last match
    assert got[3] == ([], 48)


def test_a_torn_list_tail_is_zeroed_and_read_the_old_way(tmp_path: Path) -> None:
    msgs = _registered_store(tmp_path)
    lists = _lists(tmp_path)
    words = np.fromfile(lists[1], "<u8")
    count = int(np.count_nonzero(words))
    assert count >= 2
    words[1] = 0  # a hole, then an entry after it
    words[count] = words[count - 1] + (1 << Q_SHIFT)  # and garbage past the end
    words.tofile(lists[1])
    _reads_match(tmp_path, msgs)
    left = np.fromfile(lists[1], "<u8")
    assert left[:1].all() and not left[1:].any()


def test_entries_naming_other_records_are_not_taken(tmp_path: Path) -> None:
    msgs = _registered_store(tmp_path)
    for slot in range(len(EXPRESSIONS)):
        for f in _lists(tmp_path, slot):  # every check off by one
            words = np.fromfile(f, "<u8")
            live = words != 0
            words[live] = (words[live] & ~np.uint64(CHECK_MASK)) | (
                (words[live] + np.uint64(1)) & np.uint64(CHECK_MASK) | np.uint64(1)
            )
            words.tofile(f)
    _reads_match(tmp_path, msgs)


def test_a_list_ahead_of_its_queue_is_cut_at_the_recovered_end(tmp_path: Path) -> None:
    _registered_store(tmp_path, 20)
    last = _lists(tmp_path)[-1]  # offsets 16..23 of which 20..23 are past the end
    base = int(last.name.partition(match_list.SUFFIX)[0])
    words = np.fromfile(last, "<u8")
    n = int(np.count_nonzero(words))
    fake = [((q - base) << Q_SHIFT) | (1 << GAP_SHIFT) | 5 for q in (21, 22)]
    words[n : n + 2] = fake
    words.tofile(last)
    beyond = last.with_name(f"{24:020d}{match_list.SUFFIX}0")
    beyond.write_bytes(np.array(fake, "<u8").tobytes())
    with _store(tmp_path):
        pass
    assert not beyond.exists()
    assert int(np.count_nonzero(np.fromfile(last, "<u8"))) == n


def test_a_list_behind_its_queue_is_read_the_old_way_and_grows_again(tmp_path: Path) -> None:
    msgs = _registered_store(tmp_path, 40)
    for slot in range(len(EXPRESSIONS)):
        for f in _lists(tmp_path, slot)[2:]:
            f.unlink()
        for f in _lists(tmp_path, slot)[1:]:
            f.write_bytes(bytes(8))
    more = [("TagA", {"a": str(i % 12), "b": "abc"}) for i in range(40, 60)]
    with _store(tmp_path) as store:
        _put(store, more, 40)
        assert store.wait_dispatched(60)
    _reads_match(tmp_path, msgs + more)
    sub = parse_subscription(EXPRESSIONS[0], SQL92)
    listed = [q for q, _, _ in _entries(tmp_path)]
    assert listed[-3:] == [q for q in _expected(msgs + more, sub) if q >= 40][-3:]


CHILD = r"""
import os, signal, sys
from mqstore import Message, MessageStore, StoreConfig, faults
from mqstore.consumequeue import filter_bits
filter_bits.SEGMENT_UNITS = 8
root, hit = sys.argv[1], int(sys.argv[2])
calls = [0]
def kill(**_):
    calls[0] += 1
    if calls[0] == hit:
        os.kill(os.getpid(), signal.SIGKILL)
faults.register("match_list_written", kill)
cfg = StoreConfig(root_dir=root, mapped_file_size_consume_queue=20 * 16,
                  max_filter_message_size=100)
store = MessageStore.open(cfg)
store.register_sql_filter("T", "a > 5")
for i in range(200):
    store.put_message(Message(topic="T", body=b"m%d" % i, properties={"a": str(i % 12)}))
store.wait_dispatched(60)
store.close()
"""


@pytest.mark.parametrize("hit", [1, 6, 13])
def test_a_store_killed_between_a_list_write_and_its_unit_reads_what_it_holds(
    tmp_path: Path, hit: int
) -> None:
    """SIGKILL (a real process) right after a dispatch wrote list entries and before it
    wrote their units: after recovery, reads through the lists deliver exactly the
    messages of the queue that match, and so they do after more messages."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), str(hit)],
        cwd=REPO, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr.decode()
    sub = parse_subscription("a > 5", SQL92)
    with _store(tmp_path) as store:
        assert store.wait_dispatched(60)
        _put(store, [("TagA", {"a": str(i % 12)}) for i in range(5)], 1000)
        assert store.wait_dispatched(60)
        end = store.max_offset_in_queue(TOPIC, 0)
        held, offset = [], 0
        while offset < end:
            r = store.get_message("g", TOPIC, 0, offset, 32, "*")
            held += r.messages
            offset = r.next_begin_offset
        assert [m.queue_offset for m in held] == list(range(end))
        want = [
            m.queue_offset
            for m in held
            if sub.matches_properties(properties_to_string(m.properties))
        ]
        assert want
        assert _batch_all(store, sub, 4) == want
        assert _pull_all(store, sub) == want
    assert all(q < end for q, _, _ in _entries(tmp_path))
