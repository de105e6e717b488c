"""A store with default settings costs about what it holds on disk, and grows with use.

Files keep RocketMQ's sizes (a 1 GiB CommitLog segment, a 420 MB index file: their
apparent size), but only what is written, plus a reservation that grows with it, is
allocated (``mqstore._platform.reserve_ahead``). Allocated means ``st_blocks``.
"""

from __future__ import annotations

from pathlib import Path

from mqstore import Message, MessageStore, StoreConfig

MB = 1_000_000
FLOOR = 1 << 20
"""The least a segment reserves ahead (``mapped_file.RESERVE_FLOOR``)."""


def allocated(root: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def fill(root: Path, count: int, body: bytes) -> None:
    with MessageStore.open(StoreConfig(root_dir=root)) as store:
        for i in range(count):
            msg = Message(topic="orders", body=body, tags="TagA", keys=[f"order-{i}"])
            store.put_message(msg)
        assert store.wait_dispatched(30)


def test_a_ten_message_store_with_default_settings_takes_at_most_4_mb(tmp_path: Path) -> None:
    fill(tmp_path / "s", 10, b"x" * 100)
    assert allocated(tmp_path / "s") <= 4 * MB
    segment = tmp_path / "s" / "commitlog" / "00000000000000000000"
    assert segment.stat().st_size == 1 << 30  # RocketMQ's segment size, sparse


def test_a_segment_reserves_as_it_fills_never_far_ahead_of_what_it_holds(tmp_path: Path) -> None:
    fill(tmp_path / "s", 6000, b"y" * 1000)  # ~6.7 MB of records
    segment = tmp_path / "s" / "commitlog" / "00000000000000000000"
    with MessageStore.open(StoreConfig(root_dir=tmp_path / "s")) as store:
        held = store.max_physical_offset
    blocks = segment.stat().st_blocks * 512
    assert held <= blocks <= 2 * held + FLOOR
