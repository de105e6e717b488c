"""Records in bulk: a byte range of a CommitLog segment as numpy columns.

What recovery, the Spark jobs and the log checker need from many records at once (position,
size, queue id and offset, physical offset, store time, topic id, tag code, index key
hashes, body CRC verdict) is computed with numpy over the mapped bytes instead of one
:func:`mqstore.commitlog.format.scan` call per record:

1. **walk**: the TOTALSIZE chain is followed from ``start`` (8 bytes per record, the only
   sequential step) while the header looks like a record (V1/V2 magic, a size that fits);
2. **validate**: every length check of ``scan`` (hosts, body, topic, properties against
   TOTALSIZE) is done on arrays; the scan ends at the first record that fails one;
3. **CRC**: one C call per body (:data:`crc32`: ISA-L's when the ``isal`` package is
   there, else ``zlib.crc32``; the call is the only per-record cost left);
4. **text**: topics become small integer ids, TAGS and index keys are hashed in bulk
   (:mod:`mqstore.commitlog._bulk_text`). A record whose topic or properties hold a
   non-ASCII byte goes through the exact codec (UTF-8 validation, UTF-16 hashing).

Contract: the result is exactly what calling ``scan(buf, pos, limit, check_crc=False)``
record after record from ``start`` gives, up to the first result that is not a
:class:`RecordInfo` (returned as :attr:`BulkScan.stop`, from the exact codec, so every
``Corrupt`` kind and detail is the codec's), plus, when ``check_crc``, each record's
BODYCRC verdict. The per-record codec stays the reference; ``tests/commitlog/test_bulk.py``
holds the two to the same answers on generated, damaged and real segments. Every byte
position comes from :mod:`mqstore.commitlog._layout` (its constants and header
``struct`` formats); nothing here restates the layout. No I/O; nothing kept referencing
the buffer after a call returns.
"""

from __future__ import annotations

import mmap
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from mqstore.commitlog import _bulk_text as text
from mqstore.commitlog import _layout as L
from mqstore.commitlog._decode import scan as exact_scan
from mqstore.commitlog._results import Corrupt, EndOfSegment, RecordInfo
from mqstore.index.format import key_hash
from mqstore.message import java_string_hash, keys_of, tags_code, uniq_key_of

try:
    from isal.isal_zlib import crc32 as _crc32
except ImportError:  # the engine's dependency; zlib serves where it cannot be installed
    _crc32 = zlib.crc32

I64 = NDArray[np.int64]
Buffer = bytes | bytearray | memoryview
"""What the scan reads (an mmap is read through a memoryview of it)."""
CHUNK_RECORDS: Final = 16_384
"""Records per call by default: a chunk's temporary arrays (about 100 bytes a record) stay
in the CPU's cache; larger chunks cost more per record, much smaller ones pay numpy's
per-call cost."""
crc32: Final[Callable[[Buffer], int]] = _crc32
"""CRC-32 of a body as ``zlib.crc32`` computes it (RocketMQ's BODYCRC polynomial, same
values): ISA-L's carry-less-multiply CRC when ``isal`` is installed, 2-4x zlib's per
1 KiB body on this project's machine, where the bodies' CRC is most of a bulk scan's
work after the TOTALSIZE walk."""
_HOST_COMBOS: Final = (
    (L.IPV4_HOST_LEN, L.IPV4_HOST_LEN), (L.IPV4_HOST_LEN, L.IPV6_HOST_LEN),
    (L.IPV6_HOST_LEN, L.IPV4_HOST_LEN), (L.IPV6_HOST_LEN, L.IPV6_HOST_LEN),
)  # fmt: skip
"""Index = 2 * (born host is IPv6) + (store host is IPv6)."""


def _field_offsets(s: struct.Struct) -> list[int]:
    """Byte offset of each field of a big-endian ``struct`` format."""
    out, at = [], 0
    for count, code in re.findall(r"(\d*)([a-zA-Z])", s.format[1:]):
        out.append(at)
        at += struct.calcsize(">" + (count or "") + code)
    return out


_OFFSETS: Final = np.array([_field_offsets(L._HEADERS[c]) for c in _HOST_COMBOS], np.int64)
_HEADER_SIZE: Final = np.array([L._HEADERS[c].size for c in _HOST_COMBOS], np.int64)
_PREFIX_CODES: Final = {"i": ">i4", "q": ">i8"}


def _header_dtype(s: struct.Struct) -> np.dtype[Any]:
    """A big-endian ``struct`` format as a numpy structured dtype (fields ``f0``.., byte
    strings as raw bytes)."""
    fields = re.findall(r"(\d*)([a-zA-Z])", s.format[1:])
    return np.dtype(
        [
            (f"f{i}", f"V{count}" if code == "s" else _PREFIX_CODES[code])
            for i, (count, code) in enumerate(fields)
        ]
    )


