"""The decoded record: :class:`MessageRecord`, field for field as on disk.

Contract: a frozen value with derived views (properties, tags, keys, message id) and
:func:`make_record`, which derives BODYCRC, the IPv6 bits and the version so that a
built record always encodes. No bytes are read or written here; the byte layout is
:mod:`mqstore.commitlog._layout`'s. Import these names from :mod:`mqstore.commitlog.format`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqstore import compression
from mqstore.commitlog._derived import (
    KEYS,
    PROPERTIES,
    TAGS,
    TAGS_CODE,
    UNIQ_KEY,
)
from mqstore.commitlog._layout import (
    BORNHOST_V6_FLAG,
    MAX_TOPIC_LENGTH_V1,
    STOREHOST_V6_FLAG,
    TRANSACTION_MASK,
    TransactionType,
    body_crc,
    record_length,
)
from mqstore.message import offset_msg_id


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One stored message, field for field as on disk.

    ``body`` is the body as stored (compressed when ``sys_flag`` says so; see
    :meth:`decompressed_body`). ``properties_string`` is kept verbatim so that
    ``encode(decode(b)) == b`` holds byte for byte, including property order,
    duplicates and a trailing separator.
    """

    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_string: str
    body_crc: int
    version: int = 1

    properties, tags, keys, uniq_key, tags_code = PROPERTIES, TAGS, KEYS, UNIQ_KEY, TAGS_CODE

    @property
    def transaction_type(self) -> TransactionType:
        """Transaction type from SYSFLAG bits 2-3."""
        return TransactionType(self.sys_flag & TRANSACTION_MASK)

    @property
    def total_size(self) -> int:
        """TOTALSIZE of this record when encoded."""
        return record_length(
            self.sys_flag,
            self.version,
            len(self.body),
            len(self.topic.encode("utf-8")),
            len(self.properties_string.encode("utf-8")),
        )

    @property
    def msg_id(self) -> str:
        """The offset message id (store host + physical offset)."""
        return offset_msg_id(self.store_host, self.physical_offset)

    @property
    def valid_crc(self) -> bool:
        """True when BODYCRC matches the stored body."""
        return body_crc(self.body) == self.body_crc

    def decompressed_body(self) -> bytes:
        """The body as the producer sent it.

        Raises:
            ValueError: the compressed bytes are not a valid stream of the named codec.
        """
        return compression.decompress(self.body, self.sys_flag)


def make_record(
    *,
    topic: str,
    body: bytes,
    properties_string: str = "",
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: tuple[str, int] = ("127.0.0.1", 0),
    store_timestamp: int = 0,
    store_host: tuple[str, int] = ("127.0.0.1", 10911),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    version: int | None = None,
) -> MessageRecord:
    """Build a record with BODYCRC computed, IPv6 flags and version derived from the hosts/topic."""
    if ":" in born_host[0]:
        sys_flag |= BORNHOST_V6_FLAG
    else:
        sys_flag &= ~BORNHOST_V6_FLAG
    if ":" in store_host[0]:
        sys_flag |= STOREHOST_V6_FLAG
    else:
        sys_flag &= ~STOREHOST_V6_FLAG
    if version is None:
        version = 2 if len(topic.encode("utf-8")) > MAX_TOPIC_LENGTH_V1 else 1
    return MessageRecord(
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_timestamp=store_timestamp,
        store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        body=bytes(body),
        topic=topic,
        properties_string=properties_string,
        body_crc=body_crc(body),
        version=version,
    )
