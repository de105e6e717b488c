"""Offset stores and computePullFromWhere (docs/client.md §3, §4)."""

from __future__ import annotations

import dataclasses
import doctest
import json

import pytest

from mqstore.broker.inprocess import InProcessTransport
from mqstore.client import offset_store
from mqstore.client.allocate import MessageQueue
from mqstore.client.brokers import Brokers
from mqstore.client.consumer_config import ConsumerConfig
from mqstore.client.offset_store import (
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from mqstore.client.rebalance import compute_pull_from_where
from mqstore.client.transport import ConsumeFromWhere
from tests.client.consumer_harness import broker, create_topic, produce

MQ = MessageQueue("T", "broker-a", 3)
MEM = ReadOffsetType.READ_FROM_MEMORY
STORE = ReadOffsetType.READ_FROM_STORE


def test_increase_only_update_never_moves_the_offset_back(tmp_path):
    s = LocalFileOffsetStore(tmp_path, "c@1", "g")
    s.update_offset(MQ, 10, increase_only=True)
    s.update_offset(MQ, 7, increase_only=True)
    assert s.read_offset(MQ, MEM) == 10


def test_plain_update_may_move_the_offset_back(tmp_path):
    s = LocalFileOffsetStore(tmp_path, "c@1", "g")
    s.update_offset(MQ, 10, increase_only=False)
    s.update_offset(MQ, 7, increase_only=False)
    assert s.read_offset(MQ, MEM) == 7


def test_local_file_store_survives_a_new_instance(tmp_path):
    s = LocalFileOffsetStore(tmp_path, "c@1", "g")
    s.update_offset(MQ, 42, increase_only=False)
    s.persist_all([MQ])
    again = LocalFileOffsetStore(tmp_path, "c@1", "g")
    again.load()
    assert again.read_offset(MQ, MEM) == 42


def test_local_file_store_keeps_the_previous_file_as_bak(tmp_path):
    s = LocalFileOffsetStore(tmp_path, "c@1", "g")
    s.update_offset(MQ, 1, increase_only=False)
    s.persist_all([MQ])
    s.update_offset(MQ, 2, increase_only=False)
    s.persist_all([MQ])
    bak = json.loads(s.path.with_suffix(".json.bak").read_text())
    assert bak["offsetTable"][0]["offset"] == 1


def test_local_file_store_falls_back_to_bak_when_the_file_is_torn(tmp_path):
    s = LocalFileOffsetStore(tmp_path, "c@1", "g")
    s.update_offset(MQ, 1, increase_only=False)
    s.persist_all([MQ])
    s.update_offset(MQ, 2, increase_only=False)
    s.persist_all([MQ])
    s.path.write_text('{"offsetTa')
    again = LocalFileOffsetStore(tmp_path, "c@1", "g")
    again.load()
    assert again.read_offset(MQ, MEM) == 1


def _entry(**fields):
    return {"topic": "T", "brokerName": "broker-a", "queueId": 3, "offset": 2, **fields}


WRONG_SHAPES = {
    "a list": [],
    "null": None,
    "no offsetTable": {},
    "offsetTable not a list": {"offsetTable": {"T": 2}},
    "entry not an object": {"offsetTable": [5]},
    "offset a string": {"offsetTable": [_entry(offset="2")]},
    "offset a bool": {"offsetTable": [_entry(offset=False)]},
    "queueId a float": {"offsetTable": [_entry(queueId=3.0)]},
    "topic a number": {"offsetTable": [_entry(topic=7)]},
    "missing offset": {"offsetTable": [{"topic": "T", "brokerName": "broker-a", "queueId": 3}]},
    "negative offset": {"offsetTable": [_entry(offset=-5)]},
    "negative queueId": {"offsetTable": [_entry(queueId=-1)]},
}


@pytest.mark.parametrize("doc", WRONG_SHAPES.values(), ids=WRONG_SHAPES.keys())
def test_local_file_store_falls_back_to_bak_when_the_file_is_wrong_shaped_json(tmp_path, doc):
    s = LocalFileOffsetStore(tmp_path, "c@1", "g")
    s.update_offset(MQ, 1, increase_only=False)
    s.persist_all([MQ])
    s.update_offset(MQ, 2, increase_only=False)
    s.persist_all([MQ])
    s.path.write_text(json.dumps(doc))
    again = LocalFileOffsetStore(tmp_path, "c@1", "g")
    again.load()
    assert again.read_offset(MQ, MEM) == 1


def test_wrong_shaped_file_without_bak_loads_nothing_and_stays_in_place(tmp_path, caplog):
    s = LocalFileOffsetStore(tmp_path, "c@1", "g")
    s.path.parent.mkdir(parents=True)
    text = json.dumps({"offsetTable": [_entry(queueId=0, offset=9), _entry(offset=-5)]})
    s.path.write_text(text)
    s.load()
    assert s.read_offset(MessageQueue("T", "broker-a", 0), MEM) is None  # all or nothing
    assert s.read_offset(MQ, MEM) is None
    assert s.path.read_text() == text
    assert str(s.path) in caplog.text


def test_module_doctests():
    result = doctest.testmod(offset_store)
    assert result.attempted > 0 and result.failed == 0


def test_remote_store_persists_to_the_broker(tmp_path):
    with broker(tmp_path) as core:
        mq = create_topic(core, "T", 4)[3]
        s = RemoteBrokerOffsetStore("g", Brokers(InProcessTransport(core)))
        s.update_offset(mq, 5, increase_only=True)
        s.persist_all([mq])
        assert core.queries.query_offset("g", "T", 3) == 5


def test_remote_store_forgets_queues_no_longer_owned_at_persist(tmp_path):
    with broker(tmp_path) as core:
        mqs = create_topic(core, "T", 4)
        s = RemoteBrokerOffsetStore("g", Brokers(InProcessTransport(core)))
        s.update_offset(mqs[0], 5, increase_only=True)
        s.update_offset(mqs[1], 6, increase_only=True)
        s.persist_all([mqs[1]])
        assert s.read_offset(mqs[0], MEM) is None


def _where(core, mq, where, stored=None):
    brokers = Brokers(InProcessTransport(core))
    s = RemoteBrokerOffsetStore("g", brokers)
    if stored is not None:
        s.update_offset(mq, stored, increase_only=False)
        s.persist(mq)
    cfg = dataclasses.replace(ConsumerConfig(), consume_from_where=where)
    return compute_pull_from_where(mq, cfg, s, brokers, 0)


def test_a_stored_offset_wins_over_consume_from_where(tmp_path):
    with broker(tmp_path) as core:
        mqs = create_topic(core, "T", 1)
        produce(core, mqs, 10)
        assert _where(core, mqs[0], ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, stored=7) == 7


def test_first_offset_without_a_stored_offset_starts_at_zero(tmp_path):
    with broker(tmp_path) as core:
        mqs = create_topic(core, "T", 1)
        produce(core, mqs, 10)
        assert _where(core, mqs[0], ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET) == 0


def test_a_new_group_on_a_small_queue_starts_at_zero_even_from_last_offset(tmp_path):
    # The broker answers 0 when the queue's first message is still in memory (10.4).
    with broker(tmp_path) as core:
        mqs = create_topic(core, "T", 1)
        produce(core, mqs, 10)
        assert _where(core, mqs[0], ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET) == 0


def _where_unknown(tmp_path, core, mq, where):
    """computePullFromWhere when the store has no offset (RocketMQ's -1 column): a
    LocalFileOffsetStore with no file answers "unknown" without asking the broker."""
    brokers = Brokers(InProcessTransport(core))
    s = LocalFileOffsetStore(tmp_path / "offsets", "c@1", "g")
    cfg = ConsumerConfig(consume_from_where=where)
    return compute_pull_from_where(mq, cfg, s, brokers, 0)


def test_last_offset_without_an_offset_starts_at_the_queue_end(tmp_path):
    with broker(tmp_path / "b") as core:
        mqs = create_topic(core, "T", 1)
        produce(core, mqs, 10)
        assert (
            _where_unknown(tmp_path, core, mqs[0], ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET) == 10
        )


def test_last_offset_on_a_retry_topic_starts_at_zero(tmp_path):
    with broker(tmp_path / "b") as core:
        mqs = create_topic(core, "%RETRY%g", 1)
        produce(core, mqs, 10)
        assert (
            _where_unknown(tmp_path, core, mqs[0], ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET) == 0
        )


def test_timestamp_on_a_retry_topic_starts_at_the_queue_end(tmp_path):
    with broker(tmp_path / "b") as core:
        mqs = create_topic(core, "%RETRY%g", 1)
        produce(core, mqs, 10)
        assert _where_unknown(tmp_path, core, mqs[0], ConsumeFromWhere.CONSUME_FROM_TIMESTAMP) == 10


def test_timestamp_searches_the_queue_by_store_time(tmp_path):
    with broker(tmp_path / "b") as core:
        mqs = create_topic(core, "T", 1)
        produce(core, mqs, 10)
        # consume_timestamp 0: every message is newer, so the search gives the head.
        assert _where_unknown(tmp_path, core, mqs[0], ConsumeFromWhere.CONSUME_FROM_TIMESTAMP) == 0
