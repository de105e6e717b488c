"""Text fields of records in bulk: topic ids, tag codes and index key hashes with numpy.

The helper of :mod:`mqstore.commitlog.bulk` for the variable-length tail of a record:
the topic and the properties string. It works on spans ``(start, length)`` of a byte
array and applies the exact rules of the per-record code it stands in for:

* properties are parsed with ``string_to_properties``'s rules (split on ``\\x02``;
  a segment shorter than 3 is ignored; the first ``\\x01`` must leave a non-empty name
  and value; a later duplicate wins), then TAGS, KEYS (split on spaces, empty tokens
  dropped) and UNIQ_KEY are taken from it;
* ``String.hashCode`` of ASCII text is ``sum(c_i * 31**(n-1-i)) mod 2**32``: one
  multiply by a table of powers and one segmented sum (``np.add.reduceat``) per span,
  in uint32 arithmetic, which wraps exactly like Java's int;
* the index key of a record is ``topic#key``, so its hash is
  ``hash(topic#) * 31**len(key) + hash(key)`` (mod 2**32): the topic's prefix is
  hashed once per distinct topic, never per record.

Only ASCII text is handled here (UTF-16 code units and UTF-8 bytes then agree, and
ASCII is valid UTF-8): the caller sends records with any other byte through the exact
codec. Contract: pure functions over arrays, no I/O, nothing kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from mqstore.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    java_string_hash,
)

I64 = NDArray[np.int64]
U32 = NDArray[np.uint32]
U8 = NDArray[np.uint8]

_POW_LEN: Final = 1 << 16
_POW31: Final = np.cumprod(
    np.r_[np.uint32(1), np.full(_POW_LEN - 1, 31, np.uint32)], dtype=np.uint32
)
"""31**k mod 2**32 for k < 65536 (a properties string holds at most 32767 bytes)."""
_PAD_MAX: Final = 64
"""Spans up to this long are hashed as rows of a matrix (:func:`_hash_padded`)."""
_SEP: Final = ord(PROPERTY_SEPARATOR)
_NV: Final = ord(NAME_VALUE_SEPARATOR)
_SPACE: Final = ord(" ")
_MIN_SEGMENT: Final = 3
_KEY_BYTES: Final = 8
"""Names up to 8 bytes (TAGS, KEYS, UNIQ_KEY) are compared as one big-endian uint64."""
KEY_BYTES: Final = _KEY_BYTES
"""Names up to this long are identified exactly by ``Properties.name_key``."""
_NAME_MASKS: Final = np.array(
    [((1 << 64) - 1) ^ ((1 << (8 * (_KEY_BYTES - n))) - 1) for n in range(_KEY_BYTES + 1)],
    np.uint64,
)
"""Big-endian uint64 masks keeping a name's first n bytes (n = 0..8)."""


def flat_index(starts: I64, lens: I64) -> tuple[I64, I64]:
    """Positions of every byte of the spans, concatenated, and where each span begins
    in that concatenation (one cumulative sum of steps: 1 inside a span, a jump
    between spans)."""
    offs = np.cumsum(lens) - lens
    nz = lens > 0
    s, n, o = starts[nz], lens[nz], offs[nz]
    total = int(n.sum())
    step = np.ones(total, np.int64)
    if total:
        step[o[1:]] = s[1:] - (s[:-1] + n[:-1]) + 1
        step[0] = s[0]
    pos: I64 = np.cumsum(step)
    return pos, offs


_JOIN_MIN_MEAN: Final = 48
"""Mean span length from which :func:`gather` copies whole spans instead of indexing bytes."""
_ROWS_SLACK: Final = 2
""":func:`gather` copies spans as fixed-width rows while the rows hold at most this many
times the spans' bytes (similar lengths); very unequal spans are joined one by one."""


