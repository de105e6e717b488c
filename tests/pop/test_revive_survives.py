"""The POP revive service survives a bad checkpoint (issue 17): skipped, counted, goes on."""

from __future__ import annotations

import time

from mqstore import Message, MessageStore
from mqstore.pop import PopConfig, PopService
from mqstore.pop.inflight import Pending
from mqstore.pop.records import CK_TAG, PopCheckPoint

from .conftest import put


def _checkpoint(group: str, diffs: tuple[int, ...], pop_time: int) -> PopCheckPoint:
    return PopCheckPoint("T", group, 0, 0, pop_time, 100, diffs, "broker-a")


def test_revive_thread_skips_a_checkpoint_it_cannot_revive_and_revives_the_next(
    store: MessageStore, pop: PopService
) -> None:
    put(store, "T", [b"a"])
    now = int(time.time() * 1000)
    # '%RETRY%a/b_T' is not a legal topic: this checkpoint's revive raises.
    pop.inflight.add(Pending(_checkpoint("a/b", (0,), now - 1000), 0, 0))
    first = pop.pop("g", "T", 32, 200).messages
    assert [m.body for m in first] == [b"a"]
    again = pop.pop("g", "T", 32, 5000, wait_ms=5000).messages
    assert [m.body for m in again] == [b"a"]
    assert again[0].delivery_attempt == 2
    assert pop.reviver.failures.counts() == {"checkpoint": 1}


def test_restart_skips_a_checkpoint_record_of_no_offsets(store: MessageStore) -> None:
    put(store, "T", [b"a"])
    svc = PopService(store, PopConfig(persist_interval_ms=200))
    empty = _checkpoint("g", (), int(time.time() * 1000))
    r = store.put_message(Message(topic=svc.revive_topic, queue_id=0, tags=CK_TAG,
                                  body=empty.to_json()))  # fmt: skip
    assert r.status.ok
    svc.start()
    try:
        assert [m.body for m in svc.pop("g", "T", 32, 5000).messages] == [b"a"]
    finally:
        svc.stop()
