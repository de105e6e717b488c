"""What the read API returns: stored messages and pull / query results.

:class:`StoredMessage` is built once per pulled message, so it is a NamedTuple
created with ``tuple.__new__`` (a 16-field frozen dataclass costs several times the
rest of the per-message work); derived fields (properties, tags, keys,
hosts, ids) are computed on access. The pull results are frozen dataclasses, one per
call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from mqstore.commitlog import format as fmt
from mqstore.compression import COMPRESSED_FLAG, decompress
from mqstore.message import (
    bytes_host,
    keys_of,
    string_to_properties,
    tags_of,
    uniq_key_of,
)
from mqstore.status import GetStatus

_new = tuple.__new__


class StoredMessage(NamedTuple):
    """A message read back from the store, body decompressed.

    ``body`` is what the producer sent; if the stored bytes do not decompress, the
    stored bytes are kept and ``sys_flag`` still has the compressed bit, so the
    caller can tell. Hosts are kept raw (address bytes + port); :attr:`born_host`
    and :attr:`store_host` decode them.
    """

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size: int
    body: bytes
    sys_flag: int
    flag: int
    born_timestamp: int
    store_timestamp: int
    reconsume_times: int
    prepared_transaction_offset: int
    properties_string: str
    body_crc: int
    born_host_raw: bytes
    store_host_raw: bytes

    @property
    def properties(self) -> dict[str, str]:
        """Properties parsed with RocketMQ's rules."""
        return string_to_properties(self.properties_string)

    @property
    def tags(self) -> str | None:
        """The TAGS property, if any."""
        return tags_of(self.properties_string)

    @property
    def keys(self) -> list[str]:
        """The KEYS property split on spaces."""
        return keys_of(self.properties_string)

    @property
    def uniq_key(self) -> str | None:
        """The UNIQ_KEY property (client message id), if any."""
        return uniq_key_of(self.properties_string)

    @property
    def born_host(self) -> tuple[str, int]:
        """(address, port) of the producer."""
        return bytes_host(self.born_host_raw)

    @property
    def store_host(self) -> tuple[str, int]:
        """(address, port) of the broker that stored the message."""
        return bytes_host(self.store_host_raw)

    @property
    def msg_id(self) -> str:
        """The offset message id (store host + physical offset)."""
        return self.store_host_raw.hex().upper() + f"{self.physical_offset:016X}"


def stored_message(
    info: fmt.RecordInfo, buf: bytes | bytearray | memoryview, queue_offset: int | None = None
) -> StoredMessage:
    """A :class:`StoredMessage` from a scanned record whose bytes are in ``buf``."""
    # One tuple unpack instead of 16 NamedTuple attribute lookups (cheaper).
    (size, _v, crc, qid, flag, qoff, phys, sys_flag, born_ts, born_raw, store_ts, store_raw,
     reconsume, prepared, body_pos, body_len, topic, props) = info  # fmt: skip
    body = bytes(buf[body_pos : body_pos + body_len])
    if sys_flag & COMPRESSED_FLAG:
        try:
            body = decompress(body, sys_flag)
            sys_flag &= ~COMPRESSED_FLAG
        except ValueError:
            pass
    return _new(
        StoredMessage,
        (
            topic,
            qid,
            qoff if queue_offset is None else queue_offset,
            phys,
            size,
            body,
            sys_flag,
            flag,
            born_ts,
            store_ts,
            reconsume,
            prepared,
            props,
            crc,
            born_raw,
            store_raw,
        ),
    )


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