_PREFIX_DTYPE: Final = _header_dtype(L._PREFIX)
_PREFIX_NAMES: Final = dict(zip(_field_offsets(L._PREFIX), _PREFIX_DTYPE.names or (), strict=True))
"""Byte position -> field name in :data:`_PREFIX_DTYPE`."""
assert _PREFIX_DTYPE.itemsize == L.BORN_HOST_POS
_V4_DTYPE: Final = _header_dtype(L._HEADERS[_HOST_COMBOS[0]])
"""The whole header of a record with IPv4 hosts (it starts with the prefix's fields)."""
assert _V4_DTYPE.itemsize == L._HEADERS[_HOST_COMBOS[0]].size <= L.MIN_RECORD_SIZE
_STORE_TS: Final = 10
_BODY_LEN: Final = 14
"""Field numbers in the header formats (as ``_decode`` reads them)."""


@dataclass(frozen=True, slots=True)
class RecordArrays:
    """The valid records of a range, one array element per record, in log order.

    ``position``, ``body_pos`` and ``props_pos`` are positions in the scanned buffer.
    """

    position: I64
    size: I64
    version: I64
    crc_ok: NDArray[np.bool_]
    """The BODYCRC verdict; all true when the CRC was not checked."""
    queue_id: I64
    flag: I64
    queue_offset: I64
    physical_offset: I64
    sys_flag: I64
    born_timestamp: I64
    store_timestamp: I64
    body_pos: I64
    body_len: I64
    props_pos: I64
    props_len: I64
    topic_id: I64
    """Each record's topic, as an index into :attr:`topics`."""
    tags_code: I64
    """``tags_code(TAGS)``: 0 without tags, or from a scan asked for no tags."""
    torn: NDArray[np.bool_]
    """Properties ending in a zero byte (recovery's torn-tail rule)."""
    key_record: I64
    """Index keys (only when asked for): ``key_hash[i]`` belongs to record
    ``key_record[i]``, UNIQ_KEY first then each KEYS token, as the dispatcher indexes
    them."""
    key_hash: NDArray[np.int32]
    topics: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.position.size)

    def head(self, count: int) -> RecordArrays:
        """The first ``count`` records (their index keys with them)."""
        cols = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, col in cols.items():
            if isinstance(col, np.ndarray) and name not in ("key_record", "key_hash"):
                cols[name] = col[:count]
        keep = self.key_record < count
        cols["key_record"], cols["key_hash"] = self.key_record[keep], self.key_hash[keep]
        return RecordArrays(**cols)

    def topic_names(self) -> list[str]:
        """The topic of every record, as str."""
        return [self.topics[i] for i in self.topic_id.tolist()]


@dataclass(frozen=True, slots=True)
class BulkScan:
    """One call's result: the records of ``[start, end)`` and why the scan ended.

    ``stop`` is None when the walk reached the range's end or the record limit (go on
    at ``end``); otherwise it is the exact codec's (CRC not checked) verdict on the
    bytes at ``end``: an :class:`EndOfSegment` or a :class:`Corrupt`.
    """

    records: RecordArrays
    end: int
    stop: EndOfSegment | Corrupt | None


class HeaderField:
    """Field numbers of the header ``struct`` formats of :mod:`._layout`, for
    :func:`field_position` (the order ``_decode`` unpacks them in)."""

    BODY_CRC = 2
    BORN_HOST = 9
    STORE_HOST = 11
    RECONSUME_TIMES = 12
    PREPARED_TRANSACTION_OFFSET = 13


def field_position(records: RecordArrays, field: int) -> I64:
    """Where header field number ``field`` (see :class:`HeaderField`) of each record
    starts in the scanned buffer (hosts move with the IPv6 bits of SYSFLAG)."""
    combo = 2 * ((records.sys_flag & L.BORNHOST_V6_FLAG) != 0) + (
        (records.sys_flag & L.STOREHOST_V6_FLAG) != 0
    )
    out: I64 = records.position + _OFFSETS[combo, field]
    return out


def read_ints(buf: Buffer | mmap.mmap, positions: I64, width: int) -> I64:
    """Big-endian signed ints of ``width`` bytes (1, 2, 4 or 8) at ``positions``."""
    with memoryview(buf) as view:
        return _read_ints(view, positions, width)


def _read_ints(view: memoryview, positions: I64, width: int) -> I64:
    return _be(np.frombuffer(view, np.uint8), positions, width)


