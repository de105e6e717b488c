"""The TAGS property of a batch of records at once (a columnar decode).

:func:`tags_column` answers, for each properties string of a batch of records in log
order, what :func:`mqstore.message.tags_of` answers, without a parse per record.
Records written by one producer put their properties in one order, so the
``TAGS\x01`` mark sits at the same distance from the start of each record's properties:

1. the distance and the value's width are read from one record (``bytes.find``) and
   checked at once for every record (numpy: the mark's bytes, a ``\x02`` or the start
   before it, a ``\x02`` or the end after the value); the records they do not fit try
   the first of them's, a few times;
2. values of up to 15 bytes are told apart by their bytes read as two 64-bit words:
   grouped with numpy, each distinct value decoded once and each record given its
   group's string (longer values are sliced one by one).

A mark found at the expected place is the answer only if it is the record's only one
(RocketMQ's parse keeps the last of repeated names): the marks in the whole span are
counted once, and unless every one of them is accounted for (one per record answered
here, and those of the records parsed one by one) the batch is refused. Records the
shapes do not fit (another order, an empty value, a value holding the separator) are
answered by ``tags_of`` itself, so every answer is ``tags_of``'s.

When the batch's span of the log is much larger than its properties or holds more marks
than records (a queue's records among other queues'), or the records are not in log
order, the properties are copied together first (one slice per record) and the copy
searched instead.
"""

from __future__ import annotations

import mmap

import numpy as np
from numpy.typing import NDArray

from mqstore.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, PROPERTY_TAGS, tags_of

_MARK = PROPERTY_TAGS + NAME_VALUE_SEPARATOR
_MARK_B = _MARK.encode()
_SEP_B = PROPERTY_SEPARATOR.encode()
_SEP_S = PROPERTY_SEPARATOR
_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], np.uint64)
"""The low ``i`` bytes of a little-endian 64-bit word."""
_NAME_U32 = int.from_bytes(_MARK_B[:4], "little")
_EQ = ord(NAME_VALUE_SEPARATOR)
_SEP = ord(PROPERTY_SEPARATOR)
MAX_SHAPES = 8
"""Shapes (mark distance, value length) tried before the rest is parsed one by one."""
MAX_SPAN_FACTOR = 8
"""A span searched in place is at most this many times the properties' bytes (plus
64 KiB); a wider one is searched in a copy of the properties alone."""


def tags_column(
    buf: bytes | mmap.mmap,
    starts: NDArray[np.int64],
    ends: NDArray[np.int64],
    *,
    packed: bool = False,
) -> list[str | None] | None:
    """Each record's TAGS, record ``i``'s properties being ``buf[starts[i]:ends[i]]``
    (UTF-8 as stored): ``tags_of`` of each decoded string; None when the span searched
    holds a mark no record accounts for (module docstring). Ranges out of log order,
    spread over more than :data:`MAX_SPAN_FACTOR` times their bytes or with more marks
    in their span than records (other records between them) are copied together first
    and that copy searched (``packed``: ``buf`` is such a copy).

    Raises:
        IndexError: a range lies outside ``buf`` (or ends before it starts).
        UnicodeDecodeError: a properties string the answer needs is not UTF-8.
    """
    n = len(starts)
    if n == 0:
        return []
    lo, hi = int(starts[0]), int(ends[-1])
    lens = ends - starts
    if (lens < 0).any() or int(ends.max()) > len(buf):
        raise IndexError("properties range outside the buffer")
    disordered = n > 1 and bool((starts[1:] < ends[:-1]).any())
    if not packed and (disordered or hi - lo > MAX_SPAN_FACTOR * int(lens.sum()) + 65536):
        return _compacted(buf, starts, ends, lens)
    raw = buf[lo : hi + 16]  # with up to 16 bytes more: a value's last words are read whole
    marks = raw.count(_MARK_B, 0, hi - lo)
    if not marks:
        return [None] * n
    if marks > n and not packed:  # other records in the span (another queue's): search
        return _compacted(buf, starts, ends, lens)  # the properties alone
    u8 = np.frombuffer(raw, np.uint8)
    u32 = np.ndarray((len(raw) - 3,), "<u4", raw, 0, (1,))  # the 4 bytes at each position
    s_all, e_all = starts - lo, ends - lo
    todo = np.arange(n, dtype=np.int64)
    rows: list[NDArray[np.int64]] = []
    value_at: list[NDArray[np.int64]] = []
    widths: list[int] = []
    hard: list[int] = []
    top = len(raw) - 1
    for _ in range(MAX_SHAPES):
        if not len(todo):
            break
        i = int(todo[0])
        s0, e0 = int(s_all[i]), int(e_all[i])
        at = raw.find(_MARK_B, s0, e0)
        end = raw.find(_SEP_B, at + len(_MARK_B), e0) if at >= 0 else -1
        width = (e0 if end < 0 else end) - at - len(_MARK_B)
        if at < 0 or width <= 0 or (at > s0 and raw[at - 1] != _SEP):
            hard.append(i)
            todo = todo[1:]
            continue
        s, e = s_all[todo], e_all[todo]
        mark = s + (at - s0)
        v = mark + len(_MARK_B)
        ok = v + width <= e
        ok &= u32[np.minimum(mark, len(u32) - 1)] == _NAME_U32
        ok &= u8[np.minimum(mark + 4, top)] == _EQ
        if at > s0:  # the mark must start a property
            ok &= u8[np.minimum(mark - 1, top)] == _SEP
        ok &= (v + width == e) | (u8[np.minimum(v + width, top)] == _SEP)
        ok[0] = True  # the shape's own record, read above
        rows.append(todo[ok])
        value_at.append(v[ok])
        widths.append(width)
        todo = todo[~ok]
    hard += todo.tolist()
    if not rows:
        return _parsed(raw, s_all, e_all, hard, marks, n, [], [])
    done = np.concatenate(rows)
    at_v = np.concatenate(value_at)
    width_v = np.repeat(np.array(widths, np.int64), [len(r) for r in rows])
    values = _values(raw, at_v, width_v)
    if len(rows) == 1 and len(values) == n == marks and _SEP_S not in "".join(set(values)):
        return values  # type: ignore[return-value]  # one shape: the common batch
    return _parsed(raw, s_all, e_all, hard, marks, n, done.tolist(), values)