def _rows_at(u8: U8, starts: I64, width: int) -> U8:
    """``u8[start:start + width]`` of every start as the rows of an (n, width) matrix,
    in one gather of ``width``-byte items (a strided view whose items overlap: one
    memcpy per row, no index per byte). Requires ``0 <= start <= u8.size - width``."""
    items = np.ndarray((u8.size - width + 1,), np.dtype((np.void, width)), buffer=u8, strides=(1,))
    out: U8 = items[starts].view(np.uint8).reshape(-1, width)
    return out


def gather(src: Any, starts: I64, lens: I64) -> tuple[U8, I64]:
    """The spans ``src[start:start+len]`` concatenated, and where each begins in that
    concatenation. Short spans (topics, values) are read with one index per byte
    (:func:`flat_index`), cheaper below ~48 bytes a span; long ones (a properties
    string) are copied as fixed-width rows (:func:`_rows_at`) and the span bytes kept,
    or, when their lengths differ widely, joined as memoryview slices (one copy each).
    Spans all of one length (a topic, UNIQ_KEY values) are the rows themselves."""
    if lens.size and int(lens[0]) > 0 and bool((lens == lens[0]).all()):
        width = int(lens[0])
        u8 = np.frombuffer(src, np.uint8)
        if int(starts.min()) >= 0 and int(starts.max()) <= u8.size - width:
            return _rows_at(u8, starts, width).reshape(-1), np.arange(lens.size) * width
    if lens.size == 0 or int(lens.sum()) < _JOIN_MIN_MEAN * lens.size:
        at, offs = flat_index(starts, lens)
        flat: U8 = np.frombuffer(src, np.uint8)[at] if at.size else np.zeros(0, np.uint8)
        return flat, offs
    offs = np.cumsum(lens) - lens
    width = int(lens.max())
    u8 = np.frombuffer(src, np.uint8)
    if width * lens.size <= _ROWS_SLACK * int(lens.sum()) and width <= u8.size:
        row = np.minimum(starts, u8.size - width)  # a span near the end: its row ends there
        shift = starts - row
        cols = np.arange(width)
        if int(shift.max()) == 0:  # row n of the table keeps a row's first n bytes
            keep = (cols < np.arange(width + 1)[:, None])[lens]
        else:
            keep = (cols >= shift[:, None]) & (cols < (shift + lens)[:, None])
        rows_flat: U8 = _rows_at(u8, row, width)[keep]
        return rows_flat, offs
    with memoryview(src) as view:
        data = b"".join(
            [view[a : a + n] for a, n in zip(starts.tolist(), lens.tolist(), strict=True)]
        )
    return np.frombuffer(data, np.uint8), offs


def first_words(flat: U8, starts: I64, lens: I64) -> NDArray[np.uint64]:
    """The first ``min(len, 8)`` bytes of each span as a big-endian uint64, the bytes
    after them zero (a span of at most 8 bytes is then its word and its length)."""
    out: NDArray[np.uint64] = _words8(flat, starts) & _NAME_MASKS[np.minimum(lens, _KEY_BYTES)]
    return out


def merge_sorted(a: I64, b: I64) -> I64:
    """Two sorted arrays as one sorted array (``b``'s values first among equals)."""
    return _merge_at(a, b)[0]


def _merge_at(a: I64, b: I64) -> tuple[I64, I64]:
    """:func:`merge_sorted` and where each value of ``b`` went in the result."""
    at: I64 = np.searchsorted(a, b, side="left") + np.arange(b.size)
    out = np.empty(a.size + b.size, np.int64)
    rest = np.ones(out.size, np.bool_)
    rest[at] = False
    out[at] = b
    out[rest] = a
    return out, at


def span_count(mask: NDArray[np.bool_], offs: I64, lens: I64) -> I64:
    """How many true values of the flat ``mask`` fall in each span."""
    c = np.r_[0, np.cumsum(mask, dtype=np.int64)]
    out: I64 = c[offs + lens] - c[offs]
    return out


