"""Consumer offsets (RocketMQ ``ConsumerOffsetManager``), persisted to
``config/consumerOffset.json``.

The table maps ``"<topic>@<group>"`` to ``{queueId: offset}``; an offset is the *next*
queue offset the group will consume. The file is fastjson output with unquoted integer
queue-id keys, exactly as a Java broker writes it (fastjson ``PrettyFormat``: tabs,
integer-keyed entries on the opening line), so a real broker can take over our store
directory and we can take over its: ``{"offsetTable":{"TopicTest@group":{0:250,1:250}}}``.

Commits land in memory; :meth:`ConsumerOffsetManager.persist` writes the whole table
(the broker calls it every ``flushConsumerOffsetInterval`` = 5 s and at shutdown).
Thread-safe: one lock guards the table; persisting serialises writers.

The edge refuses illegal names (``mqstore.broker.names``), but the table is the last
line before the file: an entry whose key is not ``legal topic @ legal group`` is never
written (it could not be read back, or not encoded at all); it is counted in
:attr:`ConsumerOffsetManager.failures` and every other entry is written as usual.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from mqstore.broker.names import is_legal_group
from mqstore.failures import FailureCounter
from mqstore.message import TOPIC_PATTERN
from mqstore.remoting.fastjson import dumps, read_config_file, write_config_file

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR: Final = "@"


class ConsumerOffsetManager:
    """Committed offsets per (topic, group, queue id)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._persist_lock = threading.Lock()
        self._table: dict[str, dict[int, int]] = {}
        self._dirty = False
        self.failures = FailureCounter(log, "consumer offsets")
        loaded = read_config_file(path)
        if isinstance(loaded, dict):
            for key, queues in (loaded.get("offsetTable") or {}).items():
                if isinstance(queues, dict):
                    self._table[str(key)] = {int(q): int(o) for q, o in queues.items()}

    @staticmethod
    def key(topic: str, group: str) -> str:
        """The table key ``topic@group``."""
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record ``offset`` as the group's next offset for the queue."""
        with self._lock:
            self._table.setdefault(self.key(topic, group), {})[queue_id] = offset
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, None if the group never committed one for the queue."""
        with self._lock:
            queues = self._table.get(self.key(topic, group))
            return None if queues is None else queues.get(queue_id)

    def drop_topic(self, topic: str) -> None:
        """Forget every group's offsets of ``topic`` (the topic was deleted)."""
        self._drop(lambda key: key.startswith(topic + TOPIC_GROUP_SEPARATOR))

    def drop_group(self, group: str) -> None:
        """Forget the group's offsets of every topic (the group was deleted)."""
        self._drop(lambda key: key.endswith(TOPIC_GROUP_SEPARATOR + group))

    def _drop(self, doomed: Callable[[str], bool]) -> None:
        with self._lock:
            for key in [k for k in self._table if doomed(k)]:
                del self._table[key]
                self._dirty = True

    def table(self) -> dict[str, dict[int, int]]:
        """A deep snapshot of the table."""
        with self._lock:
            return {k: dict(v) for k, v in self._table.items()}

    def _writable(self, key: str) -> bool:
        topic, sep, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
        if sep and TOPIC_PATTERN.fullmatch(topic) and is_legal_group(group):
            return True
        self.failures.record("persisting an illegal key", ValueError(key), ascii(key))
        return False

    def persist(self, *, force: bool = False) -> bool:
        """Write the file if anything changed since the last write (or ``force``).

        Returns True when the file was written.

        Raises:
            OSError: the write failed; the table stays dirty and a later call retries.
        """
        with self._persist_lock:
            with self._lock:
                if not self._dirty and not force:
                    return False
                snapshot = {
                    k: dict(sorted(v.items())) for k, v in self._table.items() if self._writable(k)
                }
                self._dirty = False
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                write_config_file(self.path, dumps({"offsetTable": snapshot}, pretty=True))
            except OSError:
                with self._lock:
                    self._dirty = True
                raise
            return True
