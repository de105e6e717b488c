"""The store configuration of the timer crash test (shared by the child and the test)."""

from __future__ import annotations

from mqstore import StoreConfig


def timer_config(root: str) -> StoreConfig:
    """Small files, timer precision 100 ms, the timer checkpoint every second (RocketMQ's)."""
    return StoreConfig(root_dir=root, commitlog_file_size=1 << 20,
                       mapped_file_size_consume_queue=1000 * 20, max_hash_slot_num=64,
                       max_index_num=1024, timer_precision_ms=100,
                       mapped_file_size_timer_log=52 * 100)  # fmt: skip
