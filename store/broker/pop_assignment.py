"""Broker-side assignment for clients that do not rebalance themselves (RocketMQ
``QueryAssignmentProcessor`` and ``MessageRequestModeManager``, docs/pop.md §9).

Per (topic, group) the broker keeps a *message request mode* (:class:`MessageRequestMode`).
The default is PULL, as RocketMQ's ``defaultMessageRequestMode``. A retry topic is
always PULL and its mode cannot be set.

The table is ``config/messageRequestMode.json``: ``{"messageRequestModeMap": {topic:
{group: {"topic","consumerGroup","mode","popShareQueueNum"}}}}``, written atomically.
The allocation functions are pure.
"""

from __future__ import annotations

import enum
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqstore.remoting.fastjson import dumps


class MessageRequestMode(enum.StrEnum):
    """How a (topic, group) consumes (RocketMQ ``MessageRequestMode``)."""

    PULL = "PULL"
    """Queue-level: the broker hands each client its averaged share of the queues."""
    POP = "POP"
    """Message-level: with ``popShareQueueNum`` <= 0 every client gets every queue, as
    one queue of id -1 per broker, meaning "pop from all"; with n > 0 a client gets its
    own share plus the next n clients' shares."""


@dataclass(frozen=True, slots=True)
class RequestMode:
    """A (topic, group)'s mode (``SetMessageRequestModeRequestBody``)."""

    topic: str
    group: str
    mode: MessageRequestMode = MessageRequestMode.PULL
    pop_share_queue_num: int = 0

    def to_json(self) -> dict[str, Any]:
        """The body / table entry with RocketMQ's field names."""
        return {"topic": self.topic, "consumerGroup": self.group, "mode": self.mode,
                "popShareQueueNum": self.pop_share_queue_num}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RequestMode:
        """Parse a body.

        Raises:
            ValueError, KeyError, TypeError: not a request-mode body, or a mode other
                than PULL/POP.
        """
        mode = MessageRequestMode(str(d.get("mode", MessageRequestMode.PULL)))
        return cls(str(d["topic"]), str(d["consumerGroup"]), mode,
                   int(d.get("popShareQueueNum", 0)))  # fmt: skip


class RequestModeTable:
    """The modes by (topic, group), persisted on every change. Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._table: dict[tuple[str, str], RequestMode] = {}
        try:
            doc = json.loads(path.read_bytes())
            for groups in doc.get("messageRequestModeMap", {}).values():
                for entry in groups.values():
                    m = RequestMode.from_json(entry)
                    self._table[(m.topic, m.group)] = m
        except FileNotFoundError:
            pass

    def get(self, topic: str, group: str) -> RequestMode:
        """The mode set for (topic, group), else the default (PULL)."""
        with self._lock:
            found = self._table.get((topic, group))
        return found if found is not None else RequestMode(topic, group)

    def set(self, mode: RequestMode) -> None:
        """Record ``mode`` and persist the table.

        Raises:
            OSError: the file could not be written.
        """
        with self._lock:
            self._table[(mode.topic, mode.group)] = mode
            nested: dict[str, dict[str, Any]] = {}
            for (t, g), m in sorted(self._table.items()):
                nested.setdefault(t, {})[g] = m.to_json()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(dumps({"messageRequestModeMap": nested}))
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, self.path)


def allocate_averagely(queues: list[int], clients: list[str], me: str) -> list[int]:
    """``AllocateMessageQueueAveragely``: contiguous shares, the first ``len % n``
    clients one more.

    >>> allocate_averagely([0, 1, 2, 3, 4], ["a", "b"], "b")
    [3, 4]
    """
    if me not in clients or not queues:
        return []
    i, n, q = clients.index(me), len(clients), len(queues)
    mod = q % n
    size = (q // n + 1 if i < mod else q // n) if q > n else 1
    start = i * size if i < mod else i * size + mod
    return [queues[(start + k) % q] for k in range(min(size, q - start))]


def allocate_by_circle(queues: list[int], clients: list[str], me: str) -> list[int]:
    """``AllocateMessageQueueAveragelyByCircle``: queue k to client k mod n.

    >>> allocate_by_circle([0, 1, 2, 3, 4], ["a", "b"], "b")
    [1, 3]
    """
    if me not in clients:
        return []
    i, n = clients.index(me), len(clients)
    return [q for k, q in enumerate(queues) if k % n == i]


STRATEGIES = {"AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_by_circle}


def assign(
    mode: RequestMode, queues: list[int], clients: list[str], me: str, *,
    broadcasting: bool = False, strategy: str = "AVG",
) -> list[int] | None:  # fmt: skip
    """The queue ids ``me`` is assigned (-1 alone: pop from every queue); None when no
    answer can be given (unknown strategy, ``me`` not registered in clustering)."""
    queues = sorted(queues)
    if broadcasting:
        return queues
    alloc = STRATEGIES.get(strategy)
    clients = sorted(clients)
    if alloc is None or me not in clients:
        return None
    if mode.mode is MessageRequestMode.POP and mode.pop_share_queue_num <= 0:
        return [-1]
    if mode.mode is MessageRequestMode.POP and len(clients) <= len(queues):
        got = list(alloc(queues, clients, me))
        i = clients.index(me)
        for k in range(1, mode.pop_share_queue_num + 1):
            got += alloc(queues, clients, clients[(i + k) % len(clients)])
        return sorted(set(got))
    if mode.mode is MessageRequestMode.POP:
        return [queues[clients.index(me) % len(queues)]] if queues else []
    return alloc(queues, clients, me)
