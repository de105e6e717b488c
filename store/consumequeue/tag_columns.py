"""The TAGS property of a batch of records at once (a columnar decode).

:func:`tags_column` answers, for each properties string of a batch of records in log
order, what :func:`mqstore.message.tags_of` answers, with one slice per record instead
of a parse. Records written by one producer put their properties in one order, so the
``TAGS\\x01`` mark sits at the same distance from the start of each record's properties:

1. the distance is read from one record (``str.find``) and checked at once for every
   record (numpy: the mark's five bytes, and a ``\\x02`` or the start before it); the
   records it does not fit try the distance of the first of them, a few times;
2. each value's end (the next ``\\x02`` or the end of the properties) is found in a
   small window after it (numpy);
3. the batch's span of the log is decoded once (Latin-1, so byte and character
   positions agree) and each value sliced out of it; values that are not all ASCII are
   decoded again as UTF-8.

A mark found at the expected place is the answer only if it is the record's only one
(RocketMQ's parse keeps the last of repeated names): the marks in the whole span are
counted once, and unless every one of them is accounted for (one per record answered
here, and those of the records parsed one by one) the batch is refused. Records the
distances do not fit (another order, an empty value, a value longer than the window)
are answered by ``tags_of`` itself, so every answer is ``tags_of``'s.

A span much larger than the records (a queue's records interleaved with many others)
is refused (None): the caller then parses record by record.
"""

from __future__ import annotations

import mmap

import numpy as np
from numpy.typing import NDArray

from mqstore.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, PROPERTY_TAGS, tags_of

_MARK = PROPERTY_TAGS + NAME_VALUE_SEPARATOR
_MARK_B = _MARK.encode()
_NAME_U32 = int.from_bytes(_MARK_B[:4], "little")
_EQ = ord(NAME_VALUE_SEPARATOR)
_SEP = ord(PROPERTY_SEPARATOR)
MAX_SHAPES = 8
"""Shapes (mark distance, value length) tried before the rest is parsed one by one."""
MAX_SPAN_FACTOR = 8
"""The span may be at most this many times the properties' bytes (plus 64 KiB)."""


def tags_column(
    buf: bytes | mmap.mmap, starts: NDArray[np.int64], ends: NDArray[np.int64]
) -> list[str | None] | None:
    """Each record's TAGS, record ``i``'s properties being ``buf[starts[i]:ends[i]]``
    (UTF-8 as stored): ``tags_of`` of each decoded string; None when the ranges are not
    in increasing order, their span is too wide (:data:`MAX_SPAN_FACTOR`) or the span
    holds a mark no record accounts for (module docstring).

    Raises:
        IndexError: a range lies outside ``buf``.
        UnicodeDecodeError: a properties string the answer needs is not UTF-8.
    """
    n = len(starts)
    if n == 0:
        return []
    lo, hi = int(starts[0]), int(ends[-1])
    lens = ends - starts
    if (lens < 0).any() or (n > 1 and (starts[1:] < ends[:-1]).any()):
        return None
    if hi - lo > MAX_SPAN_FACTOR * int(lens.sum()) + 65536:
        return None
    if hi > len(buf):
        raise IndexError("properties range outside the buffer")
    raw = buf[lo:hi]
    marks = raw.count(_MARK_B)
    if not marks:
        return [None] * n
    text = raw.decode("latin-1")
    u8 = np.frombuffer(raw, np.uint8)
    u32 = np.ndarray((len(raw) - 3,), "<u4", raw, 0, (1,))  # the 4 bytes at each position
    s_all, e_all = starts - lo, ends - lo
    todo = np.arange(n, dtype=np.int64)
    rows: list[NDArray[np.int64]] = []
    value_at: list[NDArray[np.int64]] = []
    widths: list[int] = []
    hard: list[int] = []
    for _ in range(MAX_SHAPES):
        if not len(todo):
            break
        i = int(todo[0])
        s0, e0 = int(s_all[i]), int(e_all[i])
        at = text.find(_MARK, s0, e0)
        end = text.find(PROPERTY_SEPARATOR, at + len(_MARK), e0) if at >= 0 else -1
        width = (e0 if end < 0 else end) - at - len(_MARK)
        if at < 0 or width <= 0 or (at > s0 and text[at - 1] != PROPERTY_SEPARATOR):
            hard.append(i)
            todo = todo[1:]
            continue
        s, e = s_all[todo], e_all[todo]
        mark = s + (at - s0)
        v = mark + len(_MARK)
        ok = v + width <= e
        top = len(raw) - 1
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
    done: list[int] = []
    a: list[int] = []
    b: list[int] = []
    if rows:
        done = np.concatenate(rows).tolist()
        starts_v = np.concatenate(value_at)
        a = starts_v.tolist()
        b = (starts_v + np.repeat(widths, [len(r) for r in rows])).tolist()
    values = [text[x:y] for x, y in zip(a, b, strict=True)]
    joined = "".join(values)
    if PROPERTY_SEPARATOR in joined:  # a value ended before its shape's width: parse it alone
        cut = [k for k, value in enumerate(values) if PROPERTY_SEPARATOR in value]
        hard += [done[k] for k in cut]
        kept = sorted(set(range(len(values))) - set(cut))
        done, a, b = [done[k] for k in kept], [a[k] for k in kept], [b[k] for k in kept]
        values = [values[k] for k in kept]
        joined = "".join(values)
    hard_text = [text[int(s_all[j]) : int(e_all[j])] for j in hard]
    if marks != len(a) + sum(t.count(_MARK) for t in hard_text):
        return None  # a mark outside the places read: a repeated TAGS, or one in a body
    if not joined.isascii():
        values = [raw[x:y].decode() for x, y in zip(a, b, strict=True)]
    if len(rows) == 1 and len(values) == n:  # all of one shape: the common batch
        return values  # type: ignore[return-value]
    out: list[str | None] = [None] * n
    for j, value in zip(done, values, strict=True):
        out[j] = value
    for j, t in zip(hard, hard_text, strict=True):
        out[j] = tags_of(t.encode("latin-1").decode())
    return out


__all__ = ["tags_column"]
