"""Per-queue checks split between the scan tasks and the driver: a queue's records never
leave the task that read them.

Each scan task checks, per (topic, queue) of its range (:func:`part`), the queue's records
against the ConsumeQueue units at their queue offsets (the unit of queue offset ``q`` is
unit ``q`` of the queue's files; tasks read them by path, as they read the segments) and
sends the driver a small :class:`QueuePart`: the statistics, the runs of consecutive queue
offsets it holds (one run per queue and range in a sound store), the runs whose records
have no unit, and its unit findings (capped, with counts). The driver joins a queue's
parts (:func:`merge`): continuity across ranges from the runs, bad units and the units no
record owns (``cq_orphan``) from its own read of the queue's files. The findings and
statistics are those :func:`mqstore.tools.spark.queues.check_queue` gives for the same
records joined on the driver.

One case the parts cannot settle: a queue offset held by records in two ranges (data
replayed or duplicated across a range boundary), whose unit must be compared with the
earlier record, read by another task. :func:`merge` returns None for such a queue; the
audit then checks it from its records, shipped by a second job.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from mqstore.commitlog import dispatch_rule as rule
from mqstore.consumequeue import format as cqfmt
from mqstore.tools.spark import queues
from mqstore.tools.spark.cqscan import unit_dtype
from mqstore.tools.spark.reader import open_mapped
from mqstore.tools.spark.report import Finding, QueueStats

if TYPE_CHECKING:
    from numpy.typing import NDArray


class QueuePart(NamedTuple):
    """What one scan task found of one topic/queue in its range (see the module doc)."""

    topic: str
    queue_id: int
    start: int
    """Log offset of the range's first byte: orders a queue's parts."""
    dispatched: int
    """Dispatchable records (prepared and rolled-back halves are ``not_dispatched``)."""
    min_queue_offset: int
    max_queue_offset: int
    total_bytes: int
    min_store_ts: int
    max_store_ts: int
    not_dispatched: int
    runs: bytes
    """int64 (first queue offset, last, log offset of the first's record) per run of
    consecutive queue offsets, in (queue offset, log offset) order; a queue offset held
    twice starts a new run."""
    missing: bytes
    """int64 (first, last) per run of queue offsets whose records have no unit."""
    findings: tuple[Finding, ...]
    """``cq_wrong_offset``/``cq_wrong_size``/``cq_wrong_tags``, at most
    ``queues.MAX_PER_KIND`` of each kind."""
    counts: tuple[tuple[str, int], ...]
    """Per kind of ``findings``, how many the task found."""


# ------------------------------------------------------------------------- task side


def part(
    topic: str, queue_id: int, rec: dict[str, NDArray[Any]], ctx: queues.QueueContext, start: int
) -> QueuePart:
    """The :class:`QueuePart` of one queue's records in one range; ``rec`` holds the
    columns ``offset, size, queue_offset, sys_flag, store_ts, tags_code`` (log order)."""
    import numpy as np

    disp = rule.units_mask(rec["sys_flag"])
    n = int(np.count_nonzero(disp))
    d = rec if n == disp.size else {k: v[disp] for k, v in rec.items()}
    qo = d["queue_offset"]
    step = np.diff(qo)
    if not (step > 0).all():  # in log order already (the usual case): no sort, no copy
        order = np.lexsort((d["offset"], qo))
        d = {k: v[order] for k, v in d.items()}
        qo = d["queue_offset"]
        step = np.diff(qo)
    found: list[Finding] = []
    counts: list[tuple[str, int]] = []
    missing = np.zeros((0, 2), np.int64)
    if (topic, queue_id) in ctx.cq_files:
        u = d
        if not (step != 0).all():  # a queue offset held twice: its unit names the first
            first = np.r_[True, step != 0]
            u = {k: v[first] for k, v in d.items()}
        found, counts, missing = _unit_check(topic, queue_id, u, ctx)
    breaks = np.flatnonzero(step != 1)
    heads, tails = np.r_[0, breaks + 1], np.r_[breaks, qo.size - 1]
    runs = np.stack([qo[heads], qo[tails], d["offset"][heads]], axis=1) if n else missing
    ts = rec["store_ts"]
    return QueuePart(
        topic, queue_id, start, n, int(qo.min()) if n else -1, int(qo.max()) if n else -1,
        int(rec["size"].sum()), int(ts.min()), int(ts.max()), disp.size - n,
        runs.astype(np.int64).tobytes(), missing.tobytes(), tuple(found), tuple(counts),
    )  # fmt: skip


def _unit_check(
    topic: str, queue_id: int, r: dict[str, NDArray[Any]], ctx: queues.QueueContext
) -> tuple[list[Finding], list[tuple[str, int]], NDArray[Any]]:
    """Each record of ``r`` (one per queue offset, ascending) against the unit at its
    queue offset: (unit findings, their counts per kind, runs without a unit). A unit
    that is zero, blank or bad (negative offset or size) is no unit; the driver reports
    the bad ones, reading every unit (queues.check_queue does the same)."""
    import numpy as np

    files = ctx.cq_files[(topic, queue_id)]
    rq = r["queue_offset"]
    n = rq.size
    cols = {k: np.zeros(n, np.int64) for k in ("u_phys", "u_size", "u_tags", "file", "index")}
    seen = np.zeros(n, np.bool_)
    for i, f in enumerate(files):
        a = int(np.searchsorted(rq, f.base_unit))
        if a == n:
            continue
        with open_mapped(f.path) as data:
            whole = len(data) // cqfmt.UNIT_SIZE
            b = int(np.searchsorted(rq, f.base_unit + whole))
            if b == a:
                continue
            units = np.frombuffer(data, unit_dtype(), whole)[rq[a:b] - f.base_unit]
        for k, name in zip(("u_phys", "u_size", "u_tags"), units.dtype.names or (), strict=True):
            cols[k][a:b] = units[name]
        cols["file"][a:b] = i
        cols["index"][a:b] = rq[a:b] - f.base_unit
        seen[a:b] = True
        del units
    phys, size, tags = cols["u_phys"], cols["u_size"], cols["u_tags"]
    blank = (phys == 0) & (size == cqfmt.BLANK_SIZE) & (tags == 0)
    present = seen & ~blank & (phys >= 0) & (size > 0)  # a zero unit has size 0
    out = queues._Capped()
    q = f"{topic}/{queue_id}"
    if present.any():
        j = np.flatnonzero(present)
        u = {k: v[j] for k, v in cols.items()}
        everyone = np.ones(j.size, np.bool_)
        queues._compare_matched(topic, q, files, u, r, everyone, j, out)
    missing = np.array(queues._runs(rq[~present]), np.int64).reshape(-1, 2)
    return out.items, sorted(out.counts.items()), missing


# ----------------------------------------------------------------------- driver side


def merge(
    topic: str, queue_id: int, parts: list[QueuePart], ctx: queues.QueueContext
) -> tuple[list[Finding], QueueStats] | None:
    """The findings and statistics of one queue from its parts (any order); None when a
    queue offset has records in two ranges (see the module doc)."""
    import numpy as np

    parts = sorted(parts, key=lambda p: p.start)
    runs = [np.frombuffer(p.runs, np.int64).reshape(-1, 3) for p in parts]
    owner = np.repeat(np.arange(len(parts)), [r.shape[0] for r in runs])
    allr = np.concatenate(runs)
    order = np.lexsort((allr[:, 2], allr[:, 0]))
    allr, owner = allr[order], owner[order]
    lo, hi, at = allr[:, 0], allr[:, 1], allr[:, 2]
    if ((lo[1:] <= hi[:-1]) & (owner[1:] != owner[:-1])).any():
        return None
    q = f"{topic}/{queue_id}"
    out = queues._Capped()
    if lo.size:
        b = np.flatnonzero(lo[1:] - hi[:-1] != 1)  # runs that meet across ranges are one
        first = (int(lo[0]), int(at[0]))
        queues.continuity(q, first, (hi[b], lo[b + 1], at[b + 1]), ctx, out)
    if (topic, queue_id) in ctx.cq_files:
        _units(topic, queue_id, parts, lo, hi, ctx, out)
    held = [p for p in parts if p.dispatched]
    stats = QueueStats(
        topic, queue_id, sum(p.dispatched for p in parts),
        min((p.min_queue_offset for p in held), default=-1),
        max((p.max_queue_offset for p in held), default=-1), sum(p.total_bytes for p in parts),
        min(p.min_store_ts for p in parts), max(p.max_store_ts for p in parts),
        sum(p.not_dispatched for p in parts),
    )  # fmt: skip
    return out.done(q), stats


def _units(
    topic: str,
    queue_id: int,
    parts: list[QueuePart],
    lo: NDArray[Any],
    hi: NDArray[Any],
    ctx: queues.QueueContext,
    out: queues._Capped,
) -> None:
    """Bad units and orphans from the queue's files, the tasks' unit findings, and the
    missing runs joined across ranges."""
    import numpy as np

    q = f"{topic}/{queue_id}"
    files = ctx.cq_files[(topic, queue_id)]
    u = queues._read_queue_units(files, out, q)
    uq = u["queue_offset"]
    held = np.zeros(uq.size, np.bool_)
    if lo.size:  # runs ascend without overlap: a unit's is the last starting at or before it
        k = np.searchsorted(lo, uq, side="right") - 1
        held = (k >= 0) & (uq <= hi[np.maximum(k, 0)])
    for p in parts:
        out.take(p.findings, p.counts)
    orphans = np.flatnonzero(~held & (u["u_phys"] >= ctx.min_offset) & (u["u_phys"] < ctx.cut))
    queues._orphans(q, files, u, orphans, out)
    queues.missing_runs(topic, queue_id, _joined(parts), ctx, out)


def _joined(parts: Iterable[QueuePart]) -> list[tuple[int, int]]:
    """The parts' missing runs as one ascending list, runs that meet made one."""
    import numpy as np

    arrays = [np.frombuffer(p.missing, np.int64).reshape(-1, 2) for p in parts]
    allm = np.concatenate(arrays) if arrays else np.zeros((0, 2), np.int64)
    allm = allm[np.argsort(allm[:, 0], kind="stable")]
    out: list[tuple[int, int]] = []
    for a, b in allm.tolist():
        if out and a == out[-1][1] + 1:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def check_all(
    parts: Iterable[QueuePart],
    packed: Iterable[tuple[str, int, bytes]],
    ctx: queues.QueueContext,
    cq_queues: Iterable[tuple[str, int]],
) -> tuple[list[Finding], list[QueueStats], frozenset[tuple[str, int]]]:
    """Every per-queue check on the driver from the scan's output: the queues with
    parts joined (:func:`merge`), the others (``ctx.packed``, and ConsumeQueue
    directories without records) from ``packed`` records (queues.check_queues).
    Returns (findings, statistics, the queues :func:`merge` could not settle: check them
    from their records)."""
    from concurrent.futures import ThreadPoolExecutor

    by_key: dict[tuple[str, int], list[QueuePart]] = {}
    for p in parts:
        by_key.setdefault((p.topic, p.queue_id), []).append(p)

    def one(
        item: tuple[tuple[str, int], list[QueuePart]],
    ) -> tuple[list[Finding], QueueStats] | None:
        return merge(*item[0], item[1], ctx)

    findings: list[Finding] = []
    stats: list[QueueStats] = []
    redo: set[tuple[str, int]] = set()
    items = sorted(by_key.items())
    with ThreadPoolExecutor(max(1, min(queues.CHECK_THREADS, len(items)))) as pool:
        for (key, _), got in zip(items, pool.map(one, items), strict=True):
            if got is None:
                redo.add(key)
            else:
                findings += got[0]
                stats.append(got[1])
    rest = {k for k in cq_queues if k not in by_key}
    f, s = queues.check_queues(packed, ctx, rest)
    return findings + f, stats + s, frozenset(redo)