def walk(buf: Buffer, pos: int, end: int, limit: int, max_records: int) -> list[int]:
    """Positions of the records chained by TOTALSIZE from ``pos`` while their start is
    before ``end``, their header looks like a record's and they fit before ``limit``."""
    unpack = L._SIZE_MAGIC.unpack_from
    magics, smallest = frozenset((L.MAGIC_V1, L.MAGIC_V2)), L.MIN_RECORD_SIZE
    stop = min(end, limit - 7)
    out: list[int] = []
    add = out.append
    for _ in range(max_records):  # the count in C: no counter of our own per record
        if pos >= stop:
            break
        size, magic = unpack(buf, pos)
        if magic in magics and smallest <= size <= limit - pos:
            add(pos)
            pos += size
        else:
            break
    return out


def _be(u8: NDArray[np.uint8], pos: I64, width: int) -> I64:
    """Big-endian signed ints of ``width`` bytes at ``pos`` (clipped into the buffer:
    a record whose lengths are bad may point anywhere; its values are then unused)."""
    p = np.clip(pos, 0, u8.size - width)
    grid = text._rows_at(u8, p, width) if u8.size >= width else u8[p[:, None] + np.arange(width)]
    out: I64 = grid.view(f">i{width}").ravel().astype(np.int64)
    return out


def scan(
    buf: Buffer | mmap.mmap,
    start: int,
    end: int,
    limit: int | None = None,
    *,
    check_crc: bool = True,
    keys: bool = False,
    tags: bool = True,
    max_records: int = CHUNK_RECORDS,
) -> BulkScan:
    """Records starting in ``[start, end)`` of ``buf[:limit]``, at most ``max_records``.

    See the module doc for the contract. ``keys`` also hashes each record's index keys;
    without ``tags`` (and ``keys``) the properties are not parsed and every
    ``tags_code`` is 0 (for a caller that reads the properties itself).
    Pass bytes, a memoryview or a read-only mmap; nothing is kept referencing it.
    """
    with memoryview(buf) as view:
        return _scan(view, start, end, limit, check_crc, keys, max_records, tags)


def _stop(buf: memoryview, at: int, lim: int, walked_out: bool) -> EndOfSegment | Corrupt | None:
    """Why a scan ended at ``at``: None when it walked out of its range (or hit its
    record cap) on valid records, else the codec's own verdict on the record there."""
    if walked_out:
        return None
    r = exact_scan(buf, at, lim, check_crc=False)
    if isinstance(r, RecordInfo):
        raise AssertionError(f"bulk scan stopped at a valid record at {at}")
    return r


def _scan(
    buf: memoryview,
    start: int,
    end: int,
    limit: int | None,
    check_crc: bool,
    keys: bool,
    max_records: int,
    tags: bool = True,
) -> BulkScan:
    lim = len(buf) if limit is None else limit
    positions = walk(buf, start, end, lim, max_records)
    stop_pos = positions[-1] if positions else start
    u8 = np.frombuffer(buf, np.uint8, lim)
    p = np.array(positions, np.int64)
    prefix = _prefix(u8, p)
    size = prefix["f0"].astype(np.int64)
    if positions:
        stop_pos = int(p[-1] + size[-1])
    cols, first_bad = _validate(_Words(buf, lim), p, size, prefix)
    if first_bad < p.size:
        stop_pos = int(p[first_bad])
        cols = {k: v[:first_bad] for k, v in cols.items()}
    cols, extra, text_bad = _text(buf, u8, cols, keys, lim, tags)
    if text_bad >= 0:
        stop_pos = text_bad
    crc_ok = _crc_ok(buf, cols) if check_crc else np.ones(cols["position"].size, np.bool_)
    walked_out = stop_pos >= end or (len(positions) == max_records and first_bad >= p.size)
    stop = _stop(buf, stop_pos, lim, walked_out and text_bad < 0)
    return BulkScan(_arrays(cols, crc_ok, extra), stop_pos, stop)


