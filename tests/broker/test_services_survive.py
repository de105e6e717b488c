"""Every background service of the broker survives a bad item: it logs it once,
counts it, skips it and goes on serving the good ones."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    Message,
)
from mqstore.message_store import MessageStore
from mqstore.schedule import SCHEDULE_TOPIC
from tests.helpers import make_store, until

SURROGATE = "\ud800"


@pytest.fixture
def fast_core(store: MessageStore) -> Iterator[BrokerCore]:
    """A started core whose housekeeping runs every 50 ms."""
    core = BrokerCore(store, BrokerConfig(consumer_offset_persist_interval_ms=50))
    core.start()
    yield core
    core.shutdown()


def saved_offsets(core: BrokerCore) -> dict[str, object]:
    text = core.offsets.path.read_text(encoding="utf-8")
    return json.loads(text.replace("{0:", '{"0":'))["offsetTable"]  # type: ignore[no-any-return]


def test_housekeeping_keeps_saving_offsets_after_an_unwritable_entry(
    fast_core: BrokerCore,
) -> None:
    fast_core.offsets.commit(SURROGATE, "T", 0, 5)  # got past the edge somehow
    fast_core.offsets.commit("good", "T", 0, 7)
    until(fast_core.offsets.path.exists)
    fast_core.offsets.commit("good", "T", 0, 9)
    until(lambda: saved_offsets(fast_core) == {"T@good": {"0": 9}})
    assert fast_core.offsets.failures.total >= 1
    assert fast_core._housekeeping.running


def test_housekeeping_survives_a_failing_write_and_saves_once_it_can(
    fast_core: BrokerCore,
) -> None:
    blocker = fast_core.offsets.path.with_name(fast_core.offsets.path.name + ".tmp")
    blocker.mkdir(parents=True)  # every write of the file now fails
    fast_core.offsets.commit("g", "T", 0, 3)
    until(lambda: fast_core._housekeeping.failures.total >= 2)
    blocker.rmdir()
    until(lambda: fast_core.offsets.path.exists() and bool(saved_offsets(fast_core)))
    assert saved_offsets(fast_core) == {"T@g": {"0": 3}}
    assert fast_core._housekeeping.failures.counts() == {
        "persisting consumer offsets": fast_core._housekeeping.failures.total
    }


def put_due_schedule_record(store: MessageStore, real_topic: str, body: bytes) -> None:
    """A level-1 schedule record whose REAL_TOPIC is ``real_topic``, as a send-back of
    an unchecked group used to leave behind."""
    props = {PROPERTY_REAL_TOPIC: real_topic, PROPERTY_REAL_QUEUE_ID: "0",
             PROPERTY_DELAY_TIME_LEVEL: "1"}  # fmt: skip
    r = store.put_message(Message(topic=SCHEDULE_TOPIC, queue_id=0, body=body, properties=props))
    assert r.status.stored


def test_the_schedule_service_skips_a_message_for_an_illegal_topic_and_delivers_the_rest(
    tmp_path: Path,
) -> None:
    store = make_store(tmp_path, message_delay_level="1s")
    try:
        put_due_schedule_record(store, "%RETRY%a/b", b"bad")
        put_due_schedule_record(store, "%RETRY%" + "g" * 121, b"too long")
        store.put_message(Message(topic="T", body=b"good", delay_level=1))
        until(lambda: store.max_offset_in_queue("T", 0) == 1, timeout=10)
        schedule = store.logics.schedule
        assert schedule is not None and schedule.running
        assert schedule.failures.total == 2
        assert schedule.offsets[1] == 3
    finally:
        store.close()


def test_a_skipped_schedule_message_is_not_retried_after_a_restart(tmp_path: Path) -> None:
    store = make_store(tmp_path, message_delay_level="1s")
    put_due_schedule_record(store, "a/b", b"bad")
    schedule = store.logics.schedule
    assert schedule is not None
    until(lambda: schedule.offsets.get(1) == 1)
    store.close()
    store = make_store(tmp_path, message_delay_level="1s")
    try:
        time.sleep(1.5)
        schedule = store.logics.schedule
        assert schedule is not None and schedule.failures.total == 0
    finally:
        store.close()


def test_the_cleanup_service_survives_a_round_that_fails(tmp_path: Path) -> None:
    from mqstore.cleanup import CleanupService

    store = make_store(tmp_path, clean_resource_interval_ms=50)
    calls: list[int] = []

    def disk_ratio() -> float:  # the first round cannot read the disk's statistics
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("statvfs gave nonsense")
        return 0.1

    cleaner = CleanupService(
        store.cfg, store.segments, store.queues, store.index,
        dispatched_offset=lambda: store.max_physical_offset, disk_ratio=disk_ratio,
    )  # fmt: skip
    cleaner.start()
    try:
        until(lambda: len(calls) >= 3)
        assert cleaner.failures.counts() == {"cleaning expired files": 1}
    finally:
        cleaner.stop()
        store.close()
