"""Header fields the body CRC does not cover, checked on a chunk of records at once.

RocketMQ's BODYCRC covers the body only: a flipped byte in the header goes unseen by the
CRC. Each rule below flags a value no RocketMQ version writes (the sources are named in
docs/audit.md §3, with each kind's severity and why):

* ``bad_reconsume_times``: RECONSUMETIMES negative (the broker only ever counts up from 0);
* ``bad_prepared_offset``: PREPAREDTRANSACTIONOFFSET non-zero on a record that is neither
  a transaction's COMMIT/ROLLBACK record nor a half message (RMQ_SYS_TRANS_HALF_TOPIC, whose
  renewed copies carry it), or, where allowed, negative or not before the record itself;
* ``bad_sysflag``: bits above the compression type (no version defines them), a compression
  type 4-7, a compression type without the COMPRESSED bit, or a zlib-compressed body (type
  0 or ZLIB) whose first two bytes are no zlib header;
* ``bad_host``: a born or store host port outside 0-65535, or an IPv6 host (SYSFLAG bit)
  holding an IPv4-mapped or all-zero address (Java hands those over as IPv4 addresses,
  so no broker writes them with the IPv6 bit);
* ``bad_born_timestamp``: born timestamp <= 0; ``born_timestamp_skew`` (warning): born
  after the store time by more than :data:`CLOCK_SKEW_MS` (a client clock ahead) or before
  it by more than :data:`MAX_BORN_AGE_MS` (retries and timers keep the first born time);
* ``store_time_outlier``: a store timestamp above both neighbours' (or below both) by more
  than :data:`CLOCK_SKEW_MS`: one record's time, not the broker's clock, is off. A COMMIT or
  ROLLBACK record carries its half message's store time, so it may sit below both. Chunk
  and range edges are judged too (:class:`StoreTimes`, :func:`edge_outliers`).

Everything is numpy over the chunk's columns; only records with a finding are visited
one by one (to build the finding).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import numpy as np

from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt

if TYPE_CHECKING:
    from numpy.typing import NDArray

CLOCK_SKEW_MS: Final = 10 * 60 * 1000
"""How far a born time may run ahead of the store time (client clocks) and how far one
store time may stand out from both its neighbours (the put path takes the time before
its lock in 5.x, so neighbours may be a little out of order)."""
MAX_BORN_AGE_MS: Final = 30 * 86_400_000
"""How long before its store time a record may have been born (retries keep the born
time: 16 retries up to 2 h apart; 5.x timers delay up to 3 days by default)."""
HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
DEFINED_SYSFLAG_BITS: Final = 0x7FF
"""Bits 0-10: COMPRESSED, MULTI_TAGS, transaction type (2), IPv6 born/store host,
NEED_UNWRAP, INNER_BATCH, compression type (3) (MessageSysFlag, RocketMQ 5.3.3)."""
COMPRESSION_SHIFT: Final = 8
COMPRESSION_ZLIB: Final = 3
"""Compression type field values: 0 (legacy: zlib), 1 LZ4, 2 ZSTD, 3 ZLIB; 4-7 undefined."""

Hit = tuple[int, str, str]
"""(position in the file, kind, detail)."""


def header_findings(
    view: memoryview, arr: bulk.RecordArrays, base: int, times: StoreTimes
) -> list[Hit]:
    """The findings of every rule of the module doc for the records ``arr`` read from
    ``view`` (a segment whose first byte is log offset ``base``); ``times`` judges the
    store times of the range's chunks in turn (:class:`StoreTimes`)."""
    out: list[Hit] = []
    pos = arr.position
    sf = arr.sys_flag
    out += _reconsume(view, arr)
    out += _prepared(view, arr, base)
    out += _sysflag(view, arr)
    out += _hosts(view, arr)
    born, ts = arr.born_timestamp, arr.store_timestamp
    for i in np.flatnonzero(born <= 0).tolist():
        out.append((int(pos[i]), "bad_born_timestamp", f"born timestamp {born[i]}"))
    skew = (born > 0) & ((born - ts > CLOCK_SKEW_MS) | (ts - born > MAX_BORN_AGE_MS))
    for i in np.flatnonzero(skew).tolist():
        out.append((int(pos[i]), "born_timestamp_skew",
                    f"born timestamp {born[i]}, stored at {ts[i]}"))  # fmt: skip
    tx = sf & fmt.TRANSACTION_MASK
    out += times.judge(pos, ts, tx >= fmt.TRANSACTION_COMMIT_TYPE)
    return out


