"""Per topic/queue checks: queue-offset continuity, statistics, ConsumeQueue units against
the CommitLog, in one grouped pass with numpy.

:func:`check_queue` checks one queue from all its records at once, in numpy, against the
queue's own ConsumeQueue files. The audit splits the same checks between its scan tasks
and the driver (:mod:`mqstore.tools.spark.queueparts`, which uses the pieces here) and
uses :func:`check_queues` on records the tasks packed only for the queues the split
cannot settle. No shuffle and no join: a queue's records and units meet once, in numpy.

Rules (docs/format.md §1.5, §3.2; docs/store.md §1.5):

* only dispatchable records (transaction type NOT or COMMIT) own a queue offset and a
  unit; prepared and rolled-back halves are counted as ``not_dispatched``;
* a unit belongs to queue offset ``file base / 20 + index``; when two records share a
  queue offset, the earlier one is the one its unit should name;
* a position with neither a unit nor a record is consistent: a CommitLog gap is
  reported once, as ``queue_gap``. Runs of records without units are one ``cq_missing``
  each, minus the queue offsets a ``cq_truncated`` file already accounts for;
* units below the CommitLog's first offset point at expired data and are not checked.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mqstore.commitlog import dispatch_rule as rule
from mqstore.consumequeue import format as cqfmt
from mqstore.system_topics import SCHEDULE_TOPIC
from mqstore.tools.spark.cqscan import read_units
from mqstore.tools.spark.layout import CqFile, StoreLayout
from mqstore.tools.spark.reader import RECORD_DTYPE, open_mapped
from mqstore.tools.spark.report import Finding, QueueStats

if TYPE_CHECKING:
    from numpy.typing import NDArray

"""Its units carry a delivery time instead of a tag hash (docs/format.md §3.3)."""
CHECK_THREADS: Final = 2
"""Queues checked at once on the driver: numpy releases the GIL in the sorts, searches
and copies that dominate a queue's check, and the job's cores are idle by then."""
MAX_PER_KIND: Final = 10_000
"""Findings kept per kind and queue; beyond it one summary finding says how many more."""


@dataclass(frozen=True, slots=True)
class QueueContext:
    """What every group needs to know about the store (small; shipped with the task)."""

    segment_bases: tuple[int, ...]
    segment_names: tuple[str, ...]
    min_offset: int
    cq_files: dict[tuple[str, int], tuple[CqFile, ...]]
    lost: dict[tuple[str, int], tuple[tuple[int, int], ...]]
    cq_file_size: int = cqfmt.FILE_SIZE  # the store's (StoreLayout.cq_file_size)
    cut: int = 1 << 62
    """A live store's cut (tools.spark.livecut): units at or past it are in flight."""
    packed: frozenset[tuple[str, int]] = frozenset()
    """Queues whose files' units overlap (a file longer than its successor's name
    allows): a queue offset may then have two units, so the scan tasks ship these
    queues' records to the driver (:func:`check_queues`) instead of checking them."""

    @classmethod
    def of(
        cls, layout: StoreLayout, lost: Iterable[tuple[str, int, int, int]], cut: int = 1 << 62
    ) -> QueueContext:
        """From a layout and the ranges truncated CQ files lost (see cqscan.file_findings)."""
        files: dict[tuple[str, int], list[CqFile]] = {}
        for f in layout.cq_files:
            files.setdefault((f.topic, f.queue_id), []).append(f)
        for key in layout.cq_queues:
            files.setdefault(key, [])
        holes: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for t, q, lo, hi in lost:
            holes.setdefault((t, q), []).append((lo, hi))
        return cls(
            tuple(s.base_offset for s in layout.segments),
            tuple(rel_name(layout, s.path) for s in layout.segments),
            layout.min_offset,
            {k: tuple(v) for k, v in files.items()},
            {k: tuple(v) for k, v in holes.items()},
            layout.cq_file_size,
            cut,
            frozenset(k for k, v in files.items() if _overlapping(v)),
        )

    def locate(self, physical_offset: int) -> tuple[str, int]:
        """(segment file, position in it) of a physical offset."""
        i = max(0, bisect.bisect_right(self.segment_bases, physical_offset) - 1)
        return self.segment_names[i], physical_offset - self.segment_bases[i]


