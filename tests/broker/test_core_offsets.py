"""Consumer offsets: the QUERY_CONSUMER_OFFSET rule and RocketMQ-format persistence."""

from __future__ import annotations

import shutil
from pathlib import Path

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.offsets import ConsumerOffsetManager
from mqstore.message_store import MessageStore
from mqstore.remoting.fastjson import loads
from tests.broker.core_helpers import put
from tests.helpers import reopen, until


def test_committed_offset_is_returned(core: BrokerCore) -> None:
    core.queries.update_offset("g", "T", 1, 42)
    assert core.queries.query_offset("g", "T", 1) == 42


def test_new_group_on_a_queue_starting_at_zero_in_memory_starts_at_zero(
    core: BrokerCore, store: MessageStore
) -> None:
    put(store, "T", 2)
    assert core.queries.query_offset("g", "T", 0) == 0


def test_new_group_whose_first_message_is_no_longer_in_memory_is_not_found(
    core: BrokerCore, store: MessageStore
) -> None:
    put(store, "T", 3)
    core.queries._memory_limit = 0  # as if the CommitLog had grown past 40 % of RAM since
    assert core.queries.query_offset("g", "T", 0) is None


def test_new_group_on_an_empty_queue_starts_at_zero(core: BrokerCore) -> None:
    assert core.queries.query_offset("g", "Nothing", 0) == 0


def test_offsets_survive_a_restart_in_rocketmq_format(store: MessageStore, tmp_path: Path) -> None:
    core = BrokerCore(store)
    core.start()
    core.queries.update_offset("g", "TopicTest", 0, 250)
    core.queries.update_offset("g", "TopicTest", 1, 7)
    core.shutdown()
    path = Path(store.root) / "config" / "consumerOffset.json"
    text = path.read_text()
    assert "{0:250,1:7" in text  # fastjson: unquoted integer keys
    assert loads(text) == {"offsetTable": {"TopicTest@g": {0: 250, 1: 7}}}
    store2 = reopen(store)
    try:
        assert BrokerCore(store2).queries.query_offset("g", "TopicTest", 1) == 7
    finally:
        store2.close()


def test_offsets_written_by_real_rocketmq_are_read(real_fixtures: Path, tmp_path: Path) -> None:
    src = next(real_fixtures.glob("*/config/consumerOffset.json"))
    dst = tmp_path / "consumerOffset.json"
    shutil.copy(src, dst)
    table = ConsumerOffsetManager(dst).table()
    assert table["TopicTest@please_rename_unique_group_name_4"] == {0: 250, 1: 250, 2: 250, 3: 250}


def test_persist_without_changes_does_not_rewrite(tmp_path: Path) -> None:
    m = ConsumerOffsetManager(tmp_path / "consumerOffset.json")
    m.commit("g", "T", 0, 1)
    assert m.persist() is True
    assert m.persist() is False


def test_offsets_are_persisted_periodically_while_running(store: MessageStore) -> None:
    core = BrokerCore(store, BrokerConfig(consumer_offset_persist_interval_ms=50))
    core.start()
    try:
        core.queries.update_offset("g", "T", 0, 9)
        path = Path(store.root) / "config" / "consumerOffset.json"
        until(path.exists, what="the persisted offsets")
        assert loads(path.read_text())["offsetTable"] == {"T@g": {0: 9}}
    finally:
        core.shutdown()