def _reconsume(view: memoryview, arr: bulk.RecordArrays) -> list[Hit]:
    at = bulk.field_position(arr, bulk.HeaderField.RECONSUME_TIMES)
    v = bulk.read_ints(view, at, 4)
    return [
        (int(arr.position[i]), "bad_reconsume_times", f"RECONSUMETIMES {v[i]}")
        for i in np.flatnonzero(v < 0).tolist()
    ]


def _prepared(view: memoryview, arr: bulk.RecordArrays, base: int) -> list[Hit]:
    at = bulk.field_position(arr, bulk.HeaderField.PREPARED_TRANSACTION_OFFSET)
    v = bulk.read_ints(view, at, 8)
    if not v.any():
        return []
    tx = arr.sys_flag & fmt.TRANSACTION_MASK
    allowed = tx >= fmt.TRANSACTION_COMMIT_TYPE
    if HALF_TOPIC in arr.topics:
        allowed |= arr.topic_id == arr.topics.index(HALF_TOPIC)
    own = arr.position + base
    bad = np.where(allowed, (v < 0) | (v >= own), v != 0)
    return [
        (int(arr.position[i]), "bad_prepared_offset",
         f"PREPAREDTRANSACTIONOFFSET {v[i]} on a record of transaction type"
         f" {int(tx[i]) >> 2} at log offset {own[i]}")
        for i in np.flatnonzero(bad).tolist()
    ]  # fmt: skip


def _sysflag(view: memoryview, arr: bulk.RecordArrays) -> list[Hit]:
    sf = arr.sys_flag
    ctype = (sf >> COMPRESSION_SHIFT) & 0x7
    compressed = (sf & fmt.COMPRESSED_FLAG) != 0
    bad = ((sf & ~DEFINED_SYSFLAG_BITS) != 0) | (ctype > COMPRESSION_ZLIB)
    bad |= (ctype != 0) & ~compressed
    zlib = compressed & ((ctype == 0) | (ctype == COMPRESSION_ZLIB)) & ~bad
    if zlib.any():
        idx = np.flatnonzero(zlib)
        body, n = arr.body_pos[idx], arr.body_len[idx]
        head = bulk.read_ints(view, np.minimum(body, len(view) - 2), 2) & 0xFFFF
        cmf = head >> 8
        ok = (n >= 2) & ((cmf & 0x0F) == 8) & (head % 31 == 0)
        bad[idx[~ok]] = True
    return [
        (int(arr.position[i]), "bad_sysflag", f"SYSFLAG {sf[i]:#x}" + _why(int(sf[i])))
        for i in np.flatnonzero(bad).tolist()
    ]


def _why(sf: int) -> str:
    ctype = (sf >> COMPRESSION_SHIFT) & 0x7
    if sf & ~DEFINED_SYSFLAG_BITS:
        return f": bits {sf & ~DEFINED_SYSFLAG_BITS:#x} are defined by no RocketMQ version"
    if ctype > COMPRESSION_ZLIB:
        return f": compression type {ctype} is undefined"
    if ctype and not sf & fmt.COMPRESSED_FLAG:
        return f": compression type {ctype} without the COMPRESSED bit"
    return ": COMPRESSED (zlib) but the body does not start with a zlib header"


def _hosts(view: memoryview, arr: bulk.RecordArrays) -> list[Hit]:
    out: list[Hit] = []
    for field, v6_flag, name in (
        (bulk.HeaderField.BORN_HOST, fmt.BORNHOST_V6_FLAG, "born"),
        (bulk.HeaderField.STORE_HOST, fmt.STOREHOST_V6_FLAG, "store"),
    ):
        at = bulk.field_position(arr, field)
        v6 = (arr.sys_flag & v6_flag) != 0
        port = bulk.read_ints(view, at + np.where(v6, 16, 4), 4)
        bad = (port < 0) | (port > 0xFFFF)
        for i in np.flatnonzero(bad).tolist():
            out.append((int(arr.position[i]), "bad_host", f"{name} host port {port[i]}"))
        for i in np.flatnonzero(v6 & ~bad).tolist():
            a = int(at[i])
            ip = bytes(view[a : a + 16])
            if ip[:10] == bytes(10) and ip[10:12] in (b"\xff\xff", b"\0\0"):
                out.append((int(arr.position[i]), "bad_host",
                            f"{name} host {ip.hex()} is IPv4 under the IPv6 bit"))  # fmt: skip
    return out


Edge = tuple[int, int, bool]
"""A record at a range's edge: (position in the file, store timestamp, carries an earlier
record's time)."""
EDGE_RECORDS: Final = 3
"""Records kept from each end of a range: the first and last are judged by the driver,
which needs their neighbours, and at the log's ends the neighbour's other neighbour."""


