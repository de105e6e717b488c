"""Stores and messages for the power-loss regressions: a store whose CommitLog is
synced only when a test asks, and messages whose records all have one exact size, so
the records of one life and the next line up record by record."""

from __future__ import annotations

from pathlib import Path

from mqstore import Message, MessageStore
from tests.helpers import make_store

TOPIC = "orders"


def unsynced_store(tmp_path: Path, file_size: int, **cfg: object) -> MessageStore:
    """A harness store with ``file_size`` segments, no index, and flush intervals so long
    that nothing syncs the CommitLog unless the test asks."""
    return make_store(
        tmp_path,
        commitlog_file_size=file_size,
        flush_interval_commitlog_ms=60_000,
        flush_commitlog_thorough_interval_ms=60_000,
        message_index_enable=False,
        **cfg,
    )


def fixed_message(text: str, key: str, size: int) -> Message:
    """A message on :data:`TOPIC` with key ``key`` whose record is exactly ``size``
    bytes: ``text`` padded with dots (the store adds a 32-character UNIQ_KEY)."""
    overhead = 91 + len(TOPIC) + len(f"UNIQ_KEY\x01{'0' * 32}\x02KEYS\x01{key}\x02")
    return Message(topic=TOPIC, body=text.encode().ljust(size - overhead, b"."), keys=[key])
