"""The trusted decoder: the fields of a record already validated once, cheaply.

Contract: :func:`unpack_trusted` re-checks only what is free (V1 magic, TOTALSIZE,
lengths adding up) and returns None, never a wrong message and never an exception,
for anything else; the caller then falls back to :func:`mqstore.commitlog._decode.scan`.
The byte layout is :mod:`mqstore.commitlog._layout`'s. Import these names from
:mod:`mqstore.commitlog.format`.
"""

from __future__ import annotations

import struct
from typing import Final

from mqstore.commitlog._layout import (
    _HEADERS,
    BORNHOST_V6_FLAG,
    IPV4_HOST_LEN,
    MAGIC_V1,
    STOREHOST_V6_FLAG,
)

_TRUSTED: Final = _HEADERS[(IPV4_HOST_LEN, IPV4_HOST_LEN)]
_TRUSTED_BODY_POS: Final = _TRUSTED.size
_TRUSTED_SLOW_FLAGS: Final = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG

MESSAGE_FIELDS: Final = (
    "topic", "queue_id", "queue_offset", "physical_offset", "size", "body", "sys_flag",
    "flag", "born_timestamp", "store_timestamp", "reconsume_times",
    "prepared_transaction_offset", "properties_string", "body_crc", "born_host_raw",
    "store_host_raw",
)  # fmt: skip
"""The order of :func:`unpack_trusted`'s tuple (``StoredMessage``'s field order)."""

MessageFields = tuple[
    str, int, int, int, int, bytes, int, int, int, int, int, int, str, int, bytes, bytes
]


def unpack_trusted(rec: bytes, queue_offset: int | None = None) -> MessageFields | None:
    """The fields of a record the dispatcher already validated, in one header unpack.

    The decoded pull's fast path (cheaper than :func:`scan` + building a
    message): a record reached through a consume-queue unit was fully validated
    (magic, lengths, UTF-8) when it was dispatched, so this skips re-validation
    and the CRC. It still checks what is free to check -- V1 magic, TOTALSIZE ==
    ``len(rec)``, and that the body/topic/properties lengths add up to it -- so a
    unit pointing at the wrong bytes gives None, never a wrong message. None also
    means "not the common shape" (V2 magic, an IPv6 host): the caller then runs
    :func:`scan`, which has the final word on validity.

    ``rec`` is exactly one record's bytes (the unit's size). The tuple is in
    :data:`MESSAGE_FIELDS` order, ``queue_offset`` as given (None: the record's), the
    body as stored (compressed if SYSFLAG says so). Never raises for bad bytes.
    """
    try:
        (total, magic, crc, qid, flag, qoff, phys, sys_flag, born_ts, born_raw, store_ts,
         store_raw, reconsume, prepared, body_len) = _TRUSTED.unpack_from(rec)  # fmt: skip
        if magic != MAGIC_V1 or sys_flag & _TRUSTED_SLOW_FLAGS or total != len(rec):
            return None
        p = _TRUSTED_BODY_POS + body_len
        t_len = rec[p]
        t_end = p + 1 + t_len
        p_hi = rec[t_end]  # signed lengths: a set top bit is negative, i.e. corrupt
        if body_len < 0 or t_len > 127 or p_hi > 127:
            return None
        if t_end + 2 + (p_hi << 8 | rec[t_end + 1]) != total:
            return None
        return (
            rec[p + 1 : t_end].decode(),
            qid,
            qoff if queue_offset is None else queue_offset,
            phys,
            total,
            rec[_TRUSTED_BODY_POS:p],
            sys_flag,
            flag,
            born_ts,
            store_ts,
            reconsume,
            prepared,
            rec[t_end + 2 :].decode(),
            crc,
            born_raw,
            store_raw,
        )
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
