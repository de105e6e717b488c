"""A CommitLog written by Apache RocketMQ gets its consume queue and index on open.

The fixture (tests/fixtures/rocketmq-real, see its README) has 47 records of topic
``abc`` queue 0, TAGS=TAG1 and KEYS=<millis>, and no consume queue files.
"""

from __future__ import annotations

from pathlib import Path

from mqstore import GetStatus, MessageStore, StoreConfig
from mqstore.consumequeue.format import encode_unit
from tests.cq_consistency import check_cq_consistency


def config(root: Path) -> StoreConfig:
    return StoreConfig(
        root_dir=root, commitlog_file_size=8192, max_hash_slot_num=64, max_index_num=256
    )


def test_rocketmq_commitlog_is_dispatched_into_a_consume_queue(real_store_copy: Path):
    with MessageStore.open(config(real_store_copy)) as s:
        assert s.wait_dispatched(60)
        assert (s.min_offset_in_queue("abc", 0), s.max_offset_in_queue("abc", 0)) == (0, 47)
        bodies, offset = [], 0
        while True:
            g = s.get_message("g", "abc", 0, offset, 32, "TAG1")
            if g.status is not GetStatus.FOUND:
                break
            bodies += [m.body for m in g.messages]
            offset = g.next_begin_offset
        assert bodies == [b"Once, there was a chance for me!"] * 47
        m = s.get_message("g", "abc", 0, 46, 1).messages[0]
        found = s.query_by_key("abc", m.keys[0]).messages  # KEYS is a millisecond time: shared
        assert found[0].physical_offset == 46 * 172 and all(x.keys == m.keys for x in found)
        assert s.next_queue_offset("abc", 0) == 47
    unit = (real_store_copy / "consumequeue" / "abc" / "0" / f"{0:020d}").read_bytes()[
        46 * 20 : 47 * 20
    ]
    assert unit == encode_unit(46 * 172, 172, 2567159)  # "TAG1".hashCode()
    assert check_cq_consistency(real_store_copy, config(real_store_copy)) == []
