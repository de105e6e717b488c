"""Topic configs (RocketMQ ``TopicConfigManager``), persisted to ``config/topics.json``.

A topic config says how many queues a topic has and what may be done with them
(``perm``: READ 4 | WRITE 2 | INHERIT 1). The broker hands these to clients in route
data and checks sends against them.

Rules
-----
Rule 1. System topics exist from the start, as in RocketMQ 4.9.8 (``TopicConfigManager``,
``TransactionalMessageBridge``): ``TBW102`` (the template of auto-created topics, 8
queues, perm 7 when auto-creation is enabled), ``SELF_TEST_TOPIC``,
``OFFSET_MOVED_EVENT``, ``<cluster>_REPLY_TOPIC`` and ``RMQ_SYS_TRANS_HALF_TOPIC`` (one
queue each, perm 6), ``SCHEDULE_TOPIC_XXXX`` (18 queues), ``BenchmarkTest`` (1024
queues, perm 6) and the cluster and broker names (perm 7, 16 queues and one). A Java
broker creates the half topic at its first transaction check (a minute after start);
ours has it from the start, so ``mqadmin topicList`` shows the same set either way
once that minute has passed.

Rule 2. A send to an unknown topic auto-creates it when ``TBW102`` has the INHERIT bit:
``min(requested queue count, TBW102's write queues)`` queues, perm 6.

Rule 3. Topics found in the store's consume queues but missing from the file (a store
written by the embedded API) are registered with ``max(queue id) + 1`` queues, so their
routes exist.

The file is fastjson ``PrettyFormat`` with bean fields in alphabetical order, written
through :func:`mqstore.remoting.fastjson.write_config_file` (temp file + ``.bak``).
Thread-safe: every method takes the manager's lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Final

from mqstore.broker.configtable import VersionedTable
from mqstore.failures import FailureCounter
from mqstore.remoting.errors import BadRequestError
from mqstore.remoting.topic_config import MESSAGE_TYPE_ATTRIBUTE as MESSAGE_TYPE_ATTRIBUTE  # noqa: PLC0414
from mqstore.remoting.topic_config import TopicConfig as TopicConfig  # noqa: PLC0414
from mqstore.remoting.values import PERM_ALL, PERM_INHERIT, PERM_RW
from mqstore.system_topics import SCHEDULE_TOPIC as SCHEDULE_TOPIC  # noqa: PLC0414 (re-export)

log = logging.getLogger(__name__)

AUTO_CREATE_TOPIC_KEY: Final = "TBW102"
SCHEDULE_TOPIC_QUEUE_NUMS: Final = 18
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
BENCHMARK_TOPIC: Final = "BenchmarkTest"
BENCHMARK_QUEUE_NUMS: Final = 1024
DEFAULT_TOPIC_QUEUE_NUMS: Final = 8
"""RocketMQ ``BrokerConfig.defaultTopicQueueNums``: TBW102's queue count."""
MAX_QUEUE_NUMS: Final = 1024
"""Most read or write queues a topic may have. RocketMQ's counts are Java ints that
must be positive; every queue is a directory, a route entry and a consumer's work, so a
client asking for billions would take the broker and every client down with it. 1024
is far above any real topic (the defaults are 4 and 8)."""


TOPIC_MESSAGE_TYPES: Final = frozenset({"UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION",
                                        "MIXED"})  # fmt: skip
"""``TopicMessageType`` values; a topic without the attribute is NORMAL."""


def parse_attributes(text: str) -> tuple[tuple[str, str], ...]:
    """The topic attributes of an UPDATE_AND_CREATE_TOPIC ``attributes`` header field
    (RocketMQ 5 ``AttributeParser``: ``+key=value`` items joined by ``,``), sorted by key.

    >>> parse_attributes("+message.type=FIFO")
    (('message.type', 'FIFO'),)

    Raises:
        BadRequestError: an item not of that form, an unknown attribute or message type.
    """
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, eq, value = item.partition("=")
        if not key.startswith("+") or not eq:
            raise BadRequestError(f"attribute {item!r} is not +key=value")
        if key[1:] != MESSAGE_TYPE_ATTRIBUTE:
            raise BadRequestError(f"unsupported topic attribute {key[1:]!r}")
        if value not in TOPIC_MESSAGE_TYPES:
            known = ", ".join(sorted(TOPIC_MESSAGE_TYPES))
            raise BadRequestError(f"message.type {value!r} is not one of {known}")
        out[key[1:]] = value
    return tuple(sorted(out.items()))


def check_topic_config(config: TopicConfig) -> TopicConfig:
    """Return ``config`` if its numbers are within RocketMQ's ranges, else raise.

    Raises:
        BadRequestError: a queue count outside ``[1, MAX_QUEUE_NUMS]``, or a
            permission with bits RocketMQ does not define.
    """
    for what, n in (("readQueueNums", config.read_queue_nums),
                    ("writeQueueNums", config.write_queue_nums)):  # fmt: skip
        if not 1 <= n <= MAX_QUEUE_NUMS:
            raise BadRequestError(f"{what} {n} of {config.topic_name} outside 1..{MAX_QUEUE_NUMS}")
    if not 0 <= config.perm <= PERM_ALL:
        raise BadRequestError(f"perm {config.perm} of {config.topic_name} outside 0..{PERM_ALL}")
    return config


