"""Index files against the CommitLog: the audit's ``index`` check.

Every ``index/*`` file is read with the project's codec (``mqstore.index.format``: header,
slots, entries) in one Spark task per file, which checks the file on its own:

* ``index_header``: the file size does not match the index geometry, ``indexCount``
  outside [1, indexNum], ``hashSlotCount`` not the number of used slots, begin/end
  physical offsets not those of the first/last entry, or a file starting before the
  previous one ended;
* ``index_bad_chain``: a slot or a previous-entry link pointing outside the file's used
  entries or forward, or at an entry of another slot.

Its entries (number, key hash, physical offset, time diff) then meet the CommitLog in a
join on the physical offset with a per-record DataFrame (offset, store timestamp,
``java hash`` of each index key ``topic#UNIQ_KEY`` and ``topic#k`` per KEYS token), parsed
in the segment tasks like the rest of the audit; no driver loop over records or entries:

* ``index_dangling``: the offset is not the start of a record (entries below the
  CommitLog's first offset point at expired data and are not checked);
* ``index_wrong_key``: the key hash is none of that record's index keys;
* ``index_time``: the time diff is not ``mqstore.index.format.time_diff_seconds`` of the
  record's store timestamp against the header's begin (for entry 1, against the begin
  the file was created with: the previous file's end time; not checked for entry 1 of
  the oldest file, whose predecessor may have expired).

Geometry (slots per file, entries per file) is not stored in the files: it is given
(``--index-slots``/``--index-num``), else the StoreConfig defaults when the size
matches, else inferred from a file with entries (:func:`infer_geometry`).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mqstore.commitlog import format as fmt
from mqstore.index import format as ifmt
from mqstore.tools.spark._indexchain import _chain_findings
from mqstore.tools.spark.report import Finding
from mqstore.tools.spark.segscan import Buffer, ByteRange, resync

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from mqstore.tools.spark.layout import StoreLayout

FILE_SCHEMA: Final = "path string, rel string, prev_end_ts long, slots int, num int"
ENTRY_SCHEMA: Final = (
    "row_type string, rel string, entry long, key_hash int, phy long, diff int,"
    " begin_ts long, kind string, detail string"
)
KEY_SCHEMA: Final = "offset long, store_ts long, hashes array<int>"
JOIN_SCHEMA: Final = "rel string, entry long, kind string, detail string"


@dataclass(frozen=True, slots=True)
class Geometry:
    """Slots and entries per index file (``max_hash_slot_num``, ``max_index_num``)."""

    slots: int
    num: int

    @property
    def file_size(self) -> int:
        """Bytes of one file."""
        return ifmt.file_size(self.slots, self.num)


def index_files(index_dir: Path | None) -> list[Path]:
    """The index files of ``index_dir`` in name (= creation time) order."""
    if index_dir is None or not index_dir.is_dir():
        return []
    return sorted(
        p
        for p in index_dir.iterdir()
        if len(p.name) == ifmt.NAME_LENGTH and p.name.isdigit() and p.is_file()
    )


def infer_geometry(path: Path) -> Geometry | None:
    """The geometry that fits a file with entries: the slot of the last entry's key hash
    must point at it, that entry must hold the header's end offset and the used slots
    must number hashSlotCount (the smallest slot count that fits wins). None when the
    file has no entries or no geometry fits."""
    import numpy as np

    size = path.stat().st_size
    if size % ifmt.SLOT_SIZE or size < ifmt.HEADER_SIZE:
        return None
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        h = ifmt.read_header(mm)
        last = h.index_count - 1
        if last < 1:
            return None
        rest = size - ifmt.HEADER_SIZE
        slots = np.arange(1, rest // ifmt.SLOT_SIZE + 1, dtype=np.int64)
        room = rest - slots * ifmt.SLOT_SIZE
        ok = (room % ifmt.ENTRY_SIZE == 0) & (room // ifmt.ENTRY_SIZE > last)
        slots = slots[ok]
        pos = ifmt.entry_position(slots, last)
        words = np.frombuffer(mm, dtype=">i4")
        key_hash = words[pos // 4].astype(np.int64)  # keyHash is an entry's first int
        slot_value = words[ifmt.slot_position(key_hash % slots) // 4]
        cands = slots[slot_value == last].tolist()
        found = None
        for s in cands:
            e = ifmt.Entry(*ifmt.ENTRY.unpack_from(mm, ifmt.entry_position(s, last)))
            used = int(np.count_nonzero(words[ifmt.HEADER_SIZE // 4 : ifmt.HEADER_SIZE // 4 + s]))
            if e.phy_offset == h.end_phy_offset and used == h.hash_slot_count:
                found = Geometry(s, (rest - s * ifmt.SLOT_SIZE) // ifmt.ENTRY_SIZE)
                break
        del words
    return found


def resolve_geometry(files: list[Path], slots: int | None, num: int | None) -> Geometry:
    """Given geometry, else the defaults if they fit, else inferred (see module doc)."""
    from mqstore.config import StoreConfig

    d = StoreConfig()
    if slots is not None and num is not None:
        return Geometry(slots, num)
    default = Geometry(slots or d.max_hash_slot_num, num or d.max_index_num)
    if not files or all(p.stat().st_size == default.file_size for p in files):
        return default
    for p in files:
        g = infer_geometry(p)
        if g is not None:
            return g
    return default


# ----------------------------------------------------------------------- file tasks


_NP_CODES: Final = {"i": "i4", "q": "i8"}


def _entry_dtype() -> Any:
    """numpy dtype of one entry, derived from the codec's struct format and field names."""
    import numpy as np

    order, codes = ifmt.ENTRY.format[0], ifmt.ENTRY.format[1:]
    dt = np.dtype(
        [(n, order + _NP_CODES[c]) for n, c in zip(ifmt.Entry._fields, codes, strict=True)]
    )
    assert dt.itemsize == ifmt.ENTRY_SIZE
    return dt


