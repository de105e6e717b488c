"""The validating decoder: bytes at a position to a :class:`RecordInfo`, a
:class:`MessageRecord`, an :class:`EndOfSegment` or a :class:`Corrupt`.

Contract: :func:`scan` is the single validation path (magic, every length against
TOTALSIZE, BODYCRC, UTF-8); :func:`decode` builds on it. No I/O, never an exception
for bad bytes, nothing kept referencing the buffer (an mmap is fine). The byte layout
is :mod:`mqstore.commitlog._layout`'s. Import these names from
:mod:`mqstore.commitlog.format`.
"""

from __future__ import annotations

import zlib
from typing import Any, Final

from mqstore.commitlog import _layout
from mqstore.commitlog._layout import (
    _HEADERS,
    BLANK_MAGIC,
    BORNHOST_V6_FLAG,
    END_FILE_MIN_BLANK_LENGTH,
    IPV4_HOST_LEN,
    IPV6_HOST_LEN,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    STOREHOST_V6_FLAG,
    SYSFLAG_POS,
    record_length,
)
from mqstore.commitlog._record import MessageRecord
from mqstore.commitlog._results import (
    Corrupt,
    CorruptKind,
    DecodeResult,
    EndOfSegment,
    Record,
    RecordInfo,
    ScanResult,
    _bad,
)
from mqstore.message import bytes_host

# Assigned, not imported: CPython 3.11 compiles ``name.method(...)`` on a name bound by an
# import to LOAD_ATTR (a bound method built per call) instead of LOAD_METHOD. These
# structs are called per record, so they keep the bytecode they had beside the layout.
_INT: Final = _layout._INT
_SHORT: Final = _layout._SHORT
_SIZE_MAGIC: Final = _layout._SIZE_MAGIC

_new_info = tuple.__new__


def scan(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    limit: int | None = None,
    *,
    check_crc: bool = True,
) -> ScanResult:
    """Validate the record at ``buf[pos:limit]`` and return its :class:`RecordInfo`.

    The single validation path (``decode`` builds on it): magic, TOTALSIZE against
    the length recomputed from its fields, every length inside the record, BODYCRC
    when ``check_crc``, UTF-8 topic and properties. Never raises for bad bytes.
    Pass a memoryview (or bytes) for speed: slices of an ``mmap`` copy.
    """
    end = len(buf) if limit is None else limit
    remaining = end - pos
    if remaining < 8:
        return _short_header(buf, pos, end, remaining)
    total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic == MAGIC_V1:
        version = 1
    elif magic == MAGIC_V2:
        version = 2
    else:
        return _not_a_record(total, magic, remaining)
    if total < MIN_RECORD_SIZE or total > remaining:
        return _bad_total(total, remaining)
    sys_flag = _INT.unpack_from(buf, pos + SYSFLAG_POS)[0]
    header = _HEADERS[
        (
            IPV6_HOST_LEN if sys_flag & BORNHOST_V6_FLAG else IPV4_HOST_LEN,
            IPV6_HOST_LEN if sys_flag & STOREHOST_V6_FLAG else IPV4_HOST_LEN,
        )
    ]
    if total < header.size + version + 2:
        return _bad(CorruptKind.BAD_SIZE, f"total size {total} too small for its hosts", total)
    fields = header.unpack_from(buf, pos)
    body_len = fields[14]
    rec_end = pos + total
    body_pos = pos + header.size
    p = body_pos + body_len
    if body_len < 0 or p + version + 2 > rec_end:
        return _bad(
            CorruptKind.LENGTH_MISMATCH, f"body length {body_len} overruns the record", total
        )
    return _scan_text(
        buf, p, rec_end, fields, total, version, sys_flag, body_pos, body_len, check_crc
    )


def _scan_text(
    buf: bytes | bytearray | memoryview,
    p: int,
    rec_end: int,
    fields: tuple[Any, ...],
    total: int,
    version: int,
    sys_flag: int,
    body_pos: int,
    body_len: int,
    check_crc: bool,
) -> ScanResult:
    """:func:`scan` from the topic length at ``p`` to ``rec_end``: the topic and
    properties lengths, BODYCRC, the text, then the :class:`RecordInfo` (``fields``
    is the header as unpacked). Its caller checked everything before ``p``."""
    if version == 1:
        t_len = buf[p]
        if t_len > 127:  # a signed byte in Java: negative is invalid
            return _bad(CorruptKind.LENGTH_MISMATCH, f"negative topic length {t_len - 256}", total)
        p += 1
    else:
        (t_len,) = _SHORT.unpack_from(buf, p)
        if t_len < 0:
            return _bad(CorruptKind.LENGTH_MISMATCH, f"negative topic length {t_len}", total)
        p += 2
    if p + t_len + 2 > rec_end:
        return _bad(CorruptKind.LENGTH_MISMATCH, f"topic length {t_len} overruns the record", total)
    t_pos = p
    p += t_len
    (p_len,) = _SHORT.unpack_from(buf, p)
    p += 2
    if p_len < 0 or p + p_len != rec_end:
        return _length_mismatch(total, sys_flag, version, body_len, t_len, p_len)
    crc = fields[2]
    if check_crc:
        actual = zlib.crc32(buf[body_pos : body_pos + body_len]) & 0x7FFFFFFF
        if actual != crc:
            return _bad(CorruptKind.BAD_CRC, f"body crc {crc} != {actual}", total)
    try:
        topic = str(buf[t_pos : t_pos + t_len], "utf-8")
        props = str(buf[p:rec_end], "utf-8")
    except UnicodeDecodeError as e:
        return _bad(CorruptKind.BAD_TEXT, f"topic or properties not UTF-8: {e}", total)
    return _new_info(RecordInfo, (
        total, version, crc, fields[3], fields[4], fields[5], fields[6], sys_flag, fields[8],
        fields[9], fields[10], fields[11], fields[12], fields[13], body_pos, body_len, topic, props,
    ))  # fmt: skip


