"""Consumer offset stores: where a group's progress lives (docs/client.md §3).

- :class:`RemoteBrokerOffsetStore` (CLUSTERING): a memory table updated as messages
  finish, sent to the broker by :meth:`persist_all` (every 5 s, on queue drop and at
  shutdown) and piggy-backed on every pull as ``commit_offset``.
- :class:`LocalFileOffsetStore` (BROADCASTING): every consumer owns every queue, so
  progress is per client and lives in a JSON file, written atomically (temporary file,
  fsync, rename), with the previous file kept as ``offsets.json.bak``.

Offsets are the *next* queue offset to consume. A missing offset is ``None``, never
``-1``; a broker that cannot answer raises (RocketMQ's ``-2``), so a caller can tell
"group is new" from "broker is down".
"""

from __future__ import annotations

import enum
import json
import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from mqstore.client.allocate import MessageQueue
from mqstore.client.brokers import Brokers
from mqstore.client.transport import BrokerError, TransportError

log = logging.getLogger(__name__)


class ReadOffsetType(enum.Enum):
    """RocketMQ ``ReadOffsetType``."""

    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetStore(Protocol):
    """What consumers ask of an offset store. Implementations are thread-safe."""

    def load(self) -> None:
        """Read persisted offsets (file stores); no-op for the broker store."""
        ...

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """Set the memory offset; with ``increase_only`` never move it backwards."""
        ...

    def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int | None:
        """The offset, or ``None`` if unknown. Raises on broker errors (STORE)."""
        ...

    def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Persist the offsets of ``mqs``; forget memory entries of other queues."""
        ...

    def persist(self, mq: MessageQueue) -> None:
        """Persist one queue's offset (before the queue is dropped)."""
        ...

    def remove_offset(self, mq: MessageQueue) -> None:
        """Forget the memory entry of a dropped queue."""
        ...


