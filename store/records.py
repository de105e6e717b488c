"""The store's own record type: :class:`StoredMessage`, a message read back.

What every reader of stored messages shares (the store's pulls and key lookups, the
broker, the clients, POP): a decoded record with its body decompressed. It is built
once per message read, so it is a NamedTuple created with ``tuple.__new__`` (a
16-field frozen dataclass costs several times the rest of the per-message work);
derived fields (properties, tags, keys, hosts, ids) are computed on access.
:func:`stored_message` builds one from a scanned record.
"""

from __future__ import annotations

from typing import NamedTuple

from mqstore.commitlog import format as fmt
from mqstore.commitlog._derived import KEYS, PROPERTIES, TAGS, UNIQ_KEY
from mqstore.compression import COMPRESSED_FLAG, decompress
from mqstore.message import bytes_host

_new = tuple.__new__


class _StoredFields(NamedTuple):
    """The fields of :class:`StoredMessage`, in order."""

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


class StoredMessage(_StoredFields):
    """A message read back from the store, body decompressed.

    ``body`` is what the producer sent; if the stored bytes do not decompress, the
    stored bytes are kept and ``sys_flag`` still has the compressed bit, so the
    caller can tell. Hosts are kept raw (address bytes + port); :attr:`born_host`
    and :attr:`store_host` decode them.
    """

    __slots__ = ()

    properties, tags, keys, uniq_key = PROPERTIES, TAGS, KEYS, UNIQ_KEY

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


__all__ = ["StoredMessage", "stored_message"]
