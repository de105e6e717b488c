"""The dispatch-field reader: the fields dispatching needs, record after record.

:func:`next_record` is the one step over a segment's records that the reput thread,
the index catch-up and the dispatcher process's parent (announcing arrivals) share:
given a position it returns the record's :data:`DispatchFields`, or the blank record
or damage found there, with the position after it, so every caller advances and
skips alike. A caller walks a run with ``while pos < end: item, pos = next_record(...)``.
It is a step function rather than a generator because the reput loop is the
store's hottest reader, and resuming a generator per record was a measurable part of it.

A record is first read by the trusted decode: one header unpack, which re-checks only
what is free (V1 magic, IPv4 hosts, TOTALSIZE inside the run, lengths adding up) and
declines everything else. A declined record goes to
:func:`mqstore.commitlog._decode.scan`, which has the final word on validity
(without the CRC: the writer computed it). The byte layout is
:mod:`mqstore.commitlog._layout`'s.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from mqstore.commitlog._decode import scan
from mqstore.commitlog._layout import _INT, MAGIC_V1
from mqstore.commitlog._results import Corrupt, EndOfSegment, RecordInfo
from mqstore.commitlog._trusted import _TRUSTED, _TRUSTED_BODY_POS, _TRUSTED_SLOW_FLAGS

DispatchFields = tuple[str, int, int, int, int, int, int, str]
"""What dispatching a record uses (its consume-queue unit, index keys and arrival), in
:data:`DISPATCH_FIELDS` order, which is ``Dispatcher.dispatch_one``'s parameters.

A plain tuple, read by unpacking into named locals or passed on as ``*fields``, never
indexed by number. Not a NamedTuple: building one per record, and passing it on with
``*``, cost the reput loop about a sixth of its time."""

DISPATCH_FIELDS: Final = (
    "topic", "queue_id", "queue_offset", "physical_offset", "size", "sys_flag",
    "store_timestamp", "properties",
)  # fmt: skip
"""The names of :data:`DispatchFields`, in order."""

FieldDispatch = Callable[[str, int, int, int, int, int, int, str], None]
"""What takes a record's :data:`DispatchFields` as its arguments, in that order:
``Dispatcher.dispatch_one``, and whatever the reput thread or recovery hands records
to in its place."""

Walked = DispatchFields | EndOfSegment | Corrupt
"""What :func:`next_record` finds at a position."""


def next_record(
    buf: bytes | bytearray | memoryview, pos: int, end: int, file_size: int
) -> tuple[Walked, int]:
    """What starts at ``buf[pos]`` (``pos < end``) in a segment of ``file_size`` bytes,
    and the position after it.

    A record gives its :data:`DispatchFields` and its end. A blank record gives
    :class:`EndOfSegment` and ``file_size``: the rest of the segment holds nothing.
    Damage gives :class:`Corrupt` and the position past it: its TOTALSIZE when that lies
    inside the run, else ``end``; a caller that must not read past damage stops there.
    Never raises for bad bytes; ValueError only for a released view.
    """
    # The trusted decode, inline (one call per record in the reput loop).
    total = _INT.unpack_from(buf, pos)[0] if pos + 4 <= end else 0
    if 0 < total <= end - pos:
        rec = bytes(buf[pos : pos + total])  # one copy: indexing bytes beats a view
        try:
            (_total, magic, _crc, qid, _flag, qoff, phys, sys_flag, _born_ts, _born, store_ts,
             _store, _reconsume, _prepared, body_len) = _TRUSTED.unpack_from(rec)  # fmt: skip
            if magic == MAGIC_V1 and not sys_flag & _TRUSTED_SLOW_FLAGS and body_len >= 0:
                p = _TRUSTED_BODY_POS + body_len  # the topic's length byte
                t_len = rec[p]
                t_end = p + 1 + t_len
                p_hi = rec[t_end]  # signed lengths: a set top bit is negative, i.e. corrupt
                if t_len <= 127 >= p_hi and t_end + 2 + (p_hi << 8 | rec[t_end + 1]) == total:
                    topic = rec[p + 1 : t_end].decode()
                    props = rec[t_end + 2 :].decode()
                    return (topic, qid, qoff, phys, total, sys_flag, store_ts, props), pos + total
        except (struct.error, IndexError, UnicodeDecodeError):
            pass  # not vouched for: the scan judges
    r = scan(buf, pos, end, check_crc=False)
    if type(r) is RecordInfo:
        fields = (r.topic, r.queue_id, r.queue_offset, r.physical_offset, r.size, r.sys_flag,
                  r.store_timestamp, r.properties_string)  # fmt: skip
        return fields, pos + r.size
    if isinstance(r, EndOfSegment):
        return r, file_size
    assert isinstance(r, Corrupt)
    left = end - pos
    return r, pos + (r.size if 0 < r.size <= left else left)


__all__ = ["DISPATCH_FIELDS", "DispatchFields", "FieldDispatch", "Walked", "next_record"]
