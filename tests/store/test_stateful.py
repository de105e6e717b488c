"""Stateful: random puts, pulls, key lookups, clean restarts and crashes against a model.

The model is a plain dict of per-queue message lists (what was acknowledged, in queue
order). ``abandon()`` stops the store the way a killed process stops: the page cache
keeps what was written, so nothing acknowledged may be lost, nothing duplicated, and
queue offsets continue where they were. Files are tiny (4 KiB CommitLog files, 7-unit
queue files, 15-entry index files) so rolls, queue-file edges and index-file edges
happen within a few steps. After every crash the files are checked with
:func:`check_cq_consistency`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mqstore import GetStatus, Message, MessageStore, StoreConfig
from mqstore.consumequeue.filter import parse_subscription
from tests.cq_consistency import check_cq_consistency

TOPICS = ("A", "B")
QUEUES = (0, 1)
TAGS = (None, "Aa", "BB", "C")  # Aa and BB collide
SUBS = ("*", "Aa", "BB || C", "C")
CQ_UNITS = 7


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="mq-stateful-"))
        self.cfg = StoreConfig(
            root_dir=self.dir / "s",
            commitlog_file_size=4096,
            mapped_file_size_consume_queue=CQ_UNITS * 20,
            max_hash_slot_num=8,
            max_index_num=16,
        )
        self.store = MessageStore.open(self.cfg)
        self.model: dict[tuple[str, int], list[tuple[bytes, str | None, str]]] = {}
        self.seq = 0

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(topic=st.sampled_from(TOPICS), qid=st.sampled_from(QUEUES), tags=st.sampled_from(TAGS),
          size=st.integers(1, 300))  # fmt: skip
    def put(self, topic: str, qid: int, tags: str | None, size: int) -> None:
        self.seq += 1
        key = f"key{self.seq}"
        body = (b"%d:" % self.seq).ljust(size, b".")
        r = self.store.put_message(
            Message(topic=topic, body=body, tags=tags, keys=[key], queue_id=qid)
        )
        assert r.status.stored
        q = self.model.setdefault((topic, qid), [])
        assert r.queue_offset == len(q)
        q.append((body, tags, key))

    @rule(topic=st.sampled_from(TOPICS), qid=st.sampled_from(QUEUES), data=st.data(),
          count=st.integers(1, 40), sub=st.sampled_from(SUBS))  # fmt: skip
    def get(self, topic: str, qid: int, data: st.DataObject, count: int, sub: str) -> None:
        assert self.store.wait_dispatched(60)
        q = self.model.get((topic, qid), [])
        offset = data.draw(st.integers(0, len(q) + 2))
        g = self.store.get_message("g", topic, qid, offset, count, sub)
        if not q:
            assert g.status is GetStatus.NO_MATCHED_LOGIC_QUEUE and g.next_begin_offset == 0
            return
        assert (g.min_offset, g.max_offset) == (0, len(q))
        if offset == len(q):
            assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, offset)
            return
        if offset > len(q):
            assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, len(q))
            return
        nxt = g.next_begin_offset
        file_end = (offset // CQ_UNITS + 1) * CQ_UNITS
        assert offset < nxt <= min(file_end, len(q))
        matcher = parse_subscription(sub)
        want = [
            (i, body)
            for i, (body, tags, _k) in enumerate(q[offset:nxt], offset)
            if matcher.matches_tags(tags)
        ]
        got = [(m.queue_offset, m.body) for m in g.messages]
        assert len(got) <= count
        if g.status is GetStatus.FOUND:
            assert got and got == want[: len(got)]
            assert got == want  # nothing matching is skipped before next_begin_offset
        else:
            assert g.status is GetStatus.NO_MATCHED_MESSAGE and not got and not want

    @precondition(lambda self: self.seq > 0)
    @rule(data=st.data())
    def query_key(self, data: st.DataObject) -> None:
        assert self.store.wait_dispatched(60)
        (topic, qid), q = data.draw(st.sampled_from([kv for kv in self.model.items() if kv[1]]))
        i = data.draw(st.integers(0, len(q) - 1))
        body, _tags, key = q[i]
        found = self.store.query_by_key(topic, key).messages
        assert [(m.queue_id, m.queue_offset, m.body) for m in found] == [(qid, i, body)]

    @rule()
    def restart(self) -> None:
        self.store.close()
        self.store = MessageStore.open(self.cfg)
        assert self.store.last_exit_ok

    @rule()
    def crash(self) -> None:
        self.store.abandon()
        self.store = MessageStore.open(self.cfg)
        assert not self.store.last_exit_ok
        self.store.close()
        assert check_cq_consistency(self.cfg.root, self.cfg) == []
        self.store = MessageStore.open(self.cfg)

    @invariant()
    def queue_bounds_match_the_model(self) -> None:
        assert self.store.wait_dispatched(60)
        for (topic, qid), q in self.model.items():
            assert self.store.max_offset_in_queue(topic, qid) == len(q)
            assert self.store.next_queue_offset(topic, qid) == len(q)


StoreMachine.TestCase.settings = settings(max_examples=12, stateful_step_count=25, deadline=None)
test_store_against_model = StoreMachine.TestCase