def _compacted(
    buf: bytes | mmap.mmap,
    starts: NDArray[np.int64],
    ends: NDArray[np.int64],
    lens: NDArray[np.int64],
) -> list[str | None] | None:
    """:func:`tags_column` over the properties alone, copied one after the other (and
    16 zero bytes): for records out of order or far apart (a queue's records among
    many other queues'), whose span would cost more to search than the copies."""
    raw = b"".join([buf[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)])
    packed_ends = np.cumsum(lens)
    return tags_column(raw + bytes(16), packed_ends - lens, packed_ends, packed=True)


def _values(raw: bytes, at: NDArray[np.int64], width: NDArray[np.int64]) -> list[str]:
    """The values ``raw[at[i]:at[i] + width[i]]`` decoded (UTF-8), each distinct one
    decoded once: values of up to 15 bytes are told apart by their bytes read as two
    64-bit words (and the width), grouped with numpy, and each row's string taken
    from its group; longer ones are sliced one by one."""
    m = len(at)
    if len(raw) < 16 or m < 16:
        return _sliced(raw, at, width)
    u64 = np.ndarray((len(raw) - 7,), "<u8", raw, 0, (1,))
    short = (width <= 15) & (at + 16 <= len(raw))
    if not short.all():
        return _sliced(raw, at, width)
    w0 = np.minimum(width, 8)
    w1 = width - w0
    k0 = u64[at] & _MASKS[w0]
    k1 = (u64[at + 8] & _MASKS[w1]) | (width.astype(np.uint64) << np.uint64(56))
    if (k0 == k0[0]).all() and (k1 == k1[0]).all():  # one tag for the whole batch
        return [raw[int(at[0]) : int(at[0] + width[0])].decode()] * m
    _, first, group = np.unique(k0, return_index=True, return_inverse=True)
    if (k1 != k1[first][group]).any():  # equal first words, different values
        return _sliced(raw, at, width)
    strings = _sliced(raw, at[first], width[first])
    return list(map(strings.__getitem__, group.tolist()))


def _sliced(raw: bytes, at: NDArray[np.int64], width: NDArray[np.int64]) -> list[str]:
    """Each value sliced and decoded on its own."""
    return [raw[a : a + w].decode() for a, w in zip(at.tolist(), width.tolist(), strict=True)]


def _parsed(
    raw: bytes,
    s_all: NDArray[np.int64],
    e_all: NDArray[np.int64],
    hard: list[int],
    marks: int,
    n: int,
    done: list[int],
    values: list[str],
) -> list[str | None] | None:
    """The answer of a batch some of whose records (``hard``) are parsed by ``tags_of``
    (those whose value read in columns holds a separator too), or None when the marks
    in the span are not all accounted for."""
    cut = [k for k, value in enumerate(values) if _SEP_S in value]
    if cut:  # a value ended before its shape's width: parse those records alone
        hard = hard + [done[k] for k in cut]
        kept = sorted(set(range(len(values))) - set(cut))
        done, values = [done[k] for k in kept], [values[k] for k in kept]
    texts = [raw[int(s_all[j]) : int(e_all[j])] for j in hard]
    if marks != len(values) + sum(t.count(_MARK_B) for t in texts):
        return None  # a mark outside the places read: a repeated TAGS, or one in a body
    out: list[str | None] = [None] * n
    for j, value in zip(done, values, strict=True):
        out[j] = value
    for j, t in zip(hard, texts, strict=True):
        out[j] = tags_of(t.decode())
    return out


__all__ = ["tags_column"]
