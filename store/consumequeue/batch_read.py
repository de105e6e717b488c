"""A batch read of one queue that decodes only what the caller uses: bodies, tags on request.

``get_message`` decodes every record into a :class:`~mqstore.records.StoredMessage`
(17 fields) and keeps a pull's transfer limits (32 messages while "in memory"). An
embedded consumer that reads bodies in order pays for neither here: the queue's units
are read as one array, the records' SYSFLAG and body length gathered from the mapped
CommitLog in one numpy operation, and each body sliced out of the mapping (one copy,
no other field decoded). Tags, when asked for, are read in columns
(``tag_columns.tags_column``), or parsed from each record's properties when it refuses.

:func:`read_fast` takes only the common shape and returns None for anything else (the
caller then reads through ``get_message``): the units of one consume-queue file, no
blank unit, IPv4 hosts and uncompressed bodies; the batch ends at the first record
outside the CommitLog segment of its first record (or past its write position).
"""

from __future__ import annotations

import bisect
import itertools
import mmap
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from mqstore.commitlog import _layout
from mqstore.commitlog import format as fmt
from mqstore.commitlog.segments import Segments
from mqstore.consumequeue.filter import Subscription
from mqstore.consumequeue.filter_bits import VerdictReader, phys_low32
from mqstore.consumequeue.format import BLANK_SIZE, UNIT_SIZE, UNITS_LOW_TAGS
from mqstore.consumequeue.match_list import MatchReader
from mqstore.consumequeue.queue import ConsumeQueue
from mqstore.consumequeue.tag_columns import tags_column
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
    records at once, then the tags read in columns (or, when that refuses the batch, each
    properties string sliced and parsed); None if unmapped."""
    try:
        u8 = np.frombuffer(mm, np.uint8)
        props = body_ends + 1 + u8[body_ends].astype(np.int64)  # V1: one-byte topic length
        lens = (u8[props].astype(np.int64) << 8) | u8[props + 1]
        del u8
    except (ValueError, BufferError):
        return None
    try:
        column = tags_column(mm, props + 2, props + 2 + lens)
    except IndexError:  # lengths running past the mapping: each record parsed below
        column = None
    if column is not None:
        return column
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


FILTER_CHUNK = 16_384
"""Units a filtered read examines at a time (it stops after the chunk that fills it)."""
VERDICT_CHUNK = 65_536
"""The same with verdicts: their test costs a few nanoseconds a unit, so a larger chunk
spreads the fixed cost of a chunk's steps over more matches."""


