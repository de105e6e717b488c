"""The POP service's small persistent tables, in one JSON file written atomically.

``<root>/config/popState.json`` holds, as RocketMQ's config files do (fastjson, one
table per name):

- ``offsetTable``: ``{"<topic>@<group>": {"<queue id>": next offset to pop}}``. RocketMQ
  keeps these in ``consumerOffset.json`` (POP commits the consumer offset when it
  pops); an embedded store has no consumer offset manager, so the POP service keeps
  its own table of the same shape, for POP groups only;
- ``reviveOffsetTable``: ``{"<revive queue id>": offset}``, where the revive scan
  restarts after a restart (RocketMQ: the consumer offset of
  ``CID_RMQ_SYS_REVIVE_GROUP`` on the revive topic);
- ``orderInfoTable``: the FIFO in-flight batches (``ConsumerOrderInfoManager``'s
  ``consumerOrderInfo.json``), see ``mqstore.pop.fifo``.

Durability rule (the caller's): everything a snapshot relies on (checkpoints of the
offsets it covers, retry copies of the revives it passes) is flushed in the CommitLog
before the file is replaced. The file is replaced by write-to-temp, fsync, rename,
fsync of the directory: a crash leaves the old or the new file, never a torn one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqstore import _platform
from mqstore.errors import CorruptIndexError

STATE_FILE = "popState.json"

QueueKey = tuple[str, str, int]
"""(topic, group, queue id)."""


@dataclass(slots=True)
class PopStateTables:
    """A snapshot of the three tables (plain data, owned by whoever built it)."""

    offsets: dict[QueueKey, int] = field(default_factory=dict)
    revive_offsets: dict[int, int] = field(default_factory=dict)
    order_info: dict[QueueKey, dict[str, Any]] = field(default_factory=dict)


def _nest(table: dict[QueueKey, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for (topic, group, qid), v in sorted(table.items()):
        out.setdefault(f"{topic}@{group}", {})[str(qid)] = v
    return out


def _unnest(table: dict[str, dict[str, Any]]) -> dict[QueueKey, Any]:
    out: dict[QueueKey, Any] = {}
    for tg, queues in table.items():
        topic, _, group = tg.rpartition("@")
        for qid, v in queues.items():
            out[(topic, group, int(qid))] = v
    return out


def save(directory: Path, tables: PopStateTables) -> None:
    """Replace the state file atomically and durably (see the module docstring).

    Raises:
        OSError: the file could not be written or synced.
    """
    directory.mkdir(parents=True, exist_ok=True)
    doc = {
        "offsetTable": _nest(tables.offsets),
        "reviveOffsetTable": {str(k): v for k, v in sorted(tables.revive_offsets.items())},
        "orderInfoTable": _nest(tables.order_info),
    }
    path = directory / STATE_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, json.dumps(doc, separators=(",", ":")).encode())
        _platform.fdatasync(fd, what=str(tmp))
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _platform.fsync_dir(directory)


def load(directory: Path) -> PopStateTables:
    """The tables last saved, or empty ones when there is no file.

    Raises:
        CorruptIndexError: the file exists but is not a state file.
    """
    path = directory / STATE_FILE
    try:
        doc = json.loads(path.read_bytes())
        return PopStateTables(
            {k: int(v) for k, v in _unnest(doc.get("offsetTable", {})).items()},
            {int(k): int(v) for k, v in doc.get("reviveOffsetTable", {}).items()},
            _unnest(doc.get("orderInfoTable", {})),
        )
    except FileNotFoundError:
        return PopStateTables()
    except (ValueError, TypeError, AttributeError) as e:
        raise CorruptIndexError(f"{path}: not a POP state file: {e}") from e
