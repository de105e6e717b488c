"""The broker's offset and message queries, answered from the store and the offset table.

:class:`~mqstore.broker.core.BrokerCore` owns one :class:`BrokerQueries` as
``core.queries``; it reads the store and the offset table it is given and keeps no state
of its own. Each method answers one request code (QUERY_CONSUMER_OFFSET,
UPDATE_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME, VIEW_MESSAGE_BY_ID, QUERY_MESSAGE); all are thread-safe, as the
store and the offset manager are.
"""

from __future__ import annotations

from mqstore.broker.offsets import ConsumerOffsetManager
from mqstore.consumequeue.results import QueryResult, StoredMessage
from mqstore.consumequeue.search import BoundaryType
from mqstore.message import validate_topic
from mqstore.store_view import StoreView


class BrokerQueries:
    """Offset and message queries over one store and one offset table.

    ``memory_limit`` is the byte distance behind the CommitLog's end within which a
    message counts as "in memory" (RocketMQ's ``accessMessageInMemoryMaxRatio`` of
    physical memory), used by :meth:`query_offset`.
    """

    def __init__(self, store: StoreView, offsets: ConsumerOffsetManager, memory_limit: int) -> None:
        self.store = store
        self.offsets = offsets
        self._memory_limit = memory_limit

    def query_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """QUERY_CONSUMER_OFFSET: the committed offset; with none, 0 when the queue
        starts at 0 and its first message is still "in memory" (a new group on a small
        queue starts at the beginning), else None (QUERY_NOT_FOUND)."""
        offset = self.offsets.query(group, topic, queue_id)
        if offset is not None:
            return offset
        store = self.store
        if store.min_offset_in_queue(topic, queue_id) > 0:
            return None
        cq = store.consume_queue(topic, queue_id)
        unit = cq.unit_at(0) if cq is not None else None
        if unit is not None and store.max_physical_offset - unit[0] > self._memory_limit:
            return None
        return 0

    def update_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET.

        The topic name is validated first: the offset table key is ``topic@group`` and
        is persisted, so a name no topic can have is never stored.

        Raises:
            IllegalTopicError: ``topic`` is not a legal topic name (nothing stored).
        """
        validate_topic(topic)
        self.offsets.commit(group, topic, queue_id, offset)

    def max_offset(self, topic: str, queue_id: int) -> int:
        """GET_MAX_OFFSET."""
        return self.store.max_offset_in_queue(topic, queue_id)

    def min_offset(self, topic: str, queue_id: int) -> int:
        """GET_MIN_OFFSET."""
        return self.store.min_offset_in_queue(topic, queue_id)

    def search_offset(
        self, topic: str, queue_id: int, timestamp: int, boundary: BoundaryType = BoundaryType.LOWER
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP."""
        return self.store.offset_by_time(topic, queue_id, timestamp, boundary)

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        """GET_EARLIEST_MSG_STORETIME (-1 when the queue is empty)."""
        return self.store.earliest_message_time(topic, queue_id)

    def view_message(self, physical_offset: int) -> StoredMessage | None:
        """VIEW_MESSAGE_BY_ID (the id's physical offset)."""
        return self.store.stored_message_at(physical_offset)

    def raw_message_at(self, physical_offset: int) -> bytes | None:
        """The stored record bytes at ``physical_offset`` (VIEW_MESSAGE_BY_ID and
        QUERY_MESSAGE bodies), None if no valid record starts there."""
        found = self.record_at(physical_offset)
        return None if found is None else found[1]

    def record_at(self, physical_offset: int) -> tuple[StoredMessage, bytes] | None:
        """The record at ``physical_offset`` and its stored bytes, None if no valid
        record starts there."""
        msg = self.store.stored_message_at(physical_offset)
        raw = self.store.record_bytes(physical_offset, msg.size) if msg is not None else None
        return None if msg is None or raw is None else (msg, raw)

    def query_message(
        self, topic: str, key: str, max_num: int, begin: int, end: int
    ) -> QueryResult:
        """QUERY_MESSAGE by key or UNIQ_KEY."""
        return self.store.query_by_key(topic, key, max_num, begin, end)
