"""The text and body columns of :mod:`mqstore.tools.spark.export`, built with numpy and Arrow.

Per batch of records (positions in a mapped segment), without a Python step per record:

* hosts: each distinct host (IPv4 8 bytes, IPv6 20 bytes, ``SYSFLAG``'s bits) is formatted
  once (``ip:port``, ``[ip]:port``) and taken per record;
* message ids: the store host bytes and the physical offset as upper-case hex
  (``MessageId``), from a nibble table;
* properties: the segments of ``string_to_properties`` found at once
  (:class:`mqstore.commitlog._bulk_text.Properties`: the same split, the same rules);
  a name repeated in one record keeps its first place and its last value, as a dict
  does; UNIQ_KEY and TAGS are the last valid value, KEYS its non-empty space-separated
  tokens;
* bodies: Arrow ``binary_view`` entries that point into the mapping, cast to ``binary``
  (one copy, in C); a compressed body is inflated per record (``decompress``), and one
  that cannot be is null with its error.

Text is UTF-8: the bulk scan sends every record with a non-ASCII byte in its properties
through the exact codec, which rejects invalid UTF-8, and the separators (0x01, 0x02,
space) never occur inside a multi-byte character, so byte spans are character spans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import numpy as np

from mqstore.commitlog import _bulk_text as text
from mqstore.commitlog import format as fmt
from mqstore.compression import decompress
from mqstore.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    bytes_host,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from numpy.typing import NDArray

    I64 = NDArray[np.int64]
    U8 = NDArray[np.uint8]

_HEX: Final = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_INLINE: Final = 12
"""Arrow binary_view entries up to 12 bytes hold the bytes themselves."""


def _host_text(raw: bytes) -> str:
    ip, port = bytes_host(raw)
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _rows(u8: U8, pos: I64, width: int) -> U8:
    """``width`` bytes at each position, one row each."""
    out: U8 = u8[pos[:, None] + np.arange(width)]
    return out


def hosts(u8: U8, pos: I64, v6: NDArray[np.bool_]) -> pa.Array:
    """The host at each position as text (20 bytes where ``v6``, else 8)."""
    import pyarrow as pa

    names: list[str] = []
    index = np.zeros(pos.size, np.int64)
    for width, which in ((fmt.IPV4_HOST_LEN, ~v6), (fmt.IPV6_HOST_LEN, v6)):
        sel = np.flatnonzero(which)
        if not sel.size:
            continue
        rows = np.ascontiguousarray(_rows(u8, pos[sel], width))
        raw = rows.view("<u8" if width == 8 else f"V{width}").ravel()  # u8: a fast sort
        _, first, inverse = np.unique(raw, return_index=True, return_inverse=True)
        index[sel] = len(names) + inverse.ravel()
        names.extend(_host_text(rows[i].tobytes()) for i in first.tolist())
    return pa.array(names, pa.string()).take(pa.array(index))


def msg_ids(u8: U8, store_pos: I64, v6: NDArray[np.bool_], phys: I64) -> pa.Array:
    """``MessageId``: the store host bytes then the physical offset, upper-case hex."""
    import pyarrow as pa

    n = int(store_pos.size)
    parts: list[tuple[I64, U8]] = []
    for width, rows in ((fmt.IPV4_HOST_LEN, ~v6), (fmt.IPV6_HOST_LEN, v6)):
        sel = np.flatnonzero(rows)
        if not sel.size:
            continue
        raw = np.empty((sel.size, width + 8), np.uint8)
        raw[:, :width] = _rows(u8, store_pos[sel], width)
        raw[:, width:] = phys[sel].astype(">i8").view(np.uint8).reshape(-1, 8)
        hexed = np.empty((sel.size, 2 * (width + 8)), np.uint8)
        hexed[:, 0::2], hexed[:, 1::2] = _HEX[raw >> 4], _HEX[raw & 15]
        if sel.size == n:  # one host width: the rows are the string buffer
            offsets = np.arange(n + 1, dtype=np.int32) * hexed.shape[1]
            return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(hexed))
        parts.append((sel, hexed))
    out: list[str | None] = [None] * n
    for sel, hexed in parts:
        for i, row in zip(sel.tolist(), hexed, strict=True):
            out[i] = row.tobytes().decode("ascii")
    return pa.array(out, pa.string())


def _strings(flat: U8, start: I64, length: I64) -> pa.Array:
    """The spans of ``flat`` as UTF-8 strings; null where ``length`` is -1."""
    import pyarrow as pa

    valid = length >= 0
    lens = np.where(valid, length, 0)
    data, _ = text.gather(flat, start, lens)
    offsets = np.r_[0, np.cumsum(lens)].astype(np.int32)
    mask = None if valid.all() else pa.array(valid).buffers()[1]
    return pa.StringArray.from_buffers(
        int(lens.size), pa.py_buffer(offsets), pa.py_buffer(data), mask, int((~valid).sum())
    )


class PropertyColumns:
    """Properties map, UNIQ_KEY, TAGS and KEYS of the records whose properties are the
    spans ``(props_pos, props_len)`` of ``u8``."""

    def __init__(self, u8: U8, props_pos: I64, props_len: I64) -> None:
        self.flat, offs = text.gather(u8, props_pos, props_len)
        self.n = int(props_pos.size)
        self.props = text.Properties(self.flat, offs, props_len)

    def string(self, name: str) -> pa.Array:
        """The last valid value of property ``name`` of every record (null: none)."""
        start, length = self.props.value(name)
        return _strings(self.flat, start, length)

    def uniq(self) -> pa.Array:
        """UNIQ_KEY per record."""
        return self.string(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def tags(self) -> pa.Array:
        """TAGS per record."""
        return self.string(PROPERTY_TAGS)

    def keys(self) -> pa.Array:
        """The non-empty space-separated KEYS tokens of every record (a list each)."""
        import pyarrow as pa

        start, length = self.props.value(PROPERTY_KEYS)
        sel = np.flatnonzero(length > 0)
        owner, t_start, t_len = text._split_tokens(self.flat, start[sel], length[sel])
        counts = np.bincount(sel[owner], minlength=self.n)
        offsets = pa.array(np.r_[0, np.cumsum(counts)].astype(np.int32), pa.int32())
        return pa.ListArray.from_arrays(offsets, _strings(self.flat, t_start, t_len))

    def mapping(self) -> pa.Array:
        """The properties of every record as a map, in dict order (see the module doc)."""
        import pyarrow as pa

        p = self.props.segments
        keep = np.ones(p.start.size, np.bool_)
        v_start, v_len = p.value_start.copy(), p.value_len.copy()
        # a name's identity: its first 8 bytes (exact up to 8 bytes), else its hash
        # (same-hash names are compared byte for byte in _merge_repeats)
        name_hash = p.name_key.view(np.int64).copy()
        long = np.flatnonzero(p.name_len > text.KEY_BYTES)
        if long.size:
            name_hash[long] = text.java_hash(self.flat, p.start[long], p.name_len[long])
        order = np.lexsort((name_hash, p.name_len, p.record))
        same = (
            (p.record[order][1:] == p.record[order][:-1])
            & (p.name_len[order][1:] == p.name_len[order][:-1])
            & (name_hash[order][1:] == name_hash[order][:-1])
        )
        for rec in np.unique(p.record[order][1:][same]).tolist():
            self._merge_repeats(int(rec), keep, v_start, v_len)
        rec = p.record[keep]
        counts = np.bincount(rec, minlength=self.n)
        offsets = pa.array(np.r_[0, np.cumsum(counts)].astype(np.int32), pa.int32())
        names = _strings(self.flat, p.start[keep], p.name_len[keep])
        values = _strings(self.flat, v_start[keep], v_len[keep])
        return pa.MapArray.from_arrays(offsets, names, values)

    def _merge_repeats(
        self, rec: int, keep: NDArray[np.bool_], v_start: I64, v_len: I64
    ) -> None:  # fmt: skip
        """A record whose names may repeat: each name keeps its first segment, with the
        value of its last one."""
        p = self.props.segments
        first: dict[bytes, int] = {}
        for i in np.flatnonzero(p.record == rec).tolist():
            a = int(p.start[i])
            name = self.flat[a : a + int(p.name_len[i])].tobytes()
            j = first.setdefault(name, i)
            if j != i:
                keep[i] = False
                v_start[j], v_len[j] = p.value_start[i], p.value_len[i]


def bodies(buf: Any, u8: U8, pos: I64, length: I64, sys_flag: I64) -> tuple[pa.Array, pa.Array]:
    """(body, body_error) of every record: the bytes, inflated when compressed (null
    with the error when they cannot be)."""
    import pyarrow as pa

    n = int(pos.size)
    errors: list[str | None] = [None] * n
    if n == 0:
        return pa.array([], pa.binary()), pa.array(errors, pa.string())
    base = int(pos.min())
    end = int((pos + length).max())
    views = np.zeros((n, 16), np.uint8)
    views[:, 0:4] = length.astype("<i4").view(np.uint8).reshape(-1, 4)
    inline = length <= _INLINE
    if inline.any():
        rows = np.flatnonzero(inline)
        grid = _rows(u8, pos[rows], _INLINE) if end + _INLINE <= u8.size else None
        for k, r in enumerate(rows.tolist()):
            m = int(length[r])
            src = grid[k, :m] if grid is not None else u8[int(pos[r]) : int(pos[r]) + m]
            views[r, 4 : 4 + m] = src
    big = np.flatnonzero(~inline)
    if big.size:
        views[big, 4:8] = _rows(u8, pos[big], 4)
        views[big, 12:16] = (pos[big] - base).astype("<i4").view(np.uint8).reshape(-1, 4)
    with memoryview(buf) as whole:
        data = pa.py_buffer(whole[base:end])
        viewed = pa.Array.from_buffers(
            pa.binary_view(), n, [None, pa.py_buffer(views), data]
        )  # fmt: skip
        body = viewed.cast(pa.binary())
        del viewed, data
    packed = np.flatnonzero(sys_flag & fmt.COMPRESSED_FLAG)
    if packed.size == 0:
        return body, pa.array(errors, pa.string())
    out: list[bytes | None] = body.to_pylist()
    for i in packed.tolist():
        raw = out[i]
        assert raw is not None
        try:
            out[i] = decompress(raw, int(sys_flag[i]))
        except ValueError as e:
            out[i], errors[i] = None, str(e)
    return pa.array(out, pa.binary()), pa.array(errors, pa.string())