def java_hash(src: U8, starts: I64, lens: I64) -> U32:
    """``String.hashCode`` (as uint32) of each ASCII span ``src[start:start+len]``."""
    if lens.size == 0:
        return np.zeros(0, np.uint32)
    width = int(lens.max())
    if width <= _PAD_MAX:
        if int(lens.min()) == width:
            return _hash_rows(src, starts, width)
        sizes = np.flatnonzero(np.bincount(lens))
        if sizes.size <= _LENGTH_GROUPS:
            out = np.zeros(lens.size, np.uint32)
            for w in sizes.tolist():
                if w:
                    at = np.flatnonzero(lens == w)
                    out[at] = _hash_rows(src, starts[at], w)
            return out
        return _hash_padded(src, starts, lens, width)
    out = np.zeros(starts.size, np.uint32)
    nz = lens > 0
    s, n = starts[nz], lens[nz]
    pos, offs = flat_index(s, n)
    weight = _POW31[np.repeat(s + n - 1, n) - pos]
    out[nz] = np.add.reduceat(src[pos].astype(np.uint32) * weight, offs, dtype=np.uint32)
    return out


_LENGTH_GROUPS: Final = 4
"""Spans of at most this many distinct lengths are hashed one length at a time, as
unmasked rows (:func:`_hash_rows`); more go through the masked matrix."""


def _hash_rows(src: U8, starts: I64, width: int) -> U32:
    """:func:`java_hash` of spans all ``width`` bytes long: the spans are the rows of a
    matrix (no mask), hashed by Horner's rule column by column."""
    if width == 0:
        return np.zeros(starts.size, np.uint32)
    if src.flags.c_contiguous and int(starts.min()) >= 0 and int(starts.max()) <= src.size - width:
        grid = _rows_at(src, starts, width)
    else:
        grid = src[starts[:, None] + np.arange(width)]
    return _horner(grid)


def _horner(grid: U8) -> U32:
    """``h = 31 * h + c`` over the columns of ``grid`` (uint32: wraps like Java's int)."""
    by_col = np.ascontiguousarray(grid.T)
    h = np.zeros(grid.shape[0], np.uint32)
    m = np.uint32(31)
    for col in by_col:
        h *= m
        h += col
    return h


def _hash_padded(src: U8, starts: I64, lens: I64, width: int) -> U32:
    """:func:`java_hash` of spans up to ``width`` bytes, right-aligned in a matrix
    (rows gathered from ``src``, behind ``width`` zero bytes when a span ends that close
    to its front; the bytes before a span zeroed): leading zeros add nothing, so
    Horner's rule column by column hashes every row."""
    if width == 0:
        return np.zeros(starts.size, np.uint32)
    ends = starts + lens
    if src.flags.c_contiguous and int(ends.min()) >= width:
        grid = _rows_at(src, ends - width, width)  # every row inside src: no padded copy
    else:
        padded = np.zeros(src.size + width, np.uint8)
        padded[width:] = src
        grid = _rows_at(padded, ends, width)
    cols = np.arange(width)
    keep = np.where(cols >= width - np.arange(width + 1)[:, None], 0xFF, 0).astype(np.uint8)
    grid &= keep[lens]  # row n of ``keep``: the last n bytes kept, the others zeroed
    return _horner(grid)


def signed32(h: U32) -> I64:
    """uint32 hashes as Java ints (sign-extended into int64)."""
    return h.astype(np.int32).astype(np.int64)


def index_hash(h: U32) -> NDArray[np.int32]:
    """``IndexFile.indexKeyHashMethod``: abs of the int, MIN_VALUE mapped to 0 (numpy's
    int32 abs leaves MIN_VALUE as it is, like Java's ``Math.abs``)."""
    out: NDArray[np.int32] = np.abs(h.view(np.int32))
    out[out == np.iinfo(np.int32).min] = 0
    return out


