"""Index files against the CommitLog: the audit's ``index`` check.

Every ``index/*`` file is read with the project's codec (``mqstore.index.format``: header,
slots, entries) by one of the audit's segment scan tasks (file k by range k modulo the
range count: no job of its own), which checks the file on its own:

* ``index_header``: the file size does not match the index geometry, ``indexCount``
  outside [1, indexNum], ``hashSlotCount`` not the number of used slots, begin/end
  physical offsets not those of the first/last entry, or a file starting before the
  previous one ended;
* ``index_bad_chain``: a slot or a previous-entry link pointing outside the file's used
  entries or forward, or at an entry of another slot.

Its entries (number, key hash, physical offset, time diff) are checked by the audit's
segment scan itself, with no second parse and no join: each scan task reads the entries
whose physical offset falls in its range (:class:`IndexPlan`) and looks them up with
``searchsorted`` in its records' sorted offsets, whose index keys (``topic#UNIQ_KEY`` and
``topic#k`` per KEYS token) the bulk scanner hashed in the same pass
(:mod:`mqstore.commitlog.bulk`); only findings leave the task:

* ``index_dangling``: the offset is not the start of a record (entries below the
  CommitLog's first offset point at expired data and are not checked);
* ``index_wrong_key``: the key hash is none of that record's index keys;
* ``index_time``: the time diff is not ``mqstore.index.format.time_diff_seconds`` of the
  record's store timestamp against the header's begin (for entry 1, against the begin
  the file was created with: the previous file's end time; not checked for entry 1 of
  the oldest file, whose predecessor may have expired).

Entries that point past a torn tail are reported once per file and range, as part of
the ``torn_tail`` warning (recovery drops those records; the dispatcher re-indexes);
every other kind is capped at ``MAX_PER_KIND`` per file and range, with a count.

Geometry (slots per file, entries per file) is not stored in the files: it is given
(``--index-slots``/``--index-num``), else the StoreConfig defaults when the size
matches, else inferred from a file with entries (:func:`infer_geometry`).
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mqstore.commitlog import dispatch_rule as rule
from mqstore.index import format as ifmt
from mqstore.tools.spark._indexchain import Geometry as Geometry  # noqa: PLC0414 (re-export)
from mqstore.tools.spark._indexchain import _chain_findings
from mqstore.tools.spark.byterange import ByteRange
from mqstore.tools.spark.reader import open_mapped
from mqstore.tools.spark.report import Finding
from mqstore.tools.spark.segscan import (
    MAX_PER_KIND,
    Buffer,
    RecordColumns,
    Row,
    RowType,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from mqstore.tools.spark.layout import StoreLayout

FILE_SCHEMA: Final = "path string, rel string, prev_end_ts long, slots int, num int"


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


def check_file(buf: Buffer, rel: str, g: Geometry, *, live: bool = False) -> list[Finding]:
    """Header and chain checks of one file, vectorised with numpy over its entries read
    in place (no view of ``buf`` outlives the call). ``live``: the file a running broker
    is appending to, whose header fields and slot trail each new entry by a few writes
    (entry, slot, then hashSlotCount, indexCount, endPhyOffset): a slot pointing at the
    entry just past indexCount, one slot more than hashSlotCount and an endPhyOffset
    not yet moved are in flight, not damage."""
    import numpy as np

    if len(buf) != g.file_size:
        detail = f"{len(buf)} bytes, not {g.file_size} ({g.slots} slots, {g.num} entries)"
        return [Finding(rel, 0, "index_header", detail)]
    h = ifmt.read_header(buf)
    count = h.index_count if h.index_count > 0 else 1
    if count > g.num:
        detail = f"indexCount {h.index_count} > {g.num} entries"
        return [Finding(rel, 36, "index_header", detail)]
    slot_dt = ifmt.SLOT.format[0] + _NP_CODES[ifmt.SLOT.format[1:]]
    slots = np.frombuffer(buf, slot_dt, g.slots, ifmt.HEADER_SIZE).astype(np.int64)
    ents = np.frombuffer(buf, _entry_dtype(), count - 1, ifmt.entry_position(g.slots, 1))
    out: list[Finding] = []
    if live:
        slots[slots == count] = 0  # the entry being added: its header update trails
    used = np.flatnonzero(slots)
    if used.size != h.hash_slot_count and not (live and used.size + 1 >= h.hash_slot_count):
        detail = f"hashSlotCount {h.hash_slot_count}, {used.size} slots in use"
        out.append(Finding(rel, 32, "index_header", detail))
    if ents.size:
        if h.begin_phy_offset != ents["phy_offset"][0]:
            detail = f"beginPhyOffset {h.begin_phy_offset}, entry 1 at {ents['phy_offset'][0]}"
            out.append(Finding(rel, 16, "index_header", detail))
        if h.end_phy_offset != ents["phy_offset"][-1] and not live:
            detail = f"endPhyOffset {h.end_phy_offset}, last entry at {ents['phy_offset'][-1]}"
            out.append(Finding(rel, 24, "index_header", detail))
    chain = _chain_findings(rel, g, count, slots, used, ents, live=live)
    del ents  # the view must go before the mapping closes
    return out + chain


@dataclass(frozen=True, slots=True)
class IndexFileInfo:
    """What a scan task needs to check the entries of one index file: ``slices`` maps a
    range's territory ``(lo, hi)`` to the entry indices ``[a, b)`` (entry ``a + 1`` is
    the first) that can point into it; empty when the file's physical offsets are not
    in order, and then every entry is read."""

    path: str
    rel: str
    count: int
    begin_ts: int
    prev_end_ts: int
    slices: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    begin_phy: int = 0
    """The header's beginPhyOffset: an entry below the log's first offset is expired
    (not checked) only when the file began there too."""


@dataclass(frozen=True, slots=True)
class IndexPlan:
    """The index files and, per segment range, the physical offsets whose entries its
    scan task checks: ``[lo, hi)`` from its first offset to the next range's (the first
    range also takes every lower offset, the last every higher one), so each entry is
    checked once, by the task that holds the records it should point at."""

    files: tuple[IndexFileInfo, ...]
    geometry: Geometry
    min_offset: int
    territory: dict[tuple[str, int], tuple[int, int]]
    file_checks: dict[tuple[str, int], tuple[tuple[str, str], ...]]
    """Per range, the index files (path, name) whose header and chains its task checks:
    file k goes to range k modulo the range count, so no extra job is needed."""
    covered: tuple[int, int] = (0, -1)
    """Log offsets ``[lo, hi]`` the index files cover (the oldest file's first entry to
    the newest's last): every keyed record there must have its entries."""
    cut: int | None = None
    """A live store's cut (tools.spark.livecut): entries at or past it are in flight."""
    newest: str = ""
    """Path of the newest index file: with ``cut``, the one a broker may be writing."""

    def _covered(self) -> tuple[int, int]:
        """``covered`` as a half-open range: a live store's last indexed record may
        still be getting its other keys, so it is left out."""
        lo, hi = self.covered
        return (lo, hi) if self.cut is not None else (lo, hi + 1)

    def check_range(self, rng: ByteRange, cols: RecordColumns, rows: list[Row]) -> list[Row]:
        """Findings for the entries of this range's territory against its records
        (``rows``: the scan's findings so far, for the torn tail), then the header and
        chain findings of the index files assigned to this range."""
        lo, hi = self.territory[(rng.path, rng.start)]
        torn = [r.offset for r in rows if r.kind == "torn_tail" and r.file == rng.name]
        cut = rng.base_offset + min(torn) if torn else None
        recs = _RangeKeys.of(cols)
        out: list[Row] = []
        seen: list[tuple[NDArray[Any], NDArray[Any]]] = []
        for info in self.files:
            out += _check_entries(info, self, recs, (lo, hi), seen, cut)
        out += _missing(recs, seen, self._covered(), rng)
        for path, rel in self.file_checks.get((rng.path, rng.start), ()):
            live = self.cut is not None and path == self.newest
            with open_mapped(path) as data:
                found = check_file(data, rel, self.geometry, live=live)
            out += [
                Row(RowType.FINDING.value, f.file, f.offset, kind=f.kind, detail=f.detail)
                for f in found
            ]
        return out


def plan(
    layout: StoreLayout,
    ranges: list[ByteRange],
    geometry: Geometry,
    files: list[Path],
    cut: int | None = None,
) -> IndexPlan:
    """The :class:`IndexPlan` of ``files`` (those whose size and count fit ``geometry``;
    the file check reports the others) over ``ranges``; ``cut``: a live store's cut
    (entries at or past it are in flight, not checked)."""
    rows, _ = _file_rows(layout, geometry, files)
    starts = sorted((r.base_offset + r.start, r.path, r.start) for r in ranges)
    territory: dict[tuple[str, int], tuple[int, int]] = {}
    for i, (_, path, start) in enumerate(starts):
        lo = starts[i][0] if i else -(1 << 63)
        hi = starts[i + 1][0] if i + 1 < len(starts) else 1 << 63
        territory[(path, start)] = (lo, hi)
    infos = []
    covered = (1 << 63, -1)
    for path, rel, prev_end, _s, _n in rows:
        if Path(path).stat().st_size != geometry.file_size:
            continue
        with open_mapped(path) as mm:
            h = ifmt.read_header(mm)
            count = h.index_count if h.index_count > 0 else 1
            if 1 < count <= geometry.num:
                cuts = entry_slices(mm, count - 1, geometry, sorted(territory.values()))
                infos.append(
                    IndexFileInfo(
                        path, rel, count, h.begin_timestamp, prev_end, cuts, h.begin_phy_offset
                    )
                )
                covered = (min(covered[0], h.begin_phy_offset), max(covered[1], h.end_phy_offset))
    checks: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for k, (path, rel, *_rest) in enumerate(rows):
        _, rpath, rstart = starts[k % len(starts)]
        checks.setdefault((rpath, rstart), []).append((path, rel))
    return IndexPlan(
        tuple(infos), geometry, layout.min_offset, territory,
        {key: tuple(v) for key, v in checks.items()}, covered, cut,
        rows[-1][0] if rows else "",
    )  # fmt: skip


def entry_slices(
    buf: Buffer, n: int, g: Geometry, territories: list[tuple[int, int]]
) -> dict[tuple[int, int], tuple[int, int]]:
    """Per territory ``(lo, hi)``, the entries ``[a, b)`` of the ``n`` used ones in
    ``buf`` (an index file) whose physical offsets can lie in it, found by binary search:
    the dispatcher appends entries in log order, so each territory's are one run. Empty
    when the offsets are not in order (a damaged file): its entries are then all read."""
    import numpy as np

    phy = np.frombuffer(buf, _entry_dtype(), n, ifmt.entry_position(g.slots, 1))["phy_offset"]
    if n > 1 and not bool((phy[1:] >= phy[:-1]).all()):
        return {}
    top = (1 << 63) - 1
    bounds = np.array([min(max(t, -1), top) for pair in territories for t in pair], np.int64)
    cut = np.searchsorted(phy.astype(np.int64), bounds).tolist()
    del phy  # the view must go before the mapping closes
    return {t: (cut[2 * i], cut[2 * i + 1]) for i, t in enumerate(territories)}


@dataclass(frozen=True, slots=True)
class _RangeKeys:
    """A range's records sorted by PHYSICALOFFSET, with their store timestamps and
    index key hashes (``hashes[starts[i]:starts[i + 1]]`` of record i; none for
    rolled-back records, which the dispatcher does not index); ``key_record[q]`` is the
    record of key ``q``; ``unique``: no two records have the same offset."""

    offset: NDArray[Any]
    store_ts: NDArray[Any]
    starts: NDArray[Any]
    hashes: NDArray[Any]
    key_record: NDArray[Any]
    unique: bool

    @classmethod
    def of(cls, cols: RecordColumns) -> _RangeKeys:
        import numpy as np

        offs, ts, key_rec, hashes = [], [], [], []
        n = 0
        for part, _ in cols.parts():
            offs.append(part.physical_offset)
            ts.append(part.store_timestamp)
            rollback = ~rule.keys_mask(part.sys_flag)
            rec, h = part.key_record, part.key_hash
            if rollback.any():  # rare: no copy of every key otherwise
                keep = ~rollback[rec]
                rec, h = rec[keep], h[keep]
            key_rec.append(rec + n)
            hashes.append(h)
            n += len(part)
        if not offs:
            z = np.zeros(0, np.int64)
            return cls(z, z, np.zeros(1, np.int64), z, z, True)
        off, t, kr = np.concatenate(offs), np.concatenate(ts), np.concatenate(key_rec)
        kh = np.concatenate(hashes)
        if off.size > 1 and bool((off[1:] < off[:-1]).any()):  # log order is sorted already
            order = np.argsort(off, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            kr = rank[kr]
            korder = np.argsort(kr, kind="stable")
            off, t, kr, kh = off[order], t[order], kr[korder], kh[korder]
        unique = off.size < 2 or bool((off[1:] != off[:-1]).all())
        starts = np.zeros(off.size + 1, np.int64)
        np.cumsum(np.bincount(kr, minlength=off.size), out=starts[1:])  # kr is sorted
        return cls(off, t, starts, kh, kr, unique)

    def in_key_order(self, phy: NDArray[Any], h: NDArray[Any]) -> NDArray[Any] | None:
        """The record of each entry when the entries are a run of this range's keys in
        their order (as the dispatcher writes them: record after record, UNIQ_KEY then
        each KEYS token) and point at those keys' records, which then hold them; else
        None (the entries are then looked up one by one)."""
        import numpy as np

        m, n = phy.size, self.offset.size
        if not (m and n and self.unique):
            return None
        r = int(np.searchsorted(self.offset, phy[0]))
        if r == n or self.offset[r] != phy[0]:
            return None
        a = int(self.starts[r])
        hit = np.flatnonzero(self.hashes[a : self.starts[r + 1]] == h[0])
        q = a + int(hit[0]) if hit.size else self.hashes.size
        if q + m > self.hashes.size or not np.array_equal(self.hashes[q : q + m], h):
            return None
        j = self.key_record[q : q + m]
        return j if np.array_equal(self.offset[j], phy) else None


def _entries(
    info: IndexFileInfo, g: Geometry, first: int, stop: int
) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """(physical offset, key hash, time diff) of entries ``first + 1 .. stop`` of an index
    file, as native int64, int32 and int64 columns read straight from the mapping
    (closed here)."""
    import numpy as np

    with open_mapped(info.path) as mm:
        at = ifmt.entry_position(g.slots, first + 1)
        ents = np.frombuffer(mm, _entry_dtype(), stop - first, at)
        phy, diff = (ents[f].astype(np.int64) for f in ("phy_offset", "time_diff"))
        h = ents["key_hash"].astype(np.int32)  # as the scan's key hashes
        del ents  # the view must go before the mapping closes
    return phy, h, diff


def _check_entries(
    info: IndexFileInfo,
    plan: IndexPlan,
    recs: _RangeKeys,
    territory: tuple[int, int],
    seen: list[tuple[NDArray[Any], NDArray[Any]]],
    cut: int | None,
) -> list[Row]:
    """index_dangling / index_wrong_key / index_time for the entries of one file that
    point into the territory ``[lo, hi)``, but expired ones (below the log's first
    offset in a file that began there: a negative offset, or one below the file's own
    begin, is damage), with numpy (searchsorted on the records' offsets; only the
    territory's slice of an ordered file is read). Entries past a torn tail at ``cut``
    are one warning, not one error each; each kind is capped at MAX_PER_KIND per file
    and range. The (offset, key hash) of the entries checked are appended to ``seen``."""
    import numpy as np

    lo, hi = territory
    first, stop = info.slices.get(territory, (0, info.count - 1))
    if stop <= first:
        return []
    phy, h, diff = _entries(info, plan.geometry, first, stop)
    expired = (phy >= info.begin_phy) & (phy >= 0) & (phy < plan.min_offset)
    inside = (phy >= lo) & (phy < hi) & ~expired
    if plan.cut is not None:  # a live store: entries past the cut are in flight
        inside &= phy < plan.cut
    sel: NDArray[Any] | None = None  # a slice of an ordered file: entry i is first + 1 + i
    if not inside.all():
        sel = np.flatnonzero(inside)
        if sel.size == 0:
            return []
        phy, h, diff = phy[sel], h[sel], diff[sel]
    seen.append((phy, h))
    n = recs.offset.size
    run = recs.in_key_order(phy, h)
    if run is not None:  # every entry found, with one of its record's keys
        j = run
        found = key_ok = np.ones(phy.size, np.bool_)
    else:
        j = np.minimum(np.searchsorted(recs.offset, phy), max(n - 1, 0))
        found = (recs.offset[j] == phy) if n else np.zeros(phy.size, np.bool_)
        key_ok = _key_ok(recs, j, found, h)
    ts = recs.store_ts[j] if n else np.zeros(phy.size, np.int64)
    has_one = first == 0 and (sel is None or int(sel[0]) == 0)
    late = _late(info, has_one, ts, diff) & found & key_ok
    out = _Rows(info.rel)
    dangling = ~found
    if cut is not None:
        past = dangling & (phy >= cut)
        dangling &= ~past
        if past.any():
            out.one(0, "torn_tail", f"{int(past.sum())} index entries point into the torn"
                    f" tail at CommitLog offset {cut} (recovery drops them)")  # fmt: skip

    def entry(i: int) -> int:
        return first + 1 + (i if sel is None else int(sel[i]))

    g = plan.geometry
    for i in np.flatnonzero(dangling).tolist():
        out.add(g, entry(i), "index_dangling",
                f"entry {entry(i)} -> {phy[i]}: no record starts there")  # fmt: skip
    wrong = found & ~key_ok
    for i in np.flatnonzero(wrong).tolist():
        keys = recs.hashes[recs.starts[j[i]] : recs.starts[j[i] + 1]].tolist()
        out.add(g, entry(i), "index_wrong_key",
                f"entry {entry(i)} -> {phy[i]}: key hash {h[i]} is none of the record's"
                f" keys {keys}")  # fmt: skip
    for i in np.flatnonzero(late).tolist():
        want = _want(info, entry(i), int(ts[i]))
        out.add(g, entry(i), "index_time",
                f"entry {entry(i)} -> {phy[i]}: time diff {diff[i]} s, record stored at"
                f" {ts[i]} gives {want} s")  # fmt: skip
    return out.done()


def _want(info: IndexFileInfo, entry: int, ts: int) -> int:
    """The time diff of entry number ``entry`` for a record stored at ``ts``: whole
    seconds since the file's begin (for entry 1, the previous file's end), truncated and
    clipped to [0, INT_MAX]; 0 when that begin is not positive."""
    begin = info.prev_end_ts if entry == 1 else info.begin_ts
    return min(max((ts - begin) // 1000, 0), ifmt.INT_MAX) if begin > 0 else 0


def _late(info: IndexFileInfo, has_one: bool, ts: NDArray[Any], diff: NDArray[Any]) -> Any:
    """Whether each entry's time diff is not :func:`_want` of its record's ``ts``
    (``has_one``: the first is entry 1); entries whose begin is negative (unknown) are
    not checked. One begin for all entries but entry 1, which is checked on its own."""
    import numpy as np

    b = info.begin_ts
    if b < 0:
        late = np.zeros(diff.size, np.bool_)
    elif b == 0:
        late = diff != 0
    else:
        # whole seconds since the begin, truncated: a negative difference clips to 0 either way
        want = ts - b
        want //= 1000
        late = diff != np.clip(want, 0, ifmt.INT_MAX, out=want)
    if has_one:  # entry 1: against the previous file's end
        late[0] = info.prev_end_ts >= 0 and int(diff[0]) != _want(info, 1, int(ts[0]))
    return late


_FEW_KEYS: Final = 4
"""Records with at most this many index keys are matched key by key (a pass each)."""


def _key_ok(recs: _RangeKeys, j: NDArray[Any], found: NDArray[Any], h: NDArray[Any]) -> Any:
    """Whether each entry's key hash ``h`` is one of the keys of record ``j`` (where
    ``found``): one vectorised pass per key position when records have few keys (the
    dispatcher's UNIQ_KEY and a KEYS token or two), else every (entry, key) pair."""
    import numpy as np

    first = recs.starts[j]
    counts = (recs.starts[j + 1] - first) * found
    most = int(counts.max()) if counts.size else 0
    if most <= _FEW_KEYS:
        ok = np.zeros(h.size, np.bool_)
        top = max(recs.hashes.size - 1, 0)
        for k in range(most):
            ok |= (counts > k) & (recs.hashes[np.minimum(first + k, top)] == h)
        return ok
    rep = np.repeat(np.arange(h.size), counts)
    kpos = np.repeat(first - np.cumsum(counts) + counts, counts) + np.arange(rep.size)
    hit = recs.hashes[kpos].astype(np.int64) == h[rep]
    return np.bincount(rep[hit], minlength=h.size) > 0


class _Rows:
    """Finding rows of one index file, capped per kind (MAX_PER_KIND) with a count."""

    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.rows: list[Row] = []
        self.counts: dict[str, int] = {}

    def one(self, pos: int, kind: str, detail: str) -> None:
        self.rows.append(Row(RowType.FINDING.value, self.rel, pos, kind=kind, detail=detail))

    def add(self, g: Geometry, entry: int, kind: str, detail: str) -> None:
        n = self.counts[kind] = self.counts.get(kind, 0) + 1
        if n <= MAX_PER_KIND:
            self.one(ifmt.entry_position(g.slots, entry), kind, detail)

    def done(self) -> list[Row]:
        for kind, n in sorted(self.counts.items()):
            if n > MAX_PER_KIND:
                self.one(0, kind, f"{n - MAX_PER_KIND} more {kind} findings not listed")
        return self.rows


def order_findings(layout: StoreLayout, geometry: Geometry, files: list[Path]) -> list[Finding]:
    """Findings of the index files' order (a file starting before the previous one
    ended), from their headers on the driver; everything else is checked in the scan
    tasks (:class:`IndexPlan`)."""
    return _file_rows(layout, geometry, files)[1]


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


def _missing(
    recs: _RangeKeys,
    seen: list[tuple[NDArray[Any], NDArray[Any]]],
    covered: tuple[int, int],
    rng: ByteRange,
) -> list[Row]:
    """``index_missing`` for each index key of a record in ``covered`` (half-open log
    offsets) with no entry among ``seen`` (every entry of every file that points into
    this range's territory): (offset, key hash) pairs compared as one int64 each,
    offset relative to the range's first record (a range lies inside one segment)."""
    import numpy as np

    if recs.hashes.size == 0 or covered[1] <= covered[0]:
        return []
    k_off = recs.offset[recs.key_record]
    keep = (k_off >= covered[0]) & (k_off < covered[1])
    k_off, k_h = k_off[keep], recs.hashes[keep]
    if k_off.size == 0:
        return []
    e_off = np.concatenate([p for p, _ in seen]) if seen else np.zeros(0, np.int64)
    e_h = np.concatenate([h for _, h in seen]) if seen else np.zeros(0, np.int32)
    if np.array_equal(e_off, k_off) and np.array_equal(e_h, k_h):
        return []  # the dispatcher's order: every key, in log order, once
    base = int(recs.offset[0])
    if int(recs.offset[-1]) - base >= 1 << 31:  # not one segment: compare pairs in Python
        have = set(zip(e_off.tolist(), e_h.tolist(), strict=True))
        miss = np.array([(o, x) not in have for o, x in zip(k_off.tolist(), k_h.tolist(),
                                                             strict=True)], np.bool_)  # fmt: skip
    else:
        near = (e_off >= base) & (e_off <= int(recs.offset[-1]))

        def pair(off: NDArray[Any], h: NDArray[Any]) -> NDArray[Any]:
            out: NDArray[Any] = ((off - base) << 32) | (h.astype(np.int64) & 0xFFFFFFFF)
            return out

        miss = ~np.isin(pair(k_off, k_h), pair(e_off[near], e_h[near]))
    rows: list[Row] = []
    idx = np.flatnonzero(miss)
    for i in idx[:MAX_PER_KIND].tolist():
        at = int(k_off[i]) - rng.base_offset
        rows.append(Row(RowType.FINDING.value, rng.name, at, kind="index_missing",
                        detail=f"record at log offset {k_off[i]}: index key hash {k_h[i]}"
                        " (topic#UNIQ_KEY or topic#KEYS token) has no index entry"))  # fmt: skip
    if idx.size > MAX_PER_KIND:
        more = idx.size - MAX_PER_KIND
        rows.append(Row(RowType.FINDING.value, rng.name, 0, kind="index_missing",
                        detail=f"{more} more index_missing findings not listed"))  # fmt: skip
    return rows