def _short_header(
    buf: bytes | bytearray | memoryview, pos: int, end: int, remaining: int
) -> Corrupt:
    """:func:`scan` of fewer than 8 bytes: zeros (the end of the data) or a torn header."""
    if (remaining >= 4 and _INT.unpack_from(buf, pos)[0] == 0) or remaining <= 0:
        return _bad(CorruptKind.ZEROED, f"{remaining} bytes left")
    if bytes(buf[pos:end]).strip(b"\0") == b"":
        return _bad(CorruptKind.ZEROED, f"{remaining} zero bytes left")
    return _bad(CorruptKind.TRUNCATED, f"only {remaining} bytes left for a record header")


def _not_a_record(total: int, magic: int, remaining: int) -> EndOfSegment | Corrupt:
    """:func:`scan` of a header whose magic is not a record's: a blank record, zeros or
    garbage (``remaining`` bytes are left in the buffer)."""
    if magic == BLANK_MAGIC:
        if total < END_FILE_MIN_BLANK_LENGTH or total > remaining:
            return _bad(
                CorruptKind.BAD_SIZE, f"blank record size {total} with {remaining} left", total
            )
        return EndOfSegment(total)
    if magic == 0 and total == 0:
        return _bad(CorruptKind.ZEROED, "zero size and magic")
    return _bad(CorruptKind.BAD_MAGIC, f"magic {magic & 0xFFFFFFFF:#010x}", total)


def _bad_total(total: int, remaining: int) -> Corrupt:
    """:func:`scan` of a record whose TOTALSIZE is below the minimum or past the
    ``remaining`` bytes of the buffer."""
    if total < MIN_RECORD_SIZE:
        return _bad(CorruptKind.BAD_SIZE, f"total size {total} < {MIN_RECORD_SIZE}", total)
    return _bad(CorruptKind.TRUNCATED, f"total size {total} > {remaining} bytes left", total)


def _length_mismatch(
    total: int, sys_flag: int, version: int, body_len: int, t_len: int, p_len: int
) -> Corrupt:
    """TOTALSIZE disagrees with the record's own body, topic and properties lengths."""
    expected = record_length(sys_flag, version, body_len, t_len, p_len)
    return _bad(
        CorruptKind.LENGTH_MISMATCH,
        f"total size {total} != {expected} computed from its lengths",
        total,
    )


def decode(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    limit: int | None = None,
    *,
    check_crc: bool = True,
    read_body: bool = True,
) -> DecodeResult:
    """Decode the record at ``buf[pos:limit]`` into a full :class:`MessageRecord`.

    Never raises for bad bytes: every failure is a :class:`Corrupt` with its kind
    (validation is :func:`scan`'s). With ``read_body=False`` the body is returned
    empty (the CRC is still checked when ``check_crc``). ``buf`` may be an mmap;
    nothing is kept referencing it.
    """
    info = scan(buf, pos, limit, check_crc=check_crc)
    if type(info) is not RecordInfo:
        return info  # type: ignore[return-value]
    return Record(info_to_record(info, buf if read_body else None), info.size)


def info_to_record(
    info: RecordInfo, buf: bytes | bytearray | memoryview | None = None
) -> MessageRecord:
    """Full record from a scanned one; the body is read from ``buf`` (empty if None)."""
    return MessageRecord(
        queue_id=info.queue_id,
        flag=info.flag,
        queue_offset=info.queue_offset,
        physical_offset=info.physical_offset,
        sys_flag=info.sys_flag,
        born_timestamp=info.born_timestamp,
        born_host=bytes_host(info.born_host_raw),
        store_timestamp=info.store_timestamp,
        store_host=bytes_host(info.store_host_raw),
        reconsume_times=info.reconsume_times,
        prepared_transaction_offset=info.prepared_transaction_offset,
        body=bytes(buf[info.body_pos : info.body_pos + info.body_len]) if buf is not None else b"",
        topic=info.topic,
        properties_string=info.properties_string,
        body_crc=info.body_crc,
        version=info.version,
    )


def decode_all(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = True
) -> list[MessageRecord]:
    """Decode consecutive records (e.g. a pull response body) until the buffer ends.

    Raises:
        CorruptRecordError: at the first record that is not valid.
    """
    from mqstore.errors import CorruptRecordError

    out: list[MessageRecord] = []
    pos = 0
    n = len(buf)
    while pos < n:
        r = decode(buf, pos, check_crc=check_crc)
        if not isinstance(r, Record):
            raise CorruptRecordError(f"record at byte {pos}: {r}")
        out.append(r.record)
        pos += r.size
    return out


def peek_size(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(TOTALSIZE, MAGIC) at ``pos`` without validation: a cheap walk for scanners."""
    return _SIZE_MAGIC.unpack_from(buf, pos)