class _MemoryTable:
    """The shared memory table: MessageQueue -> next offset."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        with self._lock:
            old = self._table.get(mq)
            if old is None or not increase_only or offset > old:
                self._table[mq] = offset

    def get(self, mq: MessageQueue) -> int | None:
        with self._lock:
            return self._table.get(mq)

    def remove(self, mq: MessageQueue) -> None:
        with self._lock:
            self._table.pop(mq, None)

    def snapshot(self) -> dict[MessageQueue, int]:
        with self._lock:
            return dict(self._table)


class RemoteBrokerOffsetStore:
    """Group offsets kept by the broker (CLUSTERING)."""

    def __init__(self, group: str, brokers: Brokers) -> None:
        self.group = group
        self._brokers = brokers
        self._mem = _MemoryTable()

    def load(self) -> None:
        """Nothing to load: the broker is the store."""

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        self._mem.update(mq, offset, increase_only)

    def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int | None:
        """Memory, broker (QUERY_CONSUMER_OFFSET, cached on success) or memory first.

        Raises:
            TransportError, BrokerError: READ_FROM_STORE could not ask the broker.
        """
        if how is not ReadOffsetType.READ_FROM_STORE:
            got = self._mem.get(mq)
            if got is not None or how is ReadOffsetType.READ_FROM_MEMORY:
                return got
        stored = self._brokers.for_queue(mq).query_offset(self.group, mq)
        if stored is not None:
            self._mem.update(mq, stored, increase_only=False)
        return stored

    def persist(self, mq: MessageQueue) -> None:
        """Send one queue's memory offset to the broker (errors logged: the next
        persist or pull piggy-back carries it)."""
        off = self._mem.get(mq)
        if off is None:
            return
        try:
            self._brokers.for_queue(mq).update_offset(self.group, mq, off)
        except (TransportError, BrokerError) as e:
            log.warning("persist offset %s=%d for %s failed: %s", mq, off, self.group, e)

    def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        keep = set(mqs)
        for mq in self._mem.snapshot():
            if mq in keep:
                self.persist(mq)
            else:
                self._mem.remove(mq)

    def remove_offset(self, mq: MessageQueue) -> None:
        self._mem.remove(mq)


def _wrong(entry: dict[str, object], key: str, expected: str) -> ValueError:
    if key not in entry:
        return ValueError(f"no {key}")
    return ValueError(f"{key} must be {expected}, got {entry[key]!r}")


def _str_field(entry: dict[str, object], key: str) -> str:
    value = entry.get(key)
    if isinstance(value, str):
        return value
    raise _wrong(entry, key, "a string")


def _int_field(entry: dict[str, object], key: str) -> int:
    value = entry.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise _wrong(entry, key, "an int >= 0")


def parse_offset_table(text: str) -> dict[MessageQueue, int]:
    """The offsets of a :class:`LocalFileOffsetStore` file's text.

    >>> parse_offset_table('{"offsetTable": [{"topic": "T", "brokerName": "b", '
    ...                    '"queueId": 0, "offset": 7}]}')
    {MessageQueue(topic='T', broker_name='b', queue_id=0): 7}
    >>> parse_offset_table('{"offsetTable": [{"topic": "T"}]}')
    Traceback (most recent call last):
    ValueError: offsetTable[0]: no brokerName

    Raises:
        ValueError: ``text`` is not JSON, or not of the file's shape (the message
            says which entry and field is wrong).
    """
    doc = json.loads(text)
    entries = doc.get("offsetTable") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ValueError('expected {"offsetTable": [...]}')
    table: dict[MessageQueue, int] = {}
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError(f"offsetTable[{i}] is not an object: {e!r}")
        try:
            mq = MessageQueue(
                _str_field(e, "topic"), _str_field(e, "brokerName"), _int_field(e, "queueId")
            )
            table[mq] = _int_field(e, "offset")
        except ValueError as err:
            raise ValueError(f"offsetTable[{i}]: {err}") from None
    return table


class LocalFileOffsetStore:
    """Per-client offsets in ``<base_dir>/<client_id>/<group>/offsets.json``.

    The file holds ``{"offsetTable": [{"topic", "brokerName", "queueId", "offset"}]}``
    (a list: JSON has no object keys, unlike fastjson's form in RocketMQ's file).
    """

    def __init__(self, base_dir: Path, client_id: str, group: str) -> None:
        self.path = Path(base_dir) / client_id.replace(":", "_") / group / "offsets.json"
        self._mem = _MemoryTable()
        self._io_lock = threading.Lock()

    def load(self) -> None:
        """Read the file, or its ``.bak`` when the main file is unusable.

        Unusable means unreadable, not JSON (a torn write), or JSON of the wrong shape
        (not the object above: a list, a missing key, a value of the wrong type, a
        negative queue id or offset). All of these are treated alike: a warning names
        the file, which is left in place (the next persist keeps it as the ``.bak``),
        and the next file is tried. A file is applied whole or not at all. With no
        usable file (or none yet) nothing is loaded: a queue without a memory offset
        reads as ``None``, and a consumer starts it from its ``consume_from_where``.
        """
        for p in (self.path, self.path.with_suffix(".json.bak")):
            try:
                table = parse_offset_table(p.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as e:
                log.warning("offsets file %s is unusable, skipped: %s", p, e)
                continue
            for mq, offset in table.items():
                self._mem.update(mq, offset, increase_only=False)
            return

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        self._mem.update(mq, offset, increase_only)

    def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int | None:
        if how is ReadOffsetType.READ_FROM_STORE:
            self.load()
        return self._mem.get(mq)

    def persist(self, mq: MessageQueue) -> None:
        self.persist_all(self._mem.snapshot())

    def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write every known offset atomically (the file keeps all queues: a
        broadcasting client owns them all anyway)."""
        del mqs
        table = self._mem.snapshot()
        doc = {
            "offsetTable": [
                {
                    "topic": mq.topic,
                    "brokerName": mq.broker_name,
                    "queueId": mq.queue_id,
                    "offset": off,
                }
                for mq, off in sorted(table.items())
            ]
        }
        with self._io_lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".json.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f)
                f.flush()
                os.fsync(f.fileno())
            if self.path.exists():
                os.replace(self.path, self.path.with_suffix(".json.bak"))
            os.replace(tmp, self.path)

    def remove_offset(self, mq: MessageQueue) -> None:
        """Broadcasting keeps offsets of dropped queues (the queue may come back)."""