def read_filtered(
    cq: ConsumeQueue,
    log: Segments,
    offset: int,
    max_count: int,
    sub: Subscription,
    *,
    with_tags: bool,
    verdicts: VerdictReader | None = None,
    matches: MatchReader | None = None,
) -> MessageBatch | None:
    """Up to ``max_count`` messages of ``cq`` from ``offset`` that ``sub`` delivers (a tag
    or SQL92 subscription), or None when the units or records met are not all of the
    common shape (the caller then reads through ``get_message``).

    The units to the end of the offset's consume-queue file are examined in chunks of
    :data:`FILTER_CHUNK` (:data:`VERDICT_CHUNK` with verdicts), and only the candidates
    are decoded:

    00. with ``matches`` (the expression's match list, ``mqstore.consumequeue.match_list``),
       the stretches the list covers are read from match to match, the units between
       untouched; the steps below take the stretches it does not cover;
    0. with ``verdicts`` (the SQL92 expression's verdicts written at dispatch,
       ``mqstore.consumequeue.filter_bits``), a unit with a verdict is a match or not
       by it, undecoded but for the body; the steps below take the units without one;
    1. the tag-code test over a chunk's units at once (numpy), for a tag subscription
       or a SQL92 one with a TAGS bound;
    2. for a SQL92 expression with a substring bound (``SqlFilter.needles``) and no tag
       bound, one substring search of the chunk's span of the CommitLog per substring,
       each hit attributed to the record holding it; otherwise each candidate's own bytes
       are searched;
    3. each remaining candidate's properties sliced out, parsed and tested exactly (the
       exact TAGS test, or the expression), as ``get_message`` tests them.

    ``next_begin_offset`` is one past the last unit examined: past the last match when the
    batch is full, else the end of the units examined; NO_MATCHED_MESSAGE when none of
    them matched.
    """
    low, high = cq.min_offset, cq.max_offset
    buf = cq.units_from(offset)
    if buf is None:
        return None
    end = offset + min(high - offset, len(buf) // UNIT_SIZE)
    q = offset
    found: list[int] = []
    bodies: list[bytes] = []
    tags: list[str | None] = []
    width = FILTER_CHUNK if verdicts is None else VERDICT_CHUNK
    phys_low = phys_low32(buf, end - offset) if matches is not None else None
    while q < end and len(found) < max_count:
        upto = end
        if matches is not None and phys_low is not None:
            upto, hits = matches(q, end, phys_low[q - offset :], max_count - len(found))
            if hits is not None:  # covered: its matches only
                got = _take_matches(
                    log, buf, offset, q, upto, hits, max_count - len(found), sub, found,
                    bodies, tags if with_tags else None,
                )  # fmt: skip
                if got is None:
                    break
                q = got
                continue
        start = (q - offset) * UNIT_SIZE
        chunk = buf[start : start + min(width, upto - q) * UNIT_SIZE]
        got = _filter_chunk(
            log, chunk, q, max_count - len(found), sub, found, bodies,
            tags if with_tags else None, verdicts,
        )  # fmt: skip
        if got is None:  # not the common shape: return what is read, or let the caller
            break
        q = got
    if q == offset:
        return None
    status = GetStatus.FOUND if found else GetStatus.NO_MATCHED_MESSAGE
    return MessageBatch(status, q, low, high, found, bodies, tags if with_tags else None)


def _filter_chunk(
    log: Segments,
    chunk: memoryview,
    q: int,
    want: int,
    sub: Subscription,
    found: list[int],
    bodies: list[bytes],
    tags: list[str | None] | None,
    verdicts: VerdictReader | None = None,
) -> int | None:
    """Filter the units of ``chunk`` (queue offset ``q`` on), appending up to ``want``
    matches to ``found``, ``bodies`` and ``tags``; the queue offset after the last unit
    examined, or None when the chunk's first unit is not of the common shape (a unit
    later in the chunk that is not ends the chunk there)."""
    units = np.frombuffer(chunk, UNITS_LOW_TAGS)
    n = len(units)
    idx = sub.code_candidates(units["tags_low"])
    v = verdicts(q, phys_low32(chunk, n)) if verdicts is not None else None
    sure = None  # per unit of the chunk: a match by its verdict
    if v is not None:
        known, sure = v
        unknown = np.flatnonzero(~known) if idx is None else idx[~known[idx]]
        hits = np.flatnonzero(sure)
        idx = np.union1d(unknown, hits) if len(unknown) else hits
    elif idx is None:
        idx = np.arange(n)
    phys = units["phys"][idx].astype(np.int64)
    size = units["size"][idx].astype(np.int64)
    del units
    return _read_candidates(
        log, q, n, idx, phys, size, None if sure is None else sure[idx], want, sub, found,
        bodies, tags,
    )  # fmt: skip


def _take_matches(
    log: Segments,
    buf: memoryview,
    offset: int,
    q: int,
    upto: int,
    hits: NDArray[np.int64],
    want: int,
    sub: Subscription,
    found: list[int],
    bodies: list[bytes],
    tags: list[str | None] | None,
) -> int | None:
    """Read the matches ``hits`` (relative to ``q``) of the covered stretch
    ``[q, upto)`` of ``buf`` (the units from ``offset``): as :func:`_filter_chunk`."""
    units = np.frombuffer(buf, UNITS_LOW_TAGS, upto - offset)
    rows = hits + (q - offset)
    phys = units["phys"][rows].astype(np.int64)
    size = units["size"][rows].astype(np.int64)
    del units
    sure = np.ones(len(hits), bool)
    return _read_candidates(
        log, q, upto - q, hits, phys, size, sure, want, sub, found, bodies, tags
    )


def _read_candidates(
    log: Segments,
    q: int,
    n: int,
    idx: NDArray[np.int64],
    phys: NDArray[np.int64],
    size: NDArray[np.int64],
    sure: NDArray[np.bool_] | None,
    want: int,
    sub: Subscription,
    found: list[int],
    bodies: list[bytes],
    tags: list[str | None] | None,
) -> int | None:
    """Read the candidates ``idx`` (at ``phys``, ``size``) of the ``n`` units from queue
    offset ``q``; ``sure``: per candidate, a match by its verdict (None: none is). As
    :func:`_filter_chunk` returns."""
    if not len(idx):
        return q + n
    blank = size == BLANK_SIZE  # a blank candidate ends the chunk before it
    if blank.any():
        k = int(np.argmax(blank))
        n, idx, phys, size = int(idx[k]), idx[:k], phys[:k], size[:k]
        sure = None if sure is None else sure[:k]
        if not k:
            return q + n if n else None
    mf = log.find(int(phys[0]))
    mm = getattr(mf, "mapping", None)
    if mf is None or mm is None:
        return None
    rel = phys - mf.file_from_offset
    outside = (rel < 0) | (rel + size > mf.wrote_position)
    if outside.any():  # the chunk ends where its records leave this segment
        k = int(np.argmax(outside))
        n, idx, rel, size = int(idx[k]), idx[:k], rel[:k], size[:k]
        sure = None if sure is None else sure[:k]
        if not k:
            return q + n if n else None
    sql = sub.sql
    needles = sql.needles if sql is not None else None
    if sub.code_test is None and needles is not None:
        if sure is None:
            keep = needle_candidates(mm, rel, size, needles)
        else:  # the units without a verdict only
            keep = sure.copy()
            open_ = np.flatnonzero(~keep)
            if len(open_):
                keep[open_] = needle_candidates(mm, rel[open_], size[open_], needles)
            sure = sure[keep]
        idx, rel = idx[keep], rel[keep]
    if not len(idx):
        return q + n
    crel = rel
    try:
        head = np.frombuffer(mm, np.uint8)[crel[:, None] + _GATHER]
    except (ValueError, BufferError):  # unmapped meanwhile
        return None
    words = head.view(">u4").astype(np.int64)
    if (words[:, 0] & _SLOW_FLAGS).any() or (words[:, 2] != _V1).any():
        return None  # compressed, IPv6 or V2: get_message decodes those
    body_starts = crel + (_BODY_LEN_POS + 4)
    body_ends = body_starts + words[:, 1]
    if sure is not None and tags is None and sure.all():  # matches by their verdicts
        k = min(want, len(idx))
        starts, ends = body_starts[:k].tolist(), body_ends[:k].tolist()
        try:
            bodies.extend([mm[a:b] for a, b in zip(starts, ends, strict=True)])
        except ValueError:  # closed under us
            return None
        found.extend((idx[:k] + q).tolist())
        return q + int(idx[k - 1]) + 1 if k == want else q + n
    try:
        u8 = np.frombuffer(mm, np.uint8)
        props = body_ends + 1 + u8[body_ends].astype(np.int64)  # V1: one-byte topic length
        plen = (u8[props].astype(np.int64) << 8) | u8[props + 1]
        del u8
    except (ValueError, BufferError):
        return None
    matches_props = sub.matches_properties
    positions: list[int] = idx.tolist()
    rows = zip(
        positions, body_starts.tolist(), body_ends.tolist(), (props + 2).tolist(),
        (props + 2 + plen).tolist(),
        sure.tolist() if sure is not None else itertools.repeat(False), strict=False,
    )  # fmt: skip
    try:
        for i, bs, be, ps, pe, matched in rows:
            if matched:  # its verdict: the properties are read for the tags only
                if tags is not None:
                    tags.append(tags_of(mm[ps:pe].decode()))
            else:
                text = mm[ps:pe].decode()
                if not matches_props(text):
                    continue
                if tags is not None:
                    tags.append(tags_of(text))
            found.append(q + i)
            bodies.append(mm[bs:be])
            want -= 1
            if not want:  # full: the read goes on after this match
                return q + int(i) + 1
    except (ValueError, UnicodeDecodeError):  # closed under us, or not UTF-8
        return None
    return q + n


def needle_candidates(
    mm: mmap.mmap, rel: NDArray[np.int64], size: NDArray[np.int64], needles: tuple[bytes, ...]
) -> NDArray[np.bool_]:
    """The units whose record contains one of ``needles``: each is searched once over the
    span of the CommitLog from the first record to the end of the last (records of other
    queues in between included), each hit attributed to the record holding it whole."""
    n = len(rel)
    hit = np.zeros(n, bool)
    starts = rel.tolist()
    ends = (rel + size).tolist()
    if (np.diff(rel) <= 0).any():  # not in log order: record by record
        for i, (a, b) in enumerate(zip(starts, ends, strict=True)):
            hit[i] = any(mm.find(x, a, b) >= 0 for x in needles)
        return hit
    lo, hi = starts[0], ends[-1]
    for x in needles:
        pos = mm.find(x, lo, hi)
        while pos >= 0:
            i = bisect.bisect_right(starts, pos) - 1
            if i >= 0 and pos + len(x) <= ends[i]:
                hit[i] = True
                pos = mm.find(x, ends[i], hi)
            else:
                pos = mm.find(x, pos + 1, hi)
    return hit