def system_topics(cluster_name: str, broker_name: str, auto_create: bool) -> list[TopicConfig]:
    """Rule 1: the topics every RocketMQ broker starts with."""
    tbw_perm = PERM_RW | (PERM_INHERIT if auto_create else 0)
    return [
        TopicConfig(
            AUTO_CREATE_TOPIC_KEY, DEFAULT_TOPIC_QUEUE_NUMS, DEFAULT_TOPIC_QUEUE_NUMS, tbw_perm
        ),
        TopicConfig("SELF_TEST_TOPIC", 1, 1),
        TopicConfig("OFFSET_MOVED_EVENT", 1, 1),
        TopicConfig(f"{cluster_name}_REPLY_TOPIC", 1, 1),
        TopicConfig(TRANS_HALF_TOPIC, 1, 1),
        TopicConfig(BENCHMARK_TOPIC, BENCHMARK_QUEUE_NUMS, BENCHMARK_QUEUE_NUMS),
        TopicConfig(SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUMS, SCHEDULE_TOPIC_QUEUE_NUMS),
        TopicConfig(cluster_name, 16, 16, PERM_RW | PERM_INHERIT),
        TopicConfig(broker_name, 1, 1, PERM_RW | PERM_INHERIT),
    ]


class TopicConfigManager:
    """The broker's topic table, loaded from and persisted to ``topics.json``."""

    def __init__(self, path: Path, defaults: list[TopicConfig]) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._table: dict[str, TopicConfig] = {t.topic_name: t for t in defaults}
        self._file = VersionedTable(path, "topicConfigTable")
        self.failures = FailureCounter(log, "topic configs")
        self._listeners: list[Callable[[TopicConfig], None]] = []
        self._create_listeners: list[Callable[[TopicConfig], None]] = []
        for name, obj in self._file.load().items():
            try:  # an entry no broker could have written is left out, not fatal
                self._table[name] = check_topic_config(TopicConfig.from_json(name, obj))
            except (BadRequestError, ValueError, TypeError) as e:
                self.failures.record("loading a topic config", e, name)

    def on_change(self, listener: Callable[[TopicConfig], None]) -> None:
        """Call ``listener(config)`` whenever a topic is created or its config replaced
        (after the table changed, outside its lock, on the changing thread: a listener
        must return quickly and must not raise)."""
        self._listeners.append(listener)

    def on_create(self, listener: Callable[[TopicConfig], None]) -> None:
        """Call ``listener(config)`` when a topic that was not in the table is added (not
        when an existing topic's config is replaced); same threading rules as
        :meth:`on_change`, which runs first."""
        self._create_listeners.append(listener)

    def _notify(self, config: TopicConfig, *, created: bool) -> None:
        for listener in self._listeners:
            listener(config)
        if created:
            for listener in self._create_listeners:
                listener(config)

    def get(self, topic: str) -> TopicConfig | None:
        """The topic's config, None if unknown."""
        with self._lock:
            return self._table.get(topic)

    def all(self) -> dict[str, TopicConfig]:
        """A snapshot of the table."""
        with self._lock:
            return dict(self._table)

    def put(self, config: TopicConfig) -> None:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC) and persist.

        Raises:
            BadRequestError: see :func:`check_topic_config` (nothing changes).
        """
        check_topic_config(config)
        with self._lock:
            created = config.topic_name not in self._table
            self._table[config.topic_name] = config
            self._persist_locked()
        self._notify(config, created=created)

    def learn(self, topic: str, queue_nums: int) -> None:
        """Rule 3: make sure ``topic`` has at least ``queue_nums`` queues (no persist)."""
        with self._lock:
            old = self._table.get(topic)
            if old is None:
                new = self._table[topic] = TopicConfig(topic, queue_nums, queue_nums)
            elif old.read_queue_nums < queue_nums:
                new = self._table[topic] = replace(
                    old, read_queue_nums=queue_nums, write_queue_nums=queue_nums
                )
            else:
                return
        self._notify(new, created=old is None)

    def create_in_send(self, topic: str, default_topic: str, queue_nums: int) -> TopicConfig | None:
        """Rule 2 (``createTopicInSendMessageMethod``): the config of ``topic``,
        auto-created from ``default_topic`` if needed; None when not allowed."""
        known = self._table.get(topic)  # lock-free fast path: dict reads are atomic
        if known is not None:
            return known
        with self._lock:
            existing = self._table.get(topic)
            if existing is not None:
                return existing
            template = self._table.get(default_topic) or self._table.get(AUTO_CREATE_TOPIC_KEY)
            if template is None or not template.perm & PERM_INHERIT:
                return None
            n = max(1, min(queue_nums, template.write_queue_nums))
            created = TopicConfig(topic, n, n, PERM_RW)
            self._table[topic] = created
            self._persist_locked()
        self._notify(created, created=True)
        return created

    def create_system(self, topic: str, queue_nums: int, perm: int = PERM_RW) -> TopicConfig:
        """Retry / DLQ topics (``createTopicInSendMessageBackMethod``): created if absent."""
        with self._lock:
            existing = self._table.get(topic)
            if existing is not None:
                return existing
            created = TopicConfig(topic, queue_nums, queue_nums, perm)
            self._table[topic] = created
            self._persist_locked()
        self._notify(created, created=True)
        return created

    def delete(self, topic: str) -> bool:
        """Drop a topic's config (DELETE_TOPIC_IN_BROKER) and persist; False if unknown."""
        with self._lock:
            if self._table.pop(topic, None) is None:
                return False
            self._persist_locked()
            return True

    def wrapper_body(self) -> bytes:
        """GET_ALL_TOPIC_CONFIG's ``TopicConfigSerializeWrapper``: the table and its data
        version, as the file holds them (compact JSON)."""
        with self._lock:
            beans = {name: t.to_bean() for name, t in self._table.items()}
            return self._file.document(beans).encode()

    def persist(self) -> None:
        """Write ``topics.json`` now."""
        with self._lock:
            self._persist_locked()

    def _persist_locked(self) -> None:
        self._file.persist({name: t.to_bean() for name, t in self._table.items()})