def _overlapping(files: list[CqFile]) -> bool:
    """Whether two of a queue's files hold units for one queue offset."""
    spans = sorted((f.base_unit, f.base_unit + f.length // cqfmt.UNIT_SIZE) for f in files)
    return any(b[0] < a[1] for a, b in itertools.pairwise(spans))


def rel_name(layout: StoreLayout, path: str) -> str:
    """``path`` relative to the store root when below it, else as is."""
    try:
        return Path(path).relative_to(layout.root).as_posix()
    except ValueError:
        return path


class _Capped:
    """Findings of one queue with at most MAX_PER_KIND per kind."""

    def __init__(self) -> None:
        self.items: list[Finding] = []
        self.counts: dict[str, int] = {}

    def add(self, file: str, offset: int, kind: str, detail: str) -> None:
        n = self.counts[kind] = self.counts.get(kind, 0) + 1
        if n <= MAX_PER_KIND:
            self.items.append(Finding(file, offset, kind, detail))

    def take(self, items: Iterable[Finding], counts: Iterable[tuple[str, int]]) -> None:
        """Add findings another checker capped, with the counts it kept per kind."""
        sent: dict[str, int] = {}
        for f in items:
            self.add(f.file, f.offset, f.kind, f.detail)
            sent[f.kind] = sent.get(f.kind, 0) + 1
        for kind, n in counts:
            self.counts[kind] = self.counts.get(kind, 0) + n - sent.get(kind, 0)

    def done(self, queue: str) -> list[Finding]:
        for kind, n in self.counts.items():
            if n > MAX_PER_KIND:
                self.items.append(Finding("", 0, kind, f"{queue}: {n - MAX_PER_KIND} more"))
        return self.items


def _runs(values: NDArray[Any]) -> list[tuple[int, int]]:
    """Sorted unique ints as closed runs of consecutive values."""
    import numpy as np

    if values.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(values) != 1)
    starts = np.r_[0, breaks + 1]
    ends = np.r_[breaks, values.size - 1]
    return [(int(values[a]), int(values[b])) for a, b in zip(starts, ends, strict=True)]


def _subtract(lo: int, hi: int, holes: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Closed range [lo, hi] minus half-open ranges ``holes``."""
    parts = [(lo, hi)]
    for h_lo, h_hi in holes:
        nxt: list[tuple[int, int]] = []
        for a, b in parts:
            if b < h_lo or a >= h_hi:
                nxt.append((a, b))
                continue
            if a < h_lo:
                nxt.append((a, h_lo - 1))
            if b >= h_hi:
                nxt.append((h_hi, b))
        parts = nxt
    return parts


def check_queue(
    topic: str, queue_id: int, rec: dict[str, NDArray[Any]], ctx: QueueContext
) -> tuple[list[Finding], QueueStats | None]:
    """Every per-queue check for one topic/queue; ``rec`` holds numpy columns ``offset,
    size, queue_offset, sys_flag, store_ts, tags_code`` of its records (any order)."""
    import numpy as np

    out = _Capped()
    q = f"{topic}/{queue_id}"
    disp = rule.units_mask(rec["sys_flag"])
    stats = None
    if rec["offset"].size:
        qo = rec["queue_offset"][disp]
        stats = QueueStats(
            topic, queue_id, int(disp.sum()), int(qo.min()) if qo.size else -1,
            int(qo.max()) if qo.size else -1, int(rec["size"].sum()),
            int(rec["store_ts"].min()), int(rec["store_ts"].max()), int((~disp).sum()),
        )  # fmt: skip
    d = rec if disp.all() else {k: v[disp] for k, v in rec.items()}
    step = np.diff(d["queue_offset"])
    if not (step > 0).all():  # in log order already (the usual case): no sort, no copy
        order = np.lexsort((d["offset"], d["queue_offset"]))
        d = {k: v[order] for k, v in d.items()}
        step = np.diff(d["queue_offset"])
    _continuity(q, d, ctx, out)
    if (topic, queue_id) in ctx.cq_files:
        u = d
        if not (step != 0).all():
            first = np.r_[True, step != 0]
            u = {k: v[first] for k, v in d.items()}
        _units(topic, queue_id, u, ctx, out)
    return out.done(q), stats


def _continuity(q: str, d: dict[str, NDArray[Any]], ctx: QueueContext, out: _Capped) -> None:
    import numpy as np

    qo = d["queue_offset"]
    if qo.size == 0:
        return
    i = np.flatnonzero(np.diff(qo) != 1)
    breaks = (qo[i], qo[i + 1], d["offset"][i + 1])
    continuity(q, (int(qo[0]), int(d["offset"][0])), breaks, ctx, out)


def continuity(
    q: str,
    first: tuple[int, int],
    breaks: tuple[NDArray[Any], NDArray[Any], NDArray[Any]],
    ctx: QueueContext,
    out: _Capped,
) -> None:
    """``queue_gap``/``queue_duplicate`` findings of a queue's dispatchable records in
    (queue offset, log offset) order: ``first`` is the (queue offset, log offset) of the
    first record; ``breaks`` the places where the next queue offset is not one more
    than the previous: (previous queue offset, next one, the next record's log offset)."""
    if ctx.min_offset == 0 and first[0] > 0:
        file, pos = ctx.locate(first[1])
        out.add(
            file,
            pos,
            "queue_gap",
            f"{q}: queue offsets 0..{first[0] - 1} ({first[0]}) missing before this record",
        )
    for prev, nxt, at in zip(*(a.tolist() for a in breaks), strict=True):
        file, pos = ctx.locate(at)
        if nxt == prev:
            out.add(file, pos, "queue_duplicate", f"{q}: queue offset {nxt} again")
        else:
            lo, hi = prev + 1, nxt - 1
            out.add(
                file,
                pos,
                "queue_gap",
                f"{q}: queue offsets {lo}..{hi} ({hi - lo + 1}) missing before this record",
            )


def _read_queue_units(files: tuple[CqFile, ...], out: _Capped, q: str) -> dict[str, Any]:
    import numpy as np

    parts: list[dict[str, Any]] = []
    for i, f in enumerate(files):
        with open_mapped(f.path) as data:  # no copy; the columns are copies
            cols = read_units(data, f)
        cols["queue_offset"] = cols["index"] + f.base_unit
        cols["file"] = np.full(cols["index"].size, i, dtype=np.int64)
        parts.append(cols)
    keys = ("index", "queue_offset", "u_phys", "u_size", "u_tags", "file")
    if not parts:
        return {k: np.zeros(0, dtype=np.int64) for k in keys}
    u = parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in keys}
    bad = (u["u_phys"] < 0) | (u["u_size"] <= 0)
    if not bad.any():
        return u
    for i in np.flatnonzero(bad).tolist():
        out.add(
            files[u["file"][i]].rel_path, int(u["index"][i]) * cqfmt.UNIT_SIZE, "cq_bad_unit",
            f"{q} queue offset {u['queue_offset'][i]}: offset {u['u_phys'][i]},"
            f" size {u['u_size'][i]}",
        )  # fmt: skip
    return {k: v[~bad] for k, v in u.items()}


def _compare_matched(
    topic: str,
    q: str,
    files: tuple[CqFile, ...],
    u: dict[str, NDArray[Any]],
    r: dict[str, NDArray[Any]],
    matched: NDArray[Any],
    clipped: NDArray[Any],
    out: _Capped,
) -> None:
    """Findings for units whose record exists (unit ``i`` matches record ``clipped[i]``)
    but whose offset, size or tag code disagrees with it."""
    import numpy as np

    rq = r["queue_offset"]
    m = np.flatnonzero(matched)
    jm = clipped[m]
    differs = (
        (u["u_phys"][m] != r["offset"][jm])
        | (u["u_size"][m] != r["size"][jm])
        | ((u["u_tags"][m] != r["tags_code"][jm]) & (topic != SCHEDULE_TOPIC))
    )  # the agreeing units (nearly all) are never visited one by one
    for i in m[differs].tolist():
        j = clipped[i]
        where = (files[u["file"][i]].rel_path, int(u["index"][i]) * cqfmt.UNIT_SIZE)
        at = f"{q} queue offset {rq[j]}"
        if u["u_phys"][i] != r["offset"][j]:
            out.add(
                *where,
                "cq_wrong_offset",
                f"{at}: unit offset {u['u_phys'][i]}, record at {r['offset'][j]}",
            )
        elif u["u_size"][i] != r["size"][j]:
            out.add(
                *where,
                "cq_wrong_size",
                f"{at}: unit size {u['u_size'][i]}, record size {r['size'][j]}",
            )
        elif u["u_tags"][i] != r["tags_code"][j] and topic != SCHEDULE_TOPIC:
            out.add(
                *where,
                "cq_wrong_tags",
                f"{at}: unit tag code {u['u_tags'][i]}, record {r['tags_code'][j]}",
            )


def _orphans(
    q: str, files: tuple[CqFile, ...], u: dict[str, NDArray[Any]], rows: NDArray[Any], out: _Capped
) -> None:
    """``cq_orphan`` for units whose record the CommitLog does not have: one finding per
    run of consecutive queue offsets in one file (a cut or torn CommitLog loses whole
    runs; a run is reported once, not unit by unit)."""
    import numpy as np

    if rows.size == 0:
        return
    qo, fi = u["queue_offset"][rows], u["file"][rows]
    breaks = np.flatnonzero((np.diff(qo) != 1) | (np.diff(fi) != 0)) + 1
    for run in np.split(rows, breaks):
        i, j = int(run[0]), int(run[-1])
        where = (files[u["file"][i]].rel_path, int(u["index"][i]) * cqfmt.UNIT_SIZE)
        if i == j:
            detail = (f"{q} queue offset {u['queue_offset'][i]}: unit points at {u['u_phys'][i]}"
                      f" (size {u['u_size'][i]}), the CommitLog has no such message")  # fmt: skip
        else:
            detail = (f"{q} queue offsets {u['queue_offset'][i]}..{u['queue_offset'][j]}"
                      f" ({run.size} units): units point at {u['u_phys'][i]}..{u['u_phys'][j]},"
                      " the CommitLog has no such messages")  # fmt: skip
        out.add(*where, "cq_orphan", detail)


def _units(
    topic: str, queue_id: int, r: dict[str, NDArray[Any]], ctx: QueueContext, out: _Capped
) -> None:
    import numpy as np

    q = f"{topic}/{queue_id}"
    files = ctx.cq_files[(topic, queue_id)]
    u = _read_queue_units(files, out, q)
    rq = r["queue_offset"]
    same = rq.size == u["queue_offset"].size and np.array_equal(rq, u["queue_offset"])
    idx = np.arange(rq.size) if same else np.searchsorted(rq, u["queue_offset"])
    clipped = np.minimum(idx, max(rq.size - 1, 0))
    matched = (
        (idx < rq.size) & (rq[clipped] == u["queue_offset"])
        if rq.size
        else np.zeros(idx.size, bool)
    )
    _compare_matched(topic, q, files, u, r, matched, clipped, out)
    live = (u["u_phys"] >= ctx.min_offset) & (u["u_phys"] < ctx.cut)
    _orphans(q, files, u, np.flatnonzero(~matched & live), out)
    missing = rq[:0] if same else rq[~np.isin(rq, u["queue_offset"])]
    missing_runs(topic, queue_id, _runs(missing), ctx, out)


def missing_runs(
    topic: str, queue_id: int, runs: Iterable[tuple[int, int]], ctx: QueueContext, out: _Capped
) -> None:
    """One ``cq_missing`` per run of queue offsets whose records have no unit (closed
    runs, ascending), minus what a truncated file already accounts for."""
    q = f"{topic}/{queue_id}"
    holes = ctx.lost.get((topic, queue_id), ())
    size = ctx.cq_file_size
    for a, b in runs:
        for lo, hi in _subtract(a, b, holes):
            at = lo * cqfmt.UNIT_SIZE
            out.add(
                f"consumequeue/{topic}/{queue_id}/{at // size * size:020d}",
                at % size, "cq_missing",
                f"{q}: no unit for queue offsets {lo}..{hi} ({hi - lo + 1} messages)",
            )  # fmt: skip


# ------------------------------------------------------------------------- driver side

_REC_COLS: Final = ("offset", "size", "queue_offset", "sys_flag", "store_ts", "tags_code")


def check_queues(
    records: Iterable[tuple[str, int, bytes]],
    ctx: QueueContext,
    cq_queues: Iterable[tuple[str, int]],
) -> tuple[list[Finding], list[QueueStats]]:
    """Every per-queue check, on the driver: ``records`` holds the scan tasks' (topic,
    queue id, packed ``RECORD_DTYPE`` records) values, one per range and queue; a queue
    with a ConsumeQueue directory but no record is checked too (its units are then
    orphans). Numpy per queue: no shuffle, no per-record Python."""
    import numpy as np

    packed: dict[tuple[str, int], list[bytes]] = {key: [] for key in cq_queues}
    for t, q, blob in records:
        packed.setdefault((t, q), []).append(blob)

    def one(item: tuple[tuple[str, int], list[bytes]]) -> tuple[list[Finding], QueueStats | None]:
        (topic, queue_id), blobs = item
        arr = np.frombuffer(b"".join(blobs), RECORD_DTYPE)
        cols = {c: arr[c].astype(np.int64) for c in _REC_COLS}
        return check_queue(topic, queue_id, cols, ctx)

    findings: list[Finding] = []
    stats: list[QueueStats] = []
    items = sorted(packed.items())
    with ThreadPoolExecutor(max(1, min(CHECK_THREADS, len(items)))) as pool:
        for found, st in pool.map(one, items):
            findings += found
            if st is not None:
                stats.append(st)
    return findings, stats
