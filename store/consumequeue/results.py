"""What the read API returns: pull and query results.

The pull results are frozen dataclasses, one per call; the messages they carry are
:class:`~mqstore.records.StoredMessage` (the store's record type, re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass

from mqstore.records import StoredMessage, stored_message
from mqstore.status import GetStatus


@dataclass(frozen=True, slots=True)
class GetResult:
    """Outcome of :meth:`MessageStore.get_message` (RocketMQ ``GetMessageResult``).

    ``next_begin_offset`` is where the next pull of this queue should start;
    ``min_offset``/``max_offset`` are the queue's bounds at the time of the pull
    (0 when the queue does not exist).
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: tuple[StoredMessage, ...] = ()
    suggest_pulling_from_slave: bool = False

    @property
    def found(self) -> bool:
        """True when messages were returned."""
        return self.status is GetStatus.FOUND


@dataclass(frozen=True, slots=True)
class GetRawResult:
    """The broker's variant: the raw CommitLog records, zero-copy.

    ``buffers`` are views of the mapped CommitLog, one record each; they keep the
    mapping alive (a segment deleted meanwhile stays readable through them) and
    must not be written to. ``queue_offsets`` gives each record's queue offset.
    Only the consume-queue tag test was applied (as a broker does): hash
    collisions are for the client to re-filter.
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: tuple[memoryview, ...] = ()
    queue_offsets: tuple[int, ...] = ()
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        """Number of records returned."""
        return len(self.buffers)

    def body(self) -> bytes:
        """The records concatenated: a pull response body (one copy)."""
        return b"".join(self.buffers)


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Outcome of :meth:`MessageStore.query_by_key`: messages whose key really matches."""

    messages: tuple[StoredMessage, ...]
    index_last_update_timestamp: int = 0
    index_last_update_phy_offset: int = 0


__all__ = ["GetRawResult", "GetResult", "QueryResult", "StoredMessage", "stored_message"]