class StoreTimes:
    """``store_time_outlier`` over the chunks of one range, fed in log order.

    A record is judged when both its neighbours are known: a chunk's last record waits
    for the next chunk's first, so no chunk edge goes unjudged. The range's first and
    last :data:`EDGE_RECORDS` records are kept (:meth:`edges`) for the driver, which
    judges each range's first and last record against the neighbouring ranges
    (:func:`edge_outliers`)."""

    __slots__ = ("_head", "_tail")

    def __init__(self) -> None:
        self._head: list[Edge] = []
        self._tail: list[Edge] = []

    def judge(self, pos: NDArray[Any], ts: NDArray[Any], carried: NDArray[Any]) -> list[Hit]:
        """The outliers among the records before this chunk's last (this chunk's
        records, in log order: position, store time, carries an earlier time)."""
        if ts.size == 0:
            return []
        held = self._tail[-2:]  # the last record seen is not judged yet; its left one is
        new = list(zip(pos.tolist(), ts.tolist(), carried.tolist(), strict=True))
        if len(self._head) < EDGE_RECORDS:
            self._head += new[: EDGE_RECORDS - len(self._head)]
        self._tail = (self._tail + new[-EDGE_RECORDS:])[-EDGE_RECORDS:]
        if held:
            p, t, c = zip(*held, strict=True)
            pos, ts = np.r_[p, pos], np.r_[t, ts]
            carried = np.r_[np.asarray(c, np.bool_), carried]
        return _outliers(pos, ts, carried)

    def edges(self) -> tuple[Edge, ...]:
        """The range's first and last :data:`EDGE_RECORDS` records, each once, in order."""
        seen = {e[0] for e in self._head}
        return (*self._head, *(e for e in self._tail if e[0] not in seen))


def _outliers(pos: NDArray[Any], ts: NDArray[Any], carried: NDArray[Any]) -> list[Hit]:
    """Records whose store time stands out from both neighbours, among all but the
    first and last (``carried``: records that carry an earlier record's time, exempt
    from standing out below)."""
    if ts.size < 3:
        return []
    left, mid, right = ts[:-2], ts[1:-1], ts[2:]
    high = mid - np.maximum(left, right) > CLOCK_SKEW_MS
    low = ~carried[1:-1] & (np.minimum(left, right) - mid > CLOCK_SKEW_MS)
    return [
        (int(pos[i + 1]), "store_time_outlier",
         f"store timestamp {mid[i]} between neighbours stored at {left[i]} and {right[i]}")
        for i in np.flatnonzero(high | low).tolist()
    ]  # fmt: skip


def edge_outliers(ranges: list[tuple[str, tuple[Edge, ...]]]) -> list[tuple[str, Hit]]:
    """``store_time_outlier`` for the first and last record of each range, from the
    ranges' :meth:`StoreTimes.edges` in log order (file name, edges; ranges without
    records left out): a range's first record sits between the previous range's last
    and its own second, its last between its own second-to-last and the next range's
    first. The log's first (and last) record has one neighbour: it stands out when it
    is more than the clock skew from that neighbour while the neighbour agrees with its
    own other neighbour (else the neighbour is the one to doubt)."""
    seq: list[tuple[str, Edge]] = []
    judged: list[int] = []
    for name, edges in ranges:
        if not edges:
            continue
        judged.append(len(seq))
        seq += [(name, e) for e in edges]
        judged.append(len(seq) - 1)
    out: list[tuple[str, Hit]] = []
    last = len(seq) - 1
    for i in sorted(set(judged)):
        name, (at, ts, carried) = seq[i]
        if 0 < i < last:
            left, right = seq[i - 1][1][1], seq[i + 1][1][1]
            high = ts - max(left, right) > CLOCK_SKEW_MS
            low = not carried and min(left, right) - ts > CLOCK_SKEW_MS
            detail = f"store timestamp {ts} between neighbours stored at {left} and {right}"
        elif last >= 2:
            step = 1 if i == 0 else -1
            near, far = seq[i + step][1][1], seq[i + 2 * step][1][1]
            agree = abs(near - far) <= CLOCK_SKEW_MS
            high = agree and ts - near > CLOCK_SKEW_MS
            low = agree and not carried and near - ts > CLOCK_SKEW_MS
            end = "first" if i == 0 else "last"
            detail = (f"store timestamp {ts} of the log's {end} record, its neighbour"
                      f" stored at {near} and that one's other neighbour at {far}")  # fmt: skip
        else:
            continue
        if high or low:
            out.append((name, (at, "store_time_outlier", detail)))
    return out
