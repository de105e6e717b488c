"""A batch read of one queue that decodes only what the caller uses: bodies, tags on request.

``get_message`` decodes every record into a :class:`~mqstore.records.StoredMessage`
(17 fields) and keeps a pull's transfer limits (32 messages while "in memory"). An
embedded consumer that reads bodies in order pays for neither here: the queue's units
are read as one array, the records' SYSFLAG and body length gathered from the mapped
CommitLog in one numpy operation, and each body sliced out of the mapping (one copy,
no other field decoded). Tags, when asked for, are parsed from each record's properties.

:func:`read_fast` takes only the common shape and returns None for anything else (the
caller then reads through ``get_message``): the units of one consume-queue file, no
blank unit, IPv4 hosts and uncompressed bodies; the batch ends at the first record
outside the CommitLog segment of its first record (or past its write position).
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from mqstore.commitlog import _layout
from mqstore.commitlog import format as fmt
from mqstore.commitlog.segments import Segments
from mqstore.consumequeue.format import BLANK_SIZE, UNIT_SIZE
from mqstore.consumequeue.queue import ConsumeQueue
from mqstore.message import tags_of
from mqstore.status import GetStatus

_UNITS = np.dtype([("phys", ">i8"), ("size", ">i4"), ("tags", ">i8")])
_BODY_LEN_POS = _layout.header_length(fmt.IPV4_HOST_LEN, fmt.IPV4_HOST_LEN) - 4
"""84: where BODY LENGTH sits in a record with IPv4 hosts (the body follows it)."""
_GATHER = np.array(
    [
        *range(fmt.SYSFLAG_POS, fmt.SYSFLAG_POS + 4),
        *range(_BODY_LEN_POS, _BODY_LEN_POS + 4),
        *range(fmt.MAGIC_POS, fmt.MAGIC_POS + 4),
    ],
    np.int64,
)
"""The bytes gathered per record: SYSFLAG, BODY LENGTH, MAGICCODE."""
_V1 = fmt.MAGIC_V1 & 0xFFFFFFFF
_SLOW_FLAGS = fmt.COMPRESSED_FLAG | fmt.BORNHOST_V6_FLAG | fmt.STOREHOST_V6_FLAG
_MAGIC_V1 = fmt.MAGIC_V1.to_bytes(4, "big", signed=True)


@dataclass(frozen=True, slots=True)
class MessageBatch:
    """What :meth:`MessageStore.read_batch` returns: the statuses and offsets of a
    ``get_message`` (same meanings), and per message its queue offset and body, and its
    tags when asked for (else ``tags`` is None)."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    queue_offsets: list[int] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    tags: list[str | None] | None = None

    def __len__(self) -> int:
        return len(self.bodies)


def read_fast(
    cq: ConsumeQueue, log: Segments, offset: int, max_count: int, *, with_tags: bool
) -> MessageBatch | None:
    """Up to ``max_count`` messages of ``cq`` from ``offset`` (within the queue's
    bounds), or None when they are not all of the common shape (module docstring)."""
    low, high = cq.min_offset, cq.max_offset
    buf = cq.units_from(offset)
    if buf is None:
        return None
    n = min(max_count, high - offset, len(buf) // UNIT_SIZE)
    if n <= 0:
        return None
    units = np.frombuffer(buf, _UNITS, n)
    phys = units["phys"].astype(np.int64)
    size = units["size"].astype(np.int64)
    del units
    if (size == BLANK_SIZE).any():
        return None
    mf = log.find(int(phys[0]))
    mm = getattr(mf, "mapping", None)
    if mf is None or mm is None:
        return None
    rel = phys - mf.file_from_offset
    outside = (rel < 0) | (rel + size > mf.wrote_position)
    if outside.any():  # the batch ends where its records leave this segment
        n = int(np.argmax(outside))
        if n == 0:
            return None
        rel = rel[:n]
    try:
        head = np.frombuffer(mm, np.uint8)[rel[:, None] + _GATHER]
    except (ValueError, BufferError):  # unmapped meanwhile
        return None
    words = head.view(">u4").astype(np.int64)
    if (words[:, 0] & _SLOW_FLAGS).any():
        return None
    starts = rel + (_BODY_LEN_POS + 4)
    ends = starts + words[:, 1]
    a, b = starts.tolist(), ends.tolist()
    try:
        bodies = [mm[s:e] for s, e in zip(a, b, strict=True)]
        tags = None
        if with_tags:
            tags = _tags_v1(mm, ends) if (words[:, 2] == _V1).all() else None
            if tags is None:
                tags = _tags(mm, rel.tolist(), b)
    except ValueError:  # the segment was closed under us
        return None
    return MessageBatch(
        GetStatus.FOUND, offset + n, low, high, list(range(offset, offset + n)), bodies, tags
    )


def _tags_v1(mm: mmap.mmap, body_ends: NDArray[np.int64]) -> list[str | None] | None:
    """Each V1 record's TAGS property: the topic and properties lengths gathered for all
    records at once, then each properties string sliced and parsed; None if unmapped."""
    try:
        u8 = np.frombuffer(mm, np.uint8)
        props = body_ends + 1 + u8[body_ends].astype(np.int64)  # V1: one-byte topic length
        lens = (u8[props].astype(np.int64) << 8) | u8[props + 1]
        del u8
    except (ValueError, BufferError):
        return None
    p, q = (props + 2).tolist(), (props + 2 + lens).tolist()
    return [tags_of(mm[x:y].decode()) for x, y in zip(p, q, strict=True)]


def _tags(mm: mmap.mmap, starts: list[int], body_ends: list[int]) -> list[str | None]:
    """Each record's TAGS property: the properties after the topic, parsed."""
    view = memoryview(mm)
    try:
        out: list[str | None] = []
        for s, e in zip(starts, body_ends, strict=True):
            width = 1 if view[s + 4 : s + 8] == _MAGIC_V1 else 2
            p = e + width + int.from_bytes(view[e : e + width], "big")
            n = int.from_bytes(view[p : p + 2], "big")
            out.append(tags_of(str(view[p + 2 : p + 2 + n], "utf-8")))
        return out
    finally:
        view.release()
