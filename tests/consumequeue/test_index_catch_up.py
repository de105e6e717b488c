"""After a crash the index is rebuilt after ``open``, from the reput thread.

``IndexCatchUp``: open() rebuilds the consume queues only; the index of the replayed
stretch (and of records put meanwhile) is built in log order by the reput thread.
While it runs, new messages are pullable at once, ``query_by_key`` and
``wait_dispatched`` wait for it, and a crash in the middle loses no key.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mqstore import Message, MessageStore
from mqstore.consumequeue import catch_up, dispatch
from tests.cq_consistency import check_cq_consistency
from tests.helpers import store_config

SMALL_INDEX = {"max_hash_slot_num": 64, "max_index_num": 120}  # files fill and roll


def crashed_store(tmp_path: Path, n: int) -> MessageStore:
    cfg = store_config(tmp_path, **SMALL_INDEX)
    s = MessageStore.open(cfg)
    for i in range(n):
        s.put_message(Message(topic="T", body=b"m%d" % i, tags="A", keys=[f"k{i}"]))
    assert s.wait_dispatched(60)
    s.abandon()
    return s


def keys_found(s: MessageStore, n: int) -> list[int]:
    return [i for i in range(n) if [m.body for m in s.query_by_key("T", f"k{i}").messages]]


class Gate:
    """Lets the first catch-up step run, then makes steps no-ops until ``go``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.first_done = threading.Event()
        self.go = threading.Event()
        original = catch_up.IndexCatchUp.step

        def step(cu: catch_up.IndexCatchUp, upto: int, max_records: int) -> bool:
            if self.first_done.is_set() and not self.go.is_set():
                return False
            done = original(cu, upto, max_records)
            self.first_done.set()
            return done

        monkeypatch.setattr(dispatch, "CHUNK", 10)
        monkeypatch.setattr(catch_up.IndexCatchUp, "step", step)


def test_keys_are_found_right_after_a_crash_reopen(tmp_path: Path) -> None:
    s = crashed_store(tmp_path, 300)
    with MessageStore.open(s.cfg) as s2:
        assert not s2.last_exit_ok
        assert keys_found(s2, 300) == list(range(300))
    assert check_cq_consistency(s.cfg.root, s.cfg) == []


def test_new_messages_are_pullable_while_the_index_catches_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = crashed_store(tmp_path, 300)
    gate = Gate(monkeypatch)
    with MessageStore.open(s.cfg) as s2:
        assert s2.max_offset_in_queue("T", 0) == 300  # queues rebuilt inside open()
        assert gate.first_done.wait(10)
        r = s2.put_message(Message(topic="T", body=b"new", tags="A", keys=["knew"]))
        assert s2.reput.wait_until(s2.max_physical_offset, 10, indexed=False)
        assert not s2.reput.indexed
        got = s2.get_message("g", "T", 0, r.queue_offset, 1).messages
        assert [m.body for m in got] == [b"new"]
        assert not s2.wait_dispatched(0.05)  # the index is still behind
        gate.go.set()
        assert [m.body for m in s2.query_by_key("T", "knew").messages] == [b"new"]
        assert s2.reput.indexed
        assert keys_found(s2, 300) == list(range(300))
    assert check_cq_consistency(s.cfg.root, s.cfg) == []


def test_a_crash_during_the_catch_up_loses_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = crashed_store(tmp_path, 300)
    gate = Gate(monkeypatch)
    s2 = MessageStore.open(s.cfg)
    assert gate.first_done.wait(10)
    s2.put_message(Message(topic="T", body=b"new", tags="A", keys=["knew"]))
    assert s2.reput.wait_until(s2.max_physical_offset, 10, indexed=False)
    s2.abandon()
    monkeypatch.undo()
    with MessageStore.open(s.cfg) as s3:
        assert keys_found(s3, 300) == list(range(300))
        assert [m.body for m in s3.query_by_key("T", "knew").messages] == [b"new"]
    assert check_cq_consistency(s.cfg.root, s.cfg) == []