def _match_name(flat: U8, start: I64, length: I64, name: str) -> NDArray[np.bool_]:
    """Which spans of ``flat`` hold exactly ``name`` (ASCII)."""
    want = np.frombuffer(name.encode(), np.uint8)
    hit: NDArray[np.bool_] = length == want.size
    if not hit.any():
        return hit
    idx = np.flatnonzero(hit)
    grid = flat[start[idx][:, None] + np.arange(want.size)]
    hit[idx] = (grid == want).all(axis=1)
    return hit


@dataclass(frozen=True, slots=True)
class Segments:
    """The valid ``name\x01value`` segments of many properties strings, in order: where
    each name starts and how long it is, its value's span, its record, and its name
    key (the name's first 8 bytes as a big-endian uint64, 0 for a longer name)."""

    start: I64
    name_len: I64
    value_start: I64
    value_len: I64
    record: I64
    name_key: NDArray[np.uint64]


@dataclass(frozen=True, slots=True)
class _Closed:
    """Strings that each end in 0x02 (:func:`_closed`): every 0x02 ends a segment and
    none crosses a record. Per segment (valid or not): its start, its closing 0x02,
    the 8 bytes from its start (big-endian) and its record."""

    start: I64
    end: I64
    word: NDArray[np.uint64]
    record: I64


class Properties:
    """The named properties of many records' ASCII properties strings, parsed at once.

    ``flat`` is the strings concatenated, ``offs``/``lens`` each record's span in it.
    :meth:`value` gives, per record, the span of a property's value (length -1 when
    the record has none), with ``string_to_properties``'s rules; :attr:`segments`
    every valid segment (built on first use).

    Strings as RocketMQ writes them (each ending in 0x02, tiling ``flat``) are split
    on their 0x02 bytes alone, and a name of up to 8 bytes without separators is
    looked up where its bytes start a segment and a 0x01 follows them: the first
    0x01 of that segment, so the rest is its value. Other strings and names go
    through the segment table.
    """

    def __init__(self, flat: U8, offs: I64, lens: I64) -> None:
        self.flat = flat
        self.n = offs.size
        self._offs, self._lens = offs, lens
        self._segments: Segments | None = None
        ends = offs + lens
        self._closed: _Closed | None = None
        if _closed(flat, offs, ends):
            seps = np.flatnonzero(flat == _SEP)
            starts = np.empty(seps.size, np.int64)
            if seps.size:
                starts[0] = 0
                starts[1:] = seps[:-1] + 1
            filled = lens > 0
            closing = np.zeros(flat.size, np.bool_)
            closing[ends[filled] - 1] = True
            closes = closing[seps]
            rank: I64 = np.cumsum(closes) - closes  # records closed before: among non-empty ones
            record = rank if bool(filled.all()) else np.flatnonzero(filled)[rank]
            self._closed = _Closed(starts, seps, _words8(flat, starts), record)

    @property
    def segments(self) -> Segments:
        """Every valid segment (``string_to_properties``'s rules), in order."""
        if self._segments is None:
            self._segments = _segments(self.flat, self._offs, self._lens)
        return self._segments

    def value(self, name: str) -> tuple[I64, I64]:
        """Per record, (start in ``flat``, length) of the last valid ``name`` segment;
        length -1 when there is none."""
        record, v_start, v_len = self.found(name)
        start = np.zeros(self.n, np.int64)
        length = np.full(self.n, -1, np.int64)
        start[record] = v_start
        length[record] = v_len
        return start, length

    def found(self, name: str) -> tuple[I64, I64, I64]:
        """:meth:`value` of the records that have ``name`` only: (record, start,
        length), in record order, every length at least 1."""
        raw = name.encode()
        c = self._closed
        if c is not None and 0 < len(raw) <= _KEY_BYTES and not {_NV, _SEP} & set(raw):
            key = int.from_bytes(raw.ljust(_KEY_BYTES, b"\0"), "big")
            cand = np.flatnonzero((c.word & _NAME_MASKS[len(raw)]) == key)
            at, end = c.start[cand] + len(raw), c.end[cand]
            ok = end > at + 1  # a 0x01 may follow the name, and a value after it
            ok &= self.flat[np.minimum(at, end)] == _NV
            v_start = at[ok] + 1
            v_len = end[ok] - v_start
            record = c.record[cand[ok]]
        else:
            seg = self.segments
            if len(raw) <= _KEY_BYTES:
                key = int.from_bytes(raw.ljust(_KEY_BYTES, b"\0"), "big")
                hit = np.flatnonzero((seg.name_len == len(raw)) & (seg.name_key == key))
            else:
                hit = np.flatnonzero(_match_name(self.flat, seg.start, seg.name_len, name))
            v_start, v_len, record = seg.value_start[hit], seg.value_len[hit], seg.record[hit]
        if record.size > 1 and not bool((record[1:] != record[:-1]).all()):
            last = np.ones(record.size, np.bool_)  # segments are in order: a later duplicate wins
            last[:-1] = record[1:] != record[:-1]
            v_start, v_len, record = v_start[last], v_len[last], record[last]
        return record, v_start, v_len