def check_file(buf: Buffer, rel: str, g: Geometry) -> tuple[list[Finding], Any, int]:
    """Header and chain checks of one file, vectorised with numpy; (findings, used
    entries as a structured array (entry n at index n-1), begin timestamp)."""
    import numpy as np

    dt = _entry_dtype()
    none = np.zeros(0, dtype=dt)
    if len(buf) != g.file_size:
        detail = f"{len(buf)} bytes, not {g.file_size} ({g.slots} slots, {g.num} entries)"
        return [Finding(rel, 0, "index_header", detail)], none, 0
    h = ifmt.read_header(buf)
    count = h.index_count if h.index_count > 0 else 1
    if count > g.num:
        detail = f"indexCount {h.index_count} > {g.num} entries"
        return [Finding(rel, 36, "index_header", detail)], none, h.begin_timestamp
    slot_dt = ifmt.SLOT.format[0] + _NP_CODES[ifmt.SLOT.format[1:]]
    slots = np.frombuffer(buf, slot_dt, g.slots, ifmt.HEADER_SIZE).astype(np.int64)
    ents = np.frombuffer(buf, dt, count - 1, ifmt.entry_position(g.slots, 1)).copy()
    out: list[Finding] = []
    used = np.flatnonzero(slots)
    if used.size != h.hash_slot_count:
        detail = f"hashSlotCount {h.hash_slot_count}, {used.size} slots in use"
        out.append(Finding(rel, 32, "index_header", detail))
    if ents.size:
        if h.begin_phy_offset != ents["phy_offset"][0]:
            detail = f"beginPhyOffset {h.begin_phy_offset}, entry 1 at {ents['phy_offset'][0]}"
            out.append(Finding(rel, 16, "index_header", detail))
        if h.end_phy_offset != ents["phy_offset"][-1]:
            detail = f"endPhyOffset {h.end_phy_offset}, last entry at {ents['phy_offset'][-1]}"
            out.append(Finding(rel, 24, "index_header", detail))
    chain = _chain_findings(rel, g, count, slots, used, ents)
    return out + chain, ents, h.begin_timestamp


def _entry_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import numpy as np
    import pyarrow as pa

    names = [c.split()[0] for c in ENTRY_SCHEMA.split(",")]
    for batch in batches:
        for d in batch.to_pylist():
            g = Geometry(d["slots"], d["num"])
            with open(d["path"], "rb") as f:
                size = os.fstat(f.fileno()).st_size
                data: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
                try:
                    found, ents, begin = check_file(data, d["rel"], g)
                finally:
                    if size:
                        data.close()
            if found:
                m = len(found)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(["finding"] * m), pa.array([x.file for x in found]),
                     pa.array([x.offset for x in found], pa.int64()), pa.nulls(m, pa.int32()),
                     pa.nulls(m, pa.int64()), pa.nulls(m, pa.int32()), pa.nulls(m, pa.int64()),
                     pa.array([x.kind for x in found]), pa.array([x.detail for x in found])],
                    names=names,
                )  # fmt: skip
            m = ents.size
            if m:
                begins = np.full(m, begin, dtype=np.int64)
                begins[0] = d["prev_end_ts"]  # entry 1 was timed against the creation begin
                yield pa.RecordBatch.from_arrays(
                    [pa.array(["entry"] * m), pa.array([d["rel"]] * m),
                     pa.array(np.arange(1, m + 1, dtype=np.int64)),
                     pa.array(ents["key_hash"].astype(np.int32)),
                     pa.array(ents["phy_offset"].astype(np.int64)),
                     pa.array(ents["time_diff"].astype(np.int32)), pa.array(begins),
                     pa.nulls(m, pa.string()), pa.nulls(m, pa.string())],
                    names=names,
                )  # fmt: skip


