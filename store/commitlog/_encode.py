"""The reference encoder: a :class:`MessageRecord` or its pre-encoded parts to bytes.

Contract: pure functions, no I/O; ``encode(decode(b)) == b`` byte for byte for every
valid record, and a length that does not fit its field raises :class:`EncodeError`
(never a truncated record). The put path (``mqstore.put_frame`` and
``CommitLog.append``) gives the same bytes. The byte layout is
:mod:`mqstore.commitlog._layout`'s. Import these names from :mod:`mqstore.commitlog.format`.
"""

from __future__ import annotations

from typing import Final

from mqstore.commitlog import _layout
from mqstore.commitlog._layout import (
    _HEADERS,
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH_V1,
)
from mqstore.commitlog._record import MessageRecord

# Assigned, not imported: CPython 3.11 compiles ``name.method(...)`` on a name bound by an
# import to LOAD_ATTR (a bound method built per call) instead of LOAD_METHOD. These
# structs are called per record, so they keep the bytecode they had beside the layout.
_SHORT: Final = _layout._SHORT
_SIZE_MAGIC: Final = _layout._SIZE_MAGIC


class EncodeError(ValueError):
    """A record cannot be encoded: a length does not fit its field."""


def encode_raw(
    *,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes | bytearray | memoryview,
    crc: int,
    topic: bytes,
    properties: bytes,
    version: int = 1,
) -> bytes:
    """Encode one record from pre-encoded parts (hosts as address+port bytes).

    The reference the put path (``CommitLog.append``) is tested against.
    ``sys_flag`` must already carry the IPv6 bits that match the host lengths.

    Raises:
        EncodeError: topic or properties too long for their length fields.
    """
    p_len = len(properties)
    if p_len > MAX_PROPERTIES_LENGTH:
        raise EncodeError(f"properties length {p_len} > {MAX_PROPERTIES_LENGTH}")
    topic_part, magic = topic_field(topic, version)
    header = _HEADERS[(len(born_host), len(store_host))]
    total = header.size + len(body) + len(topic_part) + 2 + p_len
    return b"".join((
        header.pack(
            total, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
            born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
            prepared_transaction_offset, len(body),
        ),
        body, topic_part, _SHORT.pack(p_len), properties,
    ))  # fmt: skip


def topic_field(topic: bytes, version: int | None = None) -> tuple[bytes, int]:
    """(topic length field + topic, MAGICCODE) of a ``version`` record; with no
    version, of the version RocketMQ 5.x writes (V1 up to 127 bytes of topic, else V2).

    Raises:
        EncodeError: the topic is too long for this version.
    """
    t_len = len(topic)
    if version is None:
        version = 1 if t_len <= MAX_TOPIC_LENGTH_V1 else 2
    if version == 1:
        if t_len > MAX_TOPIC_LENGTH_V1:
            raise EncodeError(f"topic length {t_len} > {MAX_TOPIC_LENGTH_V1} needs V2 magic")
        return bytes((t_len,)) + topic, MAGIC_V1
    if t_len > 32767:
        raise EncodeError(f"topic length {t_len} > 32767")
    return _SHORT.pack(t_len) + topic, MAGIC_V2


def host_to_bytes(host: tuple[str, int]) -> bytes:
    """Host tuple to the 8/20 bytes a record stores."""
    from mqstore.message import host_bytes

    return host_bytes(host)


def encode(rec: MessageRecord) -> bytes:
    """Encode a record exactly; the inverse of :func:`decode` for valid bytes.

    Raises:
        EncodeError: a length does not fit its field.
    """
    return encode_raw(
        queue_id=rec.queue_id,
        flag=rec.flag,
        queue_offset=rec.queue_offset,
        physical_offset=rec.physical_offset,
        sys_flag=rec.sys_flag,
        born_timestamp=rec.born_timestamp,
        born_host=host_to_bytes(rec.born_host),
        store_timestamp=rec.store_timestamp,
        store_host=host_to_bytes(rec.store_host),
        reconsume_times=rec.reconsume_times,
        prepared_transaction_offset=rec.prepared_transaction_offset,
        body=rec.body,
        crc=rec.body_crc,
        topic=rec.topic.encode("utf-8"),
        properties=rec.properties_string.encode("utf-8"),
        version=rec.version,
    )


def encode_blank(max_blank: int) -> bytes:
    """The 8-byte end-of-segment record for ``max_blank`` bytes left in the file.

    >>> encode_blank(1000).hex()
    '000003e8cbd43194'
    """
    return _SIZE_MAGIC.pack(max_blank, BLANK_MAGIC)