def _words8(flat: U8, starts: I64) -> NDArray[np.uint64]:
    """The 8 bytes from each start as a big-endian uint64 (zeros past ``flat``'s end)."""
    last = int(starts.max()) if starts.size else 0
    if flat.flags.c_contiguous and last + _KEY_BYTES <= flat.size:
        rows = _rows_at(flat, starts, _KEY_BYTES)
    else:  # a start near the end of ``flat``: its row reads zeros past the end
        padded = np.zeros(flat.size + _KEY_BYTES, np.uint8)
        padded[: flat.size] = flat
        rows = _rows_at(padded, starts, _KEY_BYTES)
    out: NDArray[np.uint64] = rows.view(">u8").ravel()
    return out


def _segments(flat: U8, offs: I64, lens: I64) -> Segments:
    """The segment table of any spans: each span's start and end merged with the 0x02
    positions, the first separator byte after each segment's start found among all
    0x01 and 0x02 bytes."""
    # the separator bytes (0x01 and 0x02) in one pass: ``flat - 1`` wraps 0 to 255
    marks = np.flatnonzero((flat - np.uint8(_NV)) <= _SEP - _NV)
    is_sep = flat[marks] == _SEP
    sep_at = np.flatnonzero(is_sep)
    seps = marks[sep_at]
    starts, rec_at = _merge_at(seps + 1, offs)
    ends = merge_sorted(seps, offs + lens)
    seg_len = ends - starts
    # the first separator byte at or after each segment's start: the one after its
    # 0x02 (segments after a separator, in order), or found for a record's start;
    # the name ends there when it is inside the segment (then a 0x01: a 0x02 at or
    # after the start is the segment's end)
    nxt = np.empty(starts.size, np.int64)
    after_sep = np.ones(starts.size, np.bool_)
    after_sep[rec_at] = False
    nxt[after_sep] = sep_at + 1
    nxt[rec_at] = np.searchsorted(marks, offs)
    if marks.size:
        at = np.minimum(nxt, marks.size - 1)
        first = marks[at]
        ok = nxt < marks.size
    else:
        first, ok = starts, np.zeros(starts.size, np.bool_)
    ok &= (seg_len >= _MIN_SEGMENT) & (first > starts) & (first < ends - 1)
    start = starts[ok]
    name_len = first[ok] - start
    value_start = first[ok] + 1
    # a segment's record: how many records begin at or before it in ``starts``
    # (a record's own start sorts before an equal separator's; such a tie is an
    # empty segment, dropped by ``ok``)
    begins = np.zeros(starts.size, np.int64)
    begins[rec_at] = 1
    record = (np.cumsum(begins) - 1)[ok]
    name_key = np.where(name_len <= _KEY_BYTES, first_words(flat, start, name_len), 0)
    return Segments(start, name_len, value_start, ends[ok] - value_start, record, name_key)


