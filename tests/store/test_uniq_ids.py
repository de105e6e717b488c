"""UNIQ_KEY generation: ``UniqIdGenerator.next_ids`` (a batch's ids in one call)."""

from __future__ import annotations

from mqstore.message import UniqIdGenerator


def test_batch_ids_are_distinct_and_shaped_like_single_ids():
    gen = UniqIdGenerator("10.0.0.1", pid=42, loader_hash=7)
    single = gen.next_id()
    batch = gen.next_ids(1000)
    assert len(set(batch)) == 1000 and single not in batch
    assert all(len(u) == len(single) == 32 for u in batch)
    assert all(u[:20] == single[:20] for u in batch)  # ip, pid, loader: the same prefix
    assert all(int(u, 16) >= 0 and u == u.upper() for u in batch)


def test_batch_ids_continue_the_counter_of_single_ids():
    gen = UniqIdGenerator("10.0.0.1", pid=42, loader_hash=7)
    batch = gen.next_ids(3)
    after = gen.next_id()
    counters = [int(u[-4:], 16) for u in [*batch, after]]
    assert counters == [counters[0] + i for i in range(4)]
