"""RocketMQ's versioned config tables: ``{"dataVersion":{...},"<name>Table":{...}}``.

``topics.json`` and ``subscriptionGroup.json`` share one shape: a ``dataVersion``
(a counter bumped on every write, and the write time) and one table of fastjson beans
keyed by name. :class:`VersionedTable` is that shape's load and persist, written once
for both managers (store.broker.topics, store.broker.subscriptions). Writes go through
:func:`~mqstore.remoting.fastjson.write_config_file` (temp file + ``.bak``).

Not thread-safe: each manager calls it under its own lock.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mqstore.remoting.fastjson import Bean, dumps, read_config_file, write_config_file


class VersionedTable:
    """The file at ``path`` whose table sits under ``table_key``."""

    def __init__(self, path: Path, table_key: str) -> None:
        self.path = path
        self.table_key = table_key
        self.counter = 0
        """The ``dataVersion.counter`` of the last load or write."""
        self.timestamp_ms = int(time.time() * 1000)
        """The ``dataVersion.timestamp`` of the last load or write (else: creation)."""

    def load(self) -> dict[str, dict[str, Any]]:
        """The table's entries that are JSON objects, by name (``{}`` without a file);
        the file's ``dataVersion.counter`` becomes :attr:`counter`."""
        loaded = read_config_file(self.path)
        if not isinstance(loaded, dict):
            return {}
        version = loaded.get("dataVersion") or {}
        if isinstance(version, dict):
            self.counter = int(version.get("counter", 0))
            self.timestamp_ms = int(version.get("timestamp", self.timestamp_ms))
        table = loaded.get(self.table_key) or {}
        return {str(k): v for k, v in table.items() if isinstance(v, dict)}

    def persist(self, beans: Mapping[str, Bean]) -> None:
        """Write the table with the next data version (fastjson ``PrettyFormat``).

        Raises:
            OSError: the write failed.
        """
        self.counter += 1
        self.timestamp_ms = int(time.time() * 1000)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_config_file(self.path, self.document(beans, pretty=True))

    def document(self, beans: Mapping[str, Bean], *, pretty: bool = False) -> str:
        """The file's JSON for ``beans`` at the current data version (what a broker
        also sends as the body of a GET_ALL_* request)."""
        doc = Bean(dataVersion=Bean(counter=self.counter, timestamp=self.timestamp_ms))
        doc[self.table_key] = dict(beans)
        return dumps(doc, pretty=pretty)