def _arrays(c: dict[str, I64], crc_ok: NDArray[np.bool_], extra: _TextColumns) -> RecordArrays:
    """The :class:`RecordArrays` of header columns ``c``, verdicts and text columns."""
    return RecordArrays(
        c["position"], c["size"], c["version"], crc_ok, c["queue_id"], c["flag"],
        c["queue_offset"], c["physical_offset"], c["sys_flag"], c["born_timestamp"],
        c["store_timestamp"], c["body_pos"], c["body_len"], c["props_pos"], c["props_len"],
        extra.topic_id, extra.tags_code, extra.torn, extra.key_record, extra.key_hash,
        extra.topics,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class PlainRecords:
    """The valid records of a range as :func:`scan_plain` gives them: header columns
    and spans, no text derived (no topic ids, tags or keys), one element per record.

    Positions are in the scanned buffer. ``torn`` marks properties ending in a zero
    byte (recovery's torn-tail rule); ``crc_ok`` is all true when the CRC was not
    checked. The topic is ``buf[topic_pos : topic_pos + topic_len]`` and the
    properties string ``buf[props_pos : props_pos + props_len]``, both valid UTF-8.
    """

    position: I64
    size: I64
    crc_ok: NDArray[np.bool_]
    torn: NDArray[np.bool_]
    queue_id: I64
    queue_offset: I64
    physical_offset: I64
    sys_flag: I64
    store_timestamp: I64
    topic_pos: I64
    topic_len: I64
    props_pos: I64
    props_len: I64

    def __len__(self) -> int:
        return int(self.position.size)


@dataclass(frozen=True, slots=True)
class PlainScan:
    """One :func:`scan_plain` call: the records of ``[start, end)`` and why the scan
    ended (``stop`` as in :class:`BulkScan`)."""

    records: PlainRecords
    end: int
    stop: EndOfSegment | Corrupt | None


def scan_plain(
    buf: Buffer | mmap.mmap,
    start: int,
    end: int,
    limit: int | None = None,
    *,
    check_crc: bool = True,
    max_records: int = CHUNK_RECORDS,
) -> PlainScan:
    """:func:`scan` without the text columns: what validating records needs (recovery).

    Same contract as :func:`scan` for which records are valid and where and why the scan
    stops (the codec's ``scan(..., check_crc=False)`` record after record, UTF-8 of the
    topic and properties included), with the BODYCRC verdict when ``check_crc``. Topics
    and properties are only checked: a span holding a byte >= 0x80 sends its record
    through the exact codec (UTF-8 validation); ASCII spans are valid as they are.
    Header fields are read with one gather per field (:class:`_Words`), not per byte.
    """
    with memoryview(buf) as view:
        return _scan_plain(view, start, end, limit, check_crc, max_records)


def _scan_plain(
    buf: memoryview, start: int, end: int, limit: int | None, check_crc: bool, max_records: int
) -> PlainScan:
    lim = len(buf) if limit is None else limit
    positions = walk(buf, start, end, lim, max_records)
    p = np.array(positions, np.int64)
    words = _Words(buf, lim)
    cols, first_bad = _plain_lengths(words, p)
    stop_pos = int(p[-1] + cols["size"][-1]) if positions else start
    if first_bad < p.size:
        stop_pos = int(p[first_bad])
        cols = {k: v[:first_bad] for k, v in cols.items()}
    wide = words.has_high_byte(cols["topic_pos"], cols["topic_len"])
    wide |= words.has_high_byte(cols["props_pos"], cols["props_len"])
    text_bad = -1
    for i in np.flatnonzero(wide).tolist():
        at = int(cols["position"][i])
        if not isinstance(exact_scan(buf, at, lim, check_crc=False), RecordInfo):
            text_bad = at
            cols = {k: v[:i] for k, v in cols.items()}
            break
    if text_bad >= 0:
        stop_pos = text_bad
    crc_ok = _crc_ok(buf, cols) if check_crc else np.ones(cols["position"].size, np.bool_)
    rec_end = cols["position"] + cols["size"]
    torn = (cols["props_len"] > 0) & (words.byte(rec_end - 1) == 0)
    walked_out = stop_pos >= end or (len(positions) == max_records and first_bad >= p.size)
    stop = _stop(buf, stop_pos, lim, walked_out and text_bad < 0)
    c = cols
    records = PlainRecords(
        c["position"], c["size"], crc_ok, torn, c["queue_id"], c["queue_offset"],
        c["physical_offset"], c["sys_flag"], c["store_timestamp"], c["topic_pos"],
        c["topic_len"], c["props_pos"], c["props_len"],
    )  # fmt: skip
    return PlainScan(records, stop_pos, stop)


_HIGH_BITS: Final = np.array(
    [int.from_bytes(b"\x80" * k + bytes(8 - k), "little") for k in range(9)], np.uint64
)
"""The high bit of each of the first ``k`` bytes of a little-endian 8-byte word."""


class _Words:
    """Big-endian integers at any byte position of ``buf[:lim]``: an array of width
    ``w`` whose stride is one byte (element ``i`` is the ``w`` bytes from ``i``), so a
    field of every record is one gather. Positions are clipped into the buffer (a
    record whose lengths are bad may point anywhere; its values are then unused)."""

    def __init__(self, buf: memoryview, lim: int) -> None:
        self.u8 = np.frombuffer(buf, np.uint8, lim)
        self.lim = lim
        self._views: dict[str, NDArray[Any]] = {}

    def _view(self, code: str) -> NDArray[Any]:
        v = self._views.get(code)
        if v is None:
            width = np.dtype(code).itemsize
            count = max(self.lim - width + 1, 0)
            v = np.ndarray((count,), code, self.u8, 0, (1,)) if count else np.zeros(1, code)
            self._views[code] = v
        return v

    def read(self, pos: I64, code: str) -> I64:
        """The ``code`` (``>i2``, ``>i4``, ``>i8``) integer at each of ``pos``."""
        v = self._view(code)
        out: I64 = v[np.clip(pos, 0, v.size - 1)].astype(np.int64)
        return out

    def byte(self, pos: I64) -> I64:
        out: I64 = self.u8[np.clip(pos, 0, max(self.lim - 1, 0))].astype(np.int64)
        return out

    def has_high_byte(self, starts: I64, lens: I64) -> NDArray[np.bool_]:
        """Whether each span ``[start, start + len)`` holds a byte >= 0x80, read eight
        bytes at a time: a span of 8 bytes or more as the words from its start plus the
        word ending at its end (all inside the span, so no mask), OR-ed per span; a
        shorter one as one masked word from its start (one that would run past the
        buffer counts as holding such a byte)."""
        out = np.zeros(starts.size, np.bool_)
        if self.lim < 8:
            out[lens > 0] = True
            return out
        words = self._view("<u8")
        short = np.flatnonzero((lens > 0) & (lens < 8))
        if short.size:
            s = starts[short]
            fits = s + 8 <= self.lim
            word = words[np.where(fits, s, 0)]
            out[short] = ((word & _HIGH_BITS[lens[short]]) != 0) | ~fits
        long = np.flatnonzero(lens >= 8)
        if long.size:
            s, n = starts[long], lens[long]
            nw = (n + 7) // 8
            first = np.cumsum(nw) - nw
            at = np.repeat(s - 8 * first, nw) + 8 * np.arange(int(first[-1] + nw[-1]))
            at[first + nw - 1] = s + n - 8
            acc = np.bitwise_or.reduceat(words[at], first)
            out[long] = (acc & _HIGH_BITS[8]) != 0
        return out


def _plain_lengths(words: _Words, p: I64) -> tuple[dict[str, I64], int]:
    """:func:`_validate`'s columns and the same length checks (:func:`_spans`): the
    columns of the walked records at ``p`` and the index of the first one that fails
    (``p.size`` when none does). The fields up to the born host are read with one
    gather of each record's first bytes (:func:`_prefix`), as are the store time and
    body length when every host is IPv4; otherwise those two with one gather each."""
    rd = words.read
    pre = _prefix(words.u8, p)

    def field(pos: int) -> I64:
        out: I64 = pre[_PREFIX_NAMES[pos]].astype(np.int64)
        return out

    size = field(L.TOTAL_SIZE_POS)
    version = np.where(field(L.MAGIC_POS) == L.MAGIC_V2, 2, 1)
    sys_flag = field(L.SYSFLAG_POS)
    combo = 2 * ((sys_flag & L.BORNHOST_V6_FLAG) != 0) + ((sys_flag & L.STOREHOST_V6_FLAG) != 0)
    hdr = _HEADER_SIZE[combo]
    if pre.dtype == _V4_DTYPE and not bool(combo.any()):
        store_ts = pre[f"f{_STORE_TS}"].astype(np.int64)
        body_len = pre[f"f{_BODY_LEN}"].astype(np.int64)
    else:
        store_ts = rd(p + _OFFSETS[combo, _STORE_TS], ">i8")
        body_len = rd(p + _OFFSETS[combo, _BODY_LEN], ">i4")
    spans, first_bad = _spans(words, p, size, version, hdr, body_len)
    cols = {
        "position": p, "size": size, "queue_id": field(L.QUEUE_ID_POS),
        "queue_offset": field(L.QUEUE_OFFSET_POS),
        "physical_offset": field(L.PHYSICAL_OFFSET_POS), "sys_flag": sys_flag,
        "store_timestamp": store_ts, "body_crc": field(L.BODY_CRC_POS), "body_pos": p + hdr,
        "body_len": body_len, **spans,
    }  # fmt: skip
    return cols, first_bad


def _spans(
    words: _Words, p: I64, size: I64, version: I64, hdr: I64, body_len: I64
) -> tuple[dict[str, I64], int]:
    """The topic and properties spans of the records at ``p``, whose headers are
    ``hdr`` bytes (columns ``topic_pos``, ``topic_len``, ``props_pos``, ``props_len``),
    and the index of the first record whose lengths the codec rejects (``p.size`` when
    none does): a negative body, topic or properties length, a V1 topic over its
    limit, or spans that do not end the record exactly at TOTALSIZE."""
    rd = words.read
    rec_end = p + size
    tl_pos = p + hdr + body_len
    bad = (size < hdr + version + 2) | (body_len < 0) | (tl_pos + version + 2 > rec_end)
    v2 = version == 2
    t_len = words.byte(tl_pos)
    if v2.any():
        t_len = np.where(v2, rd(tl_pos, ">i2"), t_len)
    bad |= (~v2 & (t_len > L.MAX_TOPIC_LENGTH_V1)) | (t_len < 0)
    t_pos = tl_pos + version
    bad |= t_pos + t_len + 2 > rec_end
    props_len = rd(t_pos + t_len, ">i2")
    props_pos = t_pos + t_len + 2
    bad |= (props_len < 0) | (props_pos + props_len != rec_end)
    first_bad = int(np.argmax(bad)) if bad.any() else p.size
    spans = {"topic_pos": t_pos, "topic_len": t_len, "props_pos": props_pos, "props_len": props_len}
    return spans, first_bad


def _prefix(u8: NDArray[np.uint8], p: I64) -> NDArray[Any]:
    """The first bytes of every record, in one gather, as a structured array with fields
    ``f0``.. in ``_layout``'s order: the whole IPv4 header (:data:`_V4_DTYPE`, which
    every record is long enough for), or, in a buffer shorter than that, the fields
    before the born host (:data:`_PREFIX_DTYPE`)."""
    dtype = _V4_DTYPE if u8.size >= _V4_DTYPE.itemsize else _PREFIX_DTYPE
    width = dtype.itemsize
    if u8.size >= width:  # walked records fit in the buffer: one memcpy per record
        grid = text._rows_at(u8, np.minimum(p, u8.size - width), width)
    else:
        grid = u8[np.minimum(p[:, None] + np.arange(width), u8.size - 1)]
    out: NDArray[Any] = grid.view(dtype).ravel()
    return out


def _validate(words: _Words, p: I64, size: I64, prefix: NDArray[Any]) -> tuple[dict[str, I64], int]:
    """The header columns of walked records and the index of the first one that fails
    a length check of the codec (``p.size`` when none does). The fields after the
    fixed prefix are read with one gather each (:class:`_Words`)."""
    rd = words.read
    magic = prefix[_PREFIX_NAMES[L.MAGIC_POS]]
    v2 = magic == L.MAGIC_V2
    version = np.where(v2, 2, 1)
    sys_flag = prefix[_PREFIX_NAMES[L.SYSFLAG_POS]].astype(np.int64)
    combo = 2 * ((sys_flag & L.BORNHOST_V6_FLAG) != 0) + ((sys_flag & L.STOREHOST_V6_FLAG) != 0)
    hdr = _HEADER_SIZE[combo]
    body_pos = p + hdr
    # IPv4 hosts everywhere (the common case): the fields after them are in the prefix
    v4 = prefix.dtype == _V4_DTYPE and not bool(combo.any())
    if v4:
        body_len = prefix[f"f{_BODY_LEN}"].astype(np.int64)
    else:
        body_len = rd(p + _OFFSETS[combo, _BODY_LEN], ">i4")
    spans, first_bad = _spans(words, p, size, version, hdr, body_len)

    def field(pos: int) -> I64:
        out: I64 = prefix[_PREFIX_NAMES[pos]].astype(np.int64)
        return out

    cols = {
        "position": p, "size": size, "version": version,
        "queue_id": field(L.QUEUE_ID_POS), "flag": field(L.FLAG_POS),
        "queue_offset": field(L.QUEUE_OFFSET_POS),
        "physical_offset": field(L.PHYSICAL_OFFSET_POS), "sys_flag": sys_flag,
        "born_timestamp": field(L.BORN_TIMESTAMP_POS), "body_crc": field(L.BODY_CRC_POS),
        "store_timestamp": prefix[f"f{_STORE_TS}"].astype(np.int64)
        if v4 else rd(p + _OFFSETS[combo, _STORE_TS], ">i8"),
        "body_pos": body_pos, "body_len": body_len, **spans,
    }  # fmt: skip
    return cols, first_bad


def _crc_ok(buf: Buffer, cols: dict[str, I64]) -> NDArray[np.bool_]:
    """BODYCRC verdict per record: :data:`crc32` of each body against the field (the
    bodies sliced and hashed by ``map``: no Python frame per record)."""
    stored = cols["body_crc"]
    starts = cols["body_pos"].tolist()
    ends = (cols["body_pos"] + cols["body_len"]).tolist()
    with memoryview(buf) as mv:
        bodies = map(mv.__getitem__, map(slice, starts, ends))
        actual = np.fromiter(map(crc32, bodies), np.int64, len(starts))
    ok: NDArray[np.bool_] = (actual & 0x7FFFFFFF) == stored
    return ok


@dataclass(frozen=True, slots=True)
class _TextColumns:
    """The columns :func:`_text` derives from the topic and properties."""

    topic_id: I64
    tags_code: I64
    torn: NDArray[np.bool_]
    key_record: I64
    key_hash: NDArray[np.int32]
    topics: tuple[str, ...]


def _text(
    buf: Buffer,
    u8: NDArray[np.uint8],
    cols: dict[str, I64],
    keys: bool,
    lim: int,
    want_tags: bool = True,
) -> tuple[dict[str, I64], _TextColumns, int]:
    """The records' columns (cut at the first record whose text the codec rejects),
    their topic ids, tag codes, torn flags and (``keys``) index key hashes, and the
    position of that first rejected record, or -1."""
    t_pos, t_len = cols.pop("topic_pos"), cols.pop("topic_len")
    p_pos, p_len = cols["props_pos"], cols["props_len"]
    t_flat, t_offs = text.gather(buf, t_pos, t_len)
    p_flat, p_offs = text.gather(buf, p_pos, p_len)
    wide = np.zeros(t_len.size, np.int64)
    if t_flat.size and t_flat.max() >= 0x80:
        wide += text.span_count(t_flat >= 0x80, t_offs, t_len)
    if p_flat.size and p_flat.max() >= 0x80:
        wide += text.span_count(p_flat >= 0x80, p_offs, p_len)
    exact = _exact_records(buf, cols, np.flatnonzero(wide), lim)
    text_bad = -1
    if exact.bad_at < cols["position"].size:
        text_bad = int(cols["position"][exact.bad_at])
        cut = exact.bad_at
        cols = {k: v[:cut] for k, v in cols.items()}
        t_len, t_offs, p_len, p_offs = t_len[:cut], t_offs[:cut], p_len[:cut], p_offs[:cut]
        t_flat = t_flat[: int(t_offs[-1] + t_len[-1])] if cut else t_flat[:0]
        p_flat = p_flat[: int(p_offs[-1] + p_len[-1])] if cut else p_flat[:0]
        wide = wide[:cut]
    ascii_rec = wide == 0
    topic_id, topics = _topic_ids(t_flat, t_offs, t_len, ascii_rec, exact.topics)
    if not (want_tags or keys):
        tags = np.zeros(p_len.size, np.int64)
    else:
        props = text.Properties(p_flat, p_offs, p_len)
        tags = text.tags_codes(p_flat, props)
        for i, code in exact.tags.items():
            tags[i] = code
    end = cols["position"] + cols["size"]
    torn = (p_len > 0) & (u8[np.clip(end - 1, 0, max(lim - 1, 0))] == 0)
    rec = np.zeros(0, np.int64)
    hashes = np.zeros(0, np.int32)
    if keys:
        rec, hashes = text.index_keys(p_flat, props, topic_id, topics, ascii_rec)
        if exact.keys:
            x_rec = np.array([r for r, _ in exact.keys], np.int64)
            x_hash = np.array([h for _, h in exact.keys], np.int32)
            rec, hashes = np.r_[rec, x_rec], np.r_[hashes, x_hash]
            order = np.argsort(rec, kind="stable")
            rec, hashes = rec[order], hashes[order]
    extra = _TextColumns(topic_id, tags, torn, rec, hashes.astype(np.int32), tuple(topics))
    return cols, extra, text_bad


@dataclass(slots=True)
class _Exact:
    """What the exact codec said about the records it was asked to read."""

    bad_at: int
    topics: dict[int, str]
    tags: dict[int, int]
    keys: list[tuple[int, int]]


def _exact_records(buf: Buffer, cols: dict[str, I64], rows: I64, lim: int) -> _Exact:
    """Read ``rows`` (records with non-ASCII text) with the exact codec: the first one
    it rejects (by index; the count when none), and the others' topics, tags, keys."""
    out = _Exact(cols["position"].size, {}, {}, [])
    for i in rows.tolist():
        r = exact_scan(buf, int(cols["position"][i]), lim, check_crc=False)
        if not isinstance(r, RecordInfo):
            out.bad_at = i
            break
        out.topics[i] = r.topic
        out.tags[i] = tags_code(r.tags)
        prefix = r.topic + "#"
        for k in (uniq_key_of(r.properties_string), *keys_of(r.properties_string)):
            if k:
                out.keys.append((i, key_hash(prefix + k)))
    return out


def _topic_ids(
    flat: NDArray[np.uint8], offs: I64, lens: I64, ascii_rec: NDArray[np.bool_],
    exact: dict[int, str],
) -> tuple[I64, list[str]]:  # fmt: skip
    """Small integer ids for the topics and the id -> name list.

    ASCII topics are grouped by length and ``String.hashCode`` (each group checked byte
    for byte against its first member); the ids follow the sorted (length, hash) keys,
    then the topics that share a key with an earlier one and the non-ASCII ones, by
    first appearance. Topics of at most 8 bytes are grouped exactly by their bytes
    (:func:`_short_topic_ids`, same ids)."""
    n = lens.size
    if n and int(lens.max()) <= text.KEY_BYTES and bool(ascii_rec.all()):
        return _short_topic_ids(flat, offs, lens)
    ids = np.zeros(n, np.int64)
    names: dict[str, int] = {}
    key = (lens << 32) | text.java_hash(flat, offs, lens).astype(np.int64)
    key = np.where(ascii_rec, key, -1)
    first, inv = _unique(key)
    ex = first[inv]
    width = int(lens[0]) if n else 0
    if width and flat.size == n * width and bool((lens == width).all()):
        rows = flat.reshape(n, width)  # spans of one length: compared as rows
        differ = (rows != rows[ex]).any(axis=1)
    else:
        idx, _ = text.flat_index(offs, lens)
        mate = idx + np.repeat(offs[ex] - offs, lens)
        differ = text.span_count(flat[idx] != flat[mate], offs, lens) > 0
    data = flat.tobytes()

    def name_of(i: int) -> str:
        return exact[i] if i in exact else data[offs[i] : offs[i] + lens[i]].decode("ascii")

    group_id = [names.setdefault(name_of(int(f)), len(names)) for f in first.tolist()]
    ids[:] = np.asarray(group_id, np.int64)[inv] if n else ids
    for i in np.flatnonzero(differ | ~ascii_rec).tolist():
        ids[i] = names.setdefault(name_of(i), len(names))
    return ids, list(names)


_LEN_BITS: Final = np.array(
    [sum(((n >> b) & 1) << (63 - 8 * b) for b in range(4)) for n in range(text.KEY_BYTES + 1)],
    np.uint64,
)
"""A length 0..8 spread over the top bits of a word's first four bytes (clear in ASCII)."""
_PEEL_GROUPS: Final = 8
""":func:`_unique` takes up to this many distinct values one at a time before sorting."""


def _short_topic_ids(flat: NDArray[np.uint8], offs: I64, lens: I64) -> tuple[I64, list[str]]:
    """:func:`_topic_ids` of ASCII topics of at most 8 bytes: each topic's bytes and
    length are one uint64 (:data:`_LEN_BITS` in the bits ASCII leaves clear), so the
    groups are exact; they are numbered as the (length, hash) grouping numbers them."""
    word = text.first_words(flat, offs, lens) | _LEN_BITS[lens]
    first, inv = _unique(word)
    data = flat.tobytes()
    firsts = first.tolist()
    group_names = [data[offs[f] : offs[f] + lens[f]].decode("ascii") for f in firsts]
    keys = [(len(t) << 32) | (java_string_hash(t) & 0xFFFFFFFF) for t in group_names]
    by_key = sorted(range(len(firsts)), key=lambda g: (keys[g], firsts[g]))
    leads = [g for i, g in enumerate(by_key) if i == 0 or keys[g] != keys[by_key[i - 1]]]
    lead_set = set(leads)
    later = sorted((g for g in by_key if g not in lead_set), key=lambda g: firsts[g])
    group_id = np.zeros(len(firsts), np.int64)
    for i, g in enumerate(leads + later):
        group_id[g] = i
    ids: I64 = group_id[inv]
    return ids, [group_names[g] for g in leads + later]


def _unique(key: NDArray[Any]) -> tuple[I64, I64]:
    """``np.unique(key, return_index=True, return_inverse=True)[1:]``: the first index of
    each distinct value (in value order) and each element's group, peeling the values
    off one at a time while there are few (no sort), else sorting."""
    n = key.size
    rest, rest_key = np.arange(n), key
    found: list[tuple[Any, int, I64]] = []
    while rest.size and len(found) < _PEEL_GROUPS:
        same = rest_key == rest_key[0]
        found.append((rest_key[0], int(rest[0]), rest[same]))
        if bool(same.all()):
            rest = rest[:0]
            break
        rest, rest_key = rest[~same], rest_key[~same]
    if rest.size:
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        return first.astype(np.int64), inv.ravel().astype(np.int64)
    found.sort(key=lambda f: f[0])
    inv = np.empty(n, np.int64)
    for g, (_, _, members) in enumerate(found):
        inv[members] = g
    return np.array([f[1] for f in found], np.int64), inv
