"""The put path's encoder, :class:`RecordEncoder`, bound to one store host.

Contract: the same bytes as :func:`mqstore.commitlog._encode.encode_raw`, built in two
halves so the put lock covers only the fixed header that needs the log position (the
tail is framed outside it), or packed straight into the mapping. Not thread-safe for
the in-place writes: the caller holds the put lock. The byte layout is
:mod:`mqstore.commitlog._layout`'s. Import :class:`RecordEncoder` from
:mod:`mqstore.commitlog.format`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from mqstore.commitlog import _layout
from mqstore.commitlog._encode import EncodeError
from mqstore.commitlog._layout import (
    _BYTE_VALUES,
    _HEADERS,
    BORNHOST_V6_FLAG,
    IPV4_HOST_LEN,
    IPV6_HOST_LEN,
    MAGIC_V1,
    MAGIC_V2,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH_V1,
    STOREHOST_V6_FLAG,
)

if TYPE_CHECKING:
    import mmap

# Assigned, not imported: CPython 3.11 compiles ``name.method(...)`` on a name bound by an
# import to LOAD_ATTR (a bound method built per call) instead of LOAD_METHOD. These
# structs are called per record, so they keep the bytecode they had beside the layout.
_SHORT: Final = _layout._SHORT


class RecordEncoder:
    """Hot-path encoder bound to one store host (the CommitLog's put path).

    Splits encoding in two so the put lock is held only for the part that needs the
    log position: :meth:`tail` (topic and properties with their length fields) is
    built outside the lock, :meth:`encode` packs the fixed header around it inside.
    Same bytes as :func:`encode_raw`, at a fraction of its cost per record.
    """

    __slots__ = (
        "_body4_pos",
        "_header4",
        "_header6",
        "_into4",
        "_pack4",
        "_pack6",
        "store_host",
        "store_v6_flag",
    )  # fmt: skip

    def __init__(self, store_host: bytes) -> None:
        self.store_host = store_host
        slen = len(store_host)
        self.store_v6_flag = STOREHOST_V6_FLAG if slen == IPV6_HOST_LEN else 0
        self._pack4 = _HEADERS[(IPV4_HOST_LEN, slen)].pack
        self._pack6 = _HEADERS[(IPV6_HOST_LEN, slen)].pack
        # TOTALSIZE = the layout's header length + body + tail (with its length fields)
        self._header4 = _layout.header_length(IPV4_HOST_LEN, slen)
        self._header6 = _layout.header_length(IPV6_HOST_LEN, slen)
        self._into4 = _HEADERS[(IPV4_HOST_LEN, slen)].pack_into
        self._body4_pos = _HEADERS[(IPV4_HOST_LEN, slen)].size

    @staticmethod
    def tail(topic: bytes, properties: bytes) -> tuple[bytes, int]:
        """(topic/properties tail bytes, version) for V1 topics <= 127 bytes, else V2.

        Raises:
            EncodeError: lengths that do not fit their fields.
        """
        t_len = len(topic)
        p_len = len(properties)
        if p_len > MAX_PROPERTIES_LENGTH:
            raise EncodeError(f"properties length {p_len} > {MAX_PROPERTIES_LENGTH}")
        if t_len <= MAX_TOPIC_LENGTH_V1:
            return b"".join((bytes((t_len,)), topic, p_len.to_bytes(2, "big"), properties)), 1
        if t_len > 32767:
            raise EncodeError(f"topic length {t_len} > 32767")
        return _SHORT.pack(t_len) + topic + _SHORT.pack(p_len) + properties, 2

    def frame(
        self, sys_flag: int, body_len: int, topic: bytes, properties: bytes
    ) -> tuple[bytes, int, int]:
        """(tail, version, TOTALSIZE) in one call: :meth:`tail` and :meth:`size` together.

        Raises:
            EncodeError: lengths that do not fit their fields.
        """
        t_len = len(topic)
        if t_len <= MAX_TOPIC_LENGTH_V1 and len(properties) <= MAX_PROPERTIES_LENGTH:
            # the common case inline: one join instead of a call and four objects
            tail = b"".join(
                (_BYTE_VALUES[t_len], topic, len(properties).to_bytes(2, "big"), properties)
            )
            version = 1
        else:
            tail, version = self.tail(topic, properties)
        header = self._header6 if sys_flag & BORNHOST_V6_FLAG else self._header4
        return tail, version, header + body_len + len(tail)

    def v1_framer(self, topic: bytes) -> Callable[[int, bytes], tuple[bytes, int]] | None:
        """:meth:`frame` specialised for one topic, for records with SYSFLAG 0 (IPv4
        born host) and properties within limits: ``(body length, properties) ->
        (tail, TOTALSIZE)``. None when the topic needs V2. Batches frame every record
        of a topic with it: the topic's part of the tail and the fixed size are
        computed once instead of per record."""
        if len(topic) > MAX_TOPIC_LENGTH_V1:
            return None
        head = _BYTE_VALUES[len(topic)] + topic
        base = self._header4 + len(head) + 2
        join = b"".join

        def frame(body_len: int, properties: bytes) -> tuple[bytes, int]:
            p_len = len(properties)
            return join((head, p_len.to_bytes(2, "big"), properties)), base + body_len + p_len

        return frame

    def size(self, sys_flag: int, body_len: int, tail_len: int) -> int:
        """TOTALSIZE of a record with this body and tail."""
        header = self._header6 if sys_flag & BORNHOST_V6_FLAG else self._header4
        return header + body_len + tail_len

    def encode(
        self,
        total: int,
        version: int,
        crc: int,
        queue_id: int,
        flag: int,
        queue_offset: int,
        physical_offset: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: bytes,
        store_timestamp: int,
        reconsume_times: int,
        prepared_transaction_offset: int,
        body: bytes,
        tail: bytes,
    ) -> bytes:
        """The whole record; ``sys_flag`` gets the store-host IPv6 bit added here."""
        pack = self._pack6 if sys_flag & BORNHOST_V6_FLAG else self._pack4
        return (
            pack(
                total,
                MAGIC_V1 if version == 1 else MAGIC_V2,
                crc,
                queue_id,
                flag,
                queue_offset,
                physical_offset,
                sys_flag | self.store_v6_flag,
                born_timestamp,
                born_host,
                store_timestamp,
                self.store_host,
                reconsume_times,
                prepared_transaction_offset,
                len(body),
            )
            + body
            + tail
        )

    def encode_v1_into(
        self,
        buf: mmap.mmap | bytearray,
        pos: int,
        total: int,
        crc: int,
        queue_id: int,
        flag: int,
        queue_offset: int,
        physical_offset: int,
        born_timestamp: int,
        born_host: bytes,
        store_timestamp: int,
        reconsume_times: int,
        body: bytes,
        tail: bytes,
    ) -> None:
        """:meth:`encode` of the common record written in place at ``buf[pos:pos + total]``.

        The common record: V1 magic, SYSFLAG 0 (plus this store host's IPv6 bit), an
        IPv4 ``born_host``, no prepared transaction, ``tail`` from :meth:`frame`. The
        put fast path writes straight into the mapping with it: no record bytes built.
        The caller holds the put lock and checked that ``total`` bytes fit.
        """
        self._into4(
            buf, pos, total, MAGIC_V1, crc, queue_id, flag, queue_offset, physical_offset,
            self.store_v6_flag, born_timestamp, born_host, store_timestamp, self.store_host,
            reconsume_times, 0, len(body),
        )  # fmt: skip
        b = pos + self._body4_pos
        e = b + len(body)
        buf[b:e] = body
        buf[e : pos + total] = tail

    def encode_v1_many_into(
        self,
        buf: mmap.mmap | bytearray,
        pos: int,
        base: int,
        store_timestamp: int,
        records: Sequence[tuple[Any, ...]],
        queue_offsets: Sequence[int],
    ) -> list[int]:
        """:meth:`encode_v1_into` of consecutive records from ``buf[pos]`` (a batch).

        ``records`` are ``CommitLog.append_v1`` record tuples (queue key, queue id,
        flag, born timestamp or None, born host, reconsume times, body, BODYCRC, tail,
        TOTALSIZE); ``base`` is the buffer's log offset. The batch's bytes are joined
        and copied into ``buf`` at once (one copy instead of three writes per record;
        a field that does not pack raises before any byte is written). Returns the
        records' physical offsets.
        """
        pack = self._pack4
        v6 = self.store_v6_flag
        host = self.store_host
        physs: list[int] = []
        parts: list[bytes] = []
        add = parts.append
        phys = base + pos
        for (_k, qid, flag, born_ts, born, reconsume, body, crc, tail, total), q in zip(
            records, queue_offsets, strict=True
        ):
            add(pack(
                total, MAGIC_V1, crc, qid, flag, q, phys, v6,
                store_timestamp if born_ts is None else born_ts, born, store_timestamp, host,
                reconsume, 0, len(body),
            ))  # fmt: skip
            add(body)
            add(tail)
            physs.append(phys)
            phys += total
        buf[pos : phys - base] = b"".join(parts)
        return physs
