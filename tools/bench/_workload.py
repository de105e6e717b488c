"""The messages every contender stores: same fields, same sizes, built before timing.

A message is a topic, a tag, one key and a body (100 bytes for the put benchmarks,
1 KiB for the recovery store). Items are built once and cycled, so no contender
pays for building its input on the clock; each contender stores all four fields.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from mqstore import Message

TOPIC = "BenchTopic"
POOL_SIZE = 4096


@dataclass(frozen=True, slots=True)
class Item:
    """One message's fields, as plain values (what SQLite and persist-queue store)."""

    topic: str
    tags: str
    keys: str
    body: bytes

    def row(self) -> tuple[str, str, str, bytes]:
        """The SQLite row (topic, tags, keys, body)."""
        return (self.topic, self.tags, self.keys, self.body)

    def message(self) -> Message:
        """The same fields as an mqstore :class:`Message` (keys as a list, as users pass)."""
        return Message(self.topic, self.body, tags=self.tags, keys=[self.keys])


def items(body_size: int, n: int = POOL_SIZE, seed: int = 2) -> list[Item]:
    """``n`` distinct items with ``body_size``-byte pseudo-random bodies."""
    rng = random.Random(seed)
    return [
        Item(TOPIC, f"Tag{'ABCDEFGH'[i % 8]}", f"order-{i:06d}", rng.randbytes(body_size))
        for i in range(n)
    ]


SQLITE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS messages ("
    "id INTEGER PRIMARY KEY, topic TEXT NOT NULL, tags TEXT, keys TEXT, body BLOB NOT NULL)"
)
SQLITE_INSERT = "INSERT INTO messages (topic, tags, keys, body) VALUES (?, ?, ?, ?)"