def _closed(flat: U8, offs: I64, ends: I64) -> bool:
    """Whether the spans ``[offs, ends)`` tile ``flat`` in order and every non-empty
    one ends in a 0x02 byte."""
    if offs.size == 0 or int(offs[0]) != 0 or int(ends[-1]) != flat.size:
        return False
    if not bool((offs[1:] == ends[:-1]).all()):
        return False
    last = ends[ends > offs] - 1
    return bool((flat[last] == _SEP).all())


def _split_tokens(flat: U8, starts: I64, lens: I64) -> tuple[I64, I64, I64]:
    """Non-empty space-separated tokens of the spans: (span index, start, length).
    The spans must be in order and disjoint (values of successive records): the spaces
    are found in one pass over ``flat`` and kept where they fall in a span."""
    has = lens > 0
    idx = np.flatnonzero(has)
    s, n = starts[idx], lens[idx]
    spaces = np.flatnonzero(flat == _SPACE)
    if spaces.size:
        owner = np.searchsorted(s, spaces, side="right") - 1
        inside = owner >= 0
        inside[inside] = spaces[inside] < (s + n)[owner[inside]]
        spaces, owner = spaces[inside], owner[inside]
    if not spaces.size:
        return idx, s, n
    t_start = np.r_[s, spaces + 1]
    t_owner = np.r_[np.arange(idx.size), owner]
    order = np.argsort(t_start, kind="stable")
    t_start, t_owner = t_start[order], t_owner[order]
    t_end = merge_sorted(spaces, s + n)
    keep = t_end > t_start
    return idx[t_owner[keep]], t_start[keep], (t_end - t_start)[keep]


def index_keys(
    flat: U8, props: Properties, topic_id: I64, topics: list[str], want: NDArray[np.bool_]
) -> tuple[I64, NDArray[np.int32]]:
    """Index key hashes (UNIQ_KEY, then each KEYS token, as the dispatcher builds them)
    of the records where ``want``: (record, hash) pairs in record order."""
    prefix = np.array([java_string_hash(t + "#") & 0xFFFFFFFF for t in topics], np.uint32)
    u_rec, u_start, u_len = props.found(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    k_rec, k_start, k_len = props.found(PROPERTY_KEYS)
    if not bool(want.all()):
        u_ok, k_ok = want[u_rec], want[k_rec]
        u_rec, u_start, u_len = u_rec[u_ok], u_start[u_ok], u_len[u_ok]
        k_rec, k_start, k_len = k_rec[k_ok], k_start[k_ok], k_len[k_ok]
    t_of, t_start, t_len = _split_tokens(flat, k_start, k_len)
    rec = np.r_[u_rec, k_rec[t_of]]
    length = np.r_[u_len, t_len]
    # each kind hashed at its own width (UNIQ_KEYs are all 32 bytes, tokens shorter)
    keys = np.r_[java_hash(flat, u_start, u_len), java_hash(flat, t_start, t_len)]
    order = np.argsort(rec, kind="stable")  # UNIQ_KEY first, then the tokens in order
    rec, length, keys = rec[order], length[order], keys[order]
    h = prefix[topic_id[rec]] * _POW31[length] + keys
    return rec, index_hash(h)


def tags_codes(flat: U8, props: Properties) -> I64:
    """The TAGS hash of each record (``tags_code``: 0 without TAGS)."""
    record, start, length = props.found(PROPERTY_TAGS)
    out = np.zeros(props.n, np.int64)
    out[record] = signed32(java_hash(flat, start, length))
    return out


def value_strings(flat: U8, start: I64, length: I64, rows: Any) -> list[str | None]:
    """The values at ``rows`` as str (None where length is -1); for the few callers
    that need the text itself."""
    data = flat.tobytes()
    out: list[str | None] = []
    for i in np.asarray(rows, np.int64).tolist():
        n = int(length[i])
        out.append(None if n < 0 else data[int(start[i]) : int(start[i]) + n].decode("ascii"))
    return out