def key_rows(buf: Buffer, rng: ByteRange) -> Iterator[tuple[Any, ...]]:
    """(offset, store timestamp, key hashes) of every record, read like the reput
    service; rolled-back records get no keys (the dispatcher does not index them)."""
    from mqstore.message import (
        PROPERTY_KEYS,
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        string_to_properties,
    )

    with memoryview(buf) as view:
        pos, end = rng.start, len(buf)
        while pos < rng.end:
            r = fmt.scan(view, pos, end, check_crc=False)
            if isinstance(r, fmt.RecordInfo):
                hashes: list[int] = []
                if r.sys_flag & fmt.TRANSACTION_MASK != fmt.TRANSACTION_ROLLBACK_TYPE:
                    props = string_to_properties(r.properties_string)
                    keys = props.get(PROPERTY_KEYS)
                    for k in (props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                              *(keys.split(" ") if keys else ())):  # fmt: skip
                        if k:
                            hashes.append(ifmt.key_hash(ifmt.build_key(r.topic, k)))
                yield (r.physical_offset, r.store_timestamp, hashes)
                pos += r.size
            elif isinstance(r, fmt.EndOfSegment):
                return
            else:
                pos = resync(buf, rng.base_offset, pos + 1, end)
                if pos < 0:
                    return


def _key_batch(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    import pyarrow as pa

    offs, ts, hs = zip(*rows, strict=True)
    return pa.RecordBatch.from_arrays(
        [pa.array(offs, pa.int64()), pa.array(ts, pa.int64()),
         pa.array(hs, pa.list_(pa.int32()))],
        names=["offset", "store_ts", "hashes"],
    )  # fmt: skip


def _check_joined(batches: Iterable[pa.RecordBatch], min_offset: int) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    for batch in batches:
        out: list[tuple[Any, ...]] = []
        for d in batch.to_pylist():
            if d["phy"] < min_offset:
                continue
            at = f"entry {d['entry']} -> {d['phy']}"
            if d["store_ts"] is None:
                out.append((d["rel"], d["entry"], "index_dangling",
                            f"{at}: no record starts there"))  # fmt: skip
            elif d["key_hash"] not in (d["hashes"] or ()):
                out.append((d["rel"], d["entry"], "index_wrong_key",
                            f"{at}: key hash {d['key_hash']} is none of the record's keys"
                            f" {d['hashes']}"))  # fmt: skip
            elif d["begin_ts"] >= 0:
                want = ifmt.time_diff_seconds(d["store_ts"], d["begin_ts"])
                if d["diff"] != want:
                    out.append((d["rel"], d["entry"], "index_time",
                                f"{at}: time diff {d['diff']} s, record stored at"
                                f" {d['store_ts']} gives {want} s"))  # fmt: skip
        if out:
            cols = list(zip(*out, strict=True))
            types = [pa.string(), pa.int64(), pa.string(), pa.string()]
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, t) for c, t in zip(cols, types, strict=True)],
                names=["rel", "entry", "kind", "detail"],
            )


def index_findings(
    spark: SparkSession,
    layout: StoreLayout,
    ranges: list[ByteRange],
    geometry: Geometry,
    files: list[Path],
) -> list[Finding]:
    """Every index finding of the module doc (one task per index file, one join)."""
    from mqstore.tools.spark.reader import map_ranges, ranges_dataframe

    file_rows, found = _file_rows(layout, geometry, files)
    if not file_rows:
        return found
    sc = spark.sparkContext
    fdf = spark.createDataFrame(sc.parallelize(file_rows, len(file_rows)), FILE_SCHEMA)
    rows = fdf.mapInArrow(_entry_rows, ENTRY_SCHEMA).cache()
    try:
        for r in rows.filter("row_type = 'finding'").collect():
            found.append(Finding(r.rel, r.entry, r.kind, r.detail))
        entries = rows.filter("row_type = 'entry'").drop("row_type", "kind", "detail")

        def scan(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return map_ranges(batches, key_rows, _key_batch)

        records = ranges_dataframe(spark, ranges).mapInArrow(scan, KEY_SCHEMA)
        joined = entries.join(records, entries["phy"] == records["offset"], "left")
        min_offset = layout.min_offset

        def check(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return _check_joined(batches, min_offset)

        for r in joined.mapInArrow(check, JOIN_SCHEMA).collect():
            pos = ifmt.entry_position(geometry.slots, r.entry)
            found.append(Finding(r.rel, pos, r.kind, r.detail))
    finally:
        rows.unpersist()
    return found


def _file_rows(
    layout: StoreLayout, geometry: Geometry, files: list[Path]
) -> tuple[list[tuple[str, str, int, int, int]], list[Finding]]:
    """One FILE_SCHEMA row per index file (with the previous file's end timestamp) and
    the findings of the header order checks across files."""
    from mqstore.tools.spark.queues import rel_name

    prev_end = -1  # unknown for the first file listed: older files may have expired
    file_rows = []
    found: list[Finding] = []
    prev_end_phy = None
    for p in files:
        rel = rel_name(layout, str(p))
        file_rows.append((str(p), rel, prev_end, geometry.slots, geometry.num))
        if p.stat().st_size >= ifmt.HEADER_SIZE:
            with open(p, "rb") as f:
                h = ifmt.read_header(f.read(ifmt.HEADER_SIZE))
            if prev_end_phy is not None and h.index_count > 1 and h.begin_phy_offset < prev_end_phy:
                detail = f"beginPhyOffset {h.begin_phy_offset} < previous file's end {prev_end_phy}"
                found.append(Finding(rel, 16, "index_header", detail))
            prev_end, prev_end_phy = h.end_timestamp, h.end_phy_offset
    return file_rows, found
