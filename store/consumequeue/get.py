"""The pull algorithm: which units of a consume queue a pull returns, and the status.

RocketMQ 5.x ``DefaultMessageStore.getMessage``; the cases are checked in this order
(``correction(old, new)`` is ``new`` except on a SLAVE without ``offsetCheckInSlave``,
where it is ``old``)::

    queue does not exist          NO_MATCHED_LOGIC_QUEUE  correction(offset, 0)
    max offset == 0               NO_MESSAGE_IN_QUEUE     correction(offset, 0)
    offset < min offset           OFFSET_TOO_SMALL        correction(offset, min)
    offset == max offset          OFFSET_OVERFLOW_ONE     offset
    offset > max offset           OFFSET_OVERFLOW_BADLY   correction(offset, max)
    no unit buffer at offset      OFFSET_FOUND_NULL       correction(offset, start of next file)
    otherwise scan                FOUND | NO_MATCHED_MESSAGE | MESSAGE_WAS_REMOVING,
                                  one past the last unit examined

The scan covers the units of the one file holding ``offset``, at most
max(``maxFilterMessageSize``, count x 20) bytes of them. Per unit, in order: stop when
the batch is full (below); skip units pointing before the next CommitLog file after
one found missing; skip units failing the tag-code filter (NO_MATCHED_MESSAGE while
nothing is found); a unit whose record the CommitLog no longer holds gives
MESSAGE_WAS_REMOVING (while nothing is found) and skips to the next CommitLog file;
then the record filter (the exact tag re-check for decoded pulls) and FOUND.

The batch is full (never while empty) when one more message would exceed the count
or the request's byte limit, or the transfer limits: 256 KiB / 32 messages while
the record is "in memory" (less than 40% of RAM behind the CommitLog end), 64 KiB /
8 messages otherwise.

With a tag-code test the scan visits only the units passing it, found for the whole
range at once with numpy; the runs of units between them are passed over with the
effects visiting each would have had (:class:`_Skipped`), so the answer is the same.

Blank units (pre-fill, and padding of a gap) are skipped before anything else: they
neither end a batch (RocketMQ would count their 2 GiB size, or read 2 GiB at offset 0
and report MESSAGE_WAS_REMOVING) nor count as the physical offset the pull reached.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from mqstore.commitlog.segments import Segments
from mqstore.config import StoreConfig
from mqstore.consumequeue.batch_read import needle_candidates
from mqstore.consumequeue.filter import Subscription
from mqstore.consumequeue.filter_bits import VerdictReader, Verdicts, phys_low32
from mqstore.consumequeue.format import BLANK_SIZE, UNIT_SIZE, UNITS_LOW_TAGS, iter_units
from mqstore.consumequeue.match_list import MatchReader
from mqstore.consumequeue.queue import ConsumeQueue
from mqstore.status import GetStatus

MAX_PULL_MSG_SIZE = 128 * 1024 * 1024
"""Upper bound of a request's byte limit (RocketMQ ``MAX_PULL_MSG_SIZE``)."""

T = TypeVar("T")
Unit = tuple[int, int, int]
"""(physical offset, size, tags code): one consume-queue unit."""
Caps = tuple[int, int, int, int, int]
"""One pull's batch limits (:meth:`PullLimits.caps`)."""
Take = Callable[[memoryview, int], T | None] | None
"""Turns a record's bytes and queue offset into the returned item (None: filter it out)."""
CachedFile = tuple[memoryview | None, int, int, int]
"""The scan's CommitLog file: (view, start, end, write position)."""
_NO_FILE: CachedFile = (None, 0, 0, 0)


def total_physical_memory() -> int:
    """Bytes of RAM (``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE``)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover - non-POSIX
        return 8 << 30


@dataclass(frozen=True, slots=True)
class PullLimits:
    """Transfer limits of one store (from :class:`StoreConfig`)."""

    max_filter_message_size: int
    bytes_in_memory: int
    count_in_memory: int
    bytes_in_disk: int
    count_in_disk: int
    memory_bytes: int

    @classmethod
    def from_config(cls, cfg: StoreConfig) -> PullLimits:
        """Limits as RocketMQ derives them; "in memory" = within ratio% of RAM."""
        return cls(
            cfg.max_filter_message_size,
            cfg.max_transfer_bytes_on_message_in_memory,
            cfg.max_transfer_count_on_message_in_memory,
            cfg.max_transfer_bytes_on_message_in_disk,
            cfg.max_transfer_count_on_message_in_disk,
            total_physical_memory() * cfg.access_message_in_memory_max_ratio // 100,
        )

    def caps(self, log_max: int, max_count: int, max_bytes: int) -> tuple[int, int, int, int, int]:
        """One pull's batch limits, the request's folded into the transfer limits: (first
        "in memory" physical offset, bytes and count in memory, bytes and count on disk)."""
        max_pull = min(max(max_bytes, 100), MAX_PULL_MSG_SIZE)
        return (
            log_max - self.memory_bytes,
            min(max_pull, self.bytes_in_memory),
            min(max_count, self.count_in_memory),
            min(max_pull, self.bytes_in_disk),
            min(max_count, self.count_in_disk),
        )


@dataclass(frozen=True, slots=True)
class Selection(Generic[T]):
    """What a pull found, before it is wrapped into a public result."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    items: list[T]
    queue_offsets: list[int]
    total_size: int = 0
    suggest_pulling_from_slave: bool = False


def check_offset(
    cq: ConsumeQueue | None, offset: int, correct: Callable[[int, int], int]
) -> Selection[object] | None:
    """The status rows of the table that need no scan; None when a scan is due."""
    if cq is None:
        return Selection(GetStatus.NO_MATCHED_LOGIC_QUEUE, correct(offset, 0), 0, 0, [], [])
    low, high = cq.min_offset, cq.max_offset
    if high == 0:
        status, nxt = GetStatus.NO_MESSAGE_IN_QUEUE, correct(offset, 0)
    elif offset < low:
        status, nxt = GetStatus.OFFSET_TOO_SMALL, correct(offset, low)
    elif offset == high:
        status, nxt = GetStatus.OFFSET_OVERFLOW_ONE, offset
    elif offset > high:
        status, nxt = GetStatus.OFFSET_OVERFLOW_BADLY, correct(offset, high)
    else:
        return None
    return Selection(status, nxt, low, high, [], [])


def select(
    cq: ConsumeQueue | None,
    log: Segments,
    offset: int,
    max_count: int,
    sub: Subscription,
    limits: PullLimits,
    take: Callable[[memoryview, int], T | None] | None,
    *,
    max_bytes: int = MAX_PULL_MSG_SIZE,
    correct: Callable[[int, int], int] = lambda _old, new: new,
    verdicts: VerdictReader | None = None,
    matches: tuple[MatchReader, Take[T]] | None = None,
) -> Selection[T]:
    """Run the pull of ``max_count`` messages from ``offset`` (see the module docstring).

    ``take`` turns each record's bytes (a view of the mapped CommitLog) into the
    returned item, or filters it out with None; without ``take`` the views are the
    items. ``verdicts``: a SQL92 subscription's verdicts written at dispatch
    (``mqstore.consumequeue.filter_bits``); a unit whose verdict is FALSE is passed
    over like one failing the tag-code test, undecoded. ``matches``: the expression's
    match list (``mqstore.consumequeue.match_list``) and the ``take`` of a listed match (its
    expression is not tested again); when the list covers ``offset``, the pull reads
    the listed matches of the covered stretch, up to ``max_count`` and the transfer
    limits, and passes over the units between them unread: the pull's bound of units
    examined (``maxFilterMessageSize``) counts the units read, so it reaches further than
    800 units (docs/sql92.md §5). Not locked: it reads units and records below their
    files' write positions, which never change.
    """
    pre = check_offset(cq, offset, correct)
    if pre is not None or cq is None:
        return pre  # type: ignore[return-value]
    low, high = cq.min_offset, cq.max_offset
    buf = cq.units_from(offset)
    if buf is None:
        nxt = correct(offset, cq.roll_next_file(offset))
        return Selection(GetStatus.OFFSET_FOUND_NULL, nxt, low, high, [], [])
    log_max = log.max_offset
    if matches is not None:
        upto = min(high, offset + len(buf) // UNIT_SIZE)
        reader, take_match = matches
        covered = _covered(buf, offset, upto, max_count, reader)
        if covered is not None:
            caps = limits.caps(log_max, max_count, max_bytes)
            miss, q, items, qoffs, total, last = _scan(
                covered.visits, covered, log, offset, caps, take_match
            )
            status = GetStatus.FOUND if qoffs else miss
            suggest_slave = log_max - last > limits.memory_bytes
            return Selection(status, q, low, high, items, qoffs, total, suggest_slave)
    # (q - offset) * 20 > max(maxFilterMessageSize, count * 20) ends the scan, as does the max
    stop = min(
        high, offset + max(limits.max_filter_message_size, max_count * UNIT_SIZE) // UNIT_SIZE + 1
    )
    raw = buf[: (stop - offset) * UNIT_SIZE]  # the units of [offset, stop)
    caps = limits.caps(log_max, max_count, max_bytes)
    # A SQL92 expression's needles stand for the record filter, so only with one; and
    # only without a tag-code test, whose candidates the filter reads anyway.
    sql = sub.sql
    needles = (
        sql.needles if sql is not None and take is not None and not sql.required_tags else None
    )
    table = np.frombuffer(raw, UNITS_LOW_TAGS)
    v = verdicts(offset, phys_low32(raw, len(table))) if verdicts is not None else None
    if sub.code_test is None and needles is None and v is None:
        units: Iterable[Unit] = iter_units(raw)
        skipped = None
    else:  # only the units passing the tests on the whole range are visited one by one
        skipped = _Skipped(table, sub, needles, caps, log, v)
        units = skipped.visits
    del table
    miss, q, items, qoffs, total, max_phy_pulling = _scan(units, skipped, log, offset, caps, take)
    status = GetStatus.FOUND if qoffs else miss
    suggest_slave = log_max - max_phy_pulling > limits.memory_bytes
    return Selection(status, q, low, high, items, qoffs, total, suggest_slave)


def _scan(
    units: Iterable[Unit],
    skipped: _Runs | None,
    log: Segments,
    q0: int,
    caps: Caps,
    take: Take[T],
) -> tuple[GetStatus, int, list[T], list[int], int, int]:
    """The scan of the units from queue offset ``q0``, or of the units ``skipped``
    visits (those passing the tag-code test, with markers for the runs between).

    Returns (last miss, next offset, items, their offsets, bytes, last unit's physical).
    """
    mem_from, mem_bytes, mem_count, disk_bytes, disk_count = caps
    miss = GetStatus.NO_MATCHED_MESSAGE  # the status while nothing is found
    items: list[T] = []
    qoffs: list[int] = []
    total, count, max_phy_pulling, skip_below = 0, 0, 0, -1
    mf_view, mf_start, mf_end, mf_wrote = _NO_FILE  # see _commitlog_file
    q = q0
    for phys, size, tags in units:  # the hot loop of every pull: no call per unit
        if size == BLANK_SIZE:
            if not phys:  # a blank pads: it neither fills a batch (its size is 2 GiB)
                q += 1  # nor says where the pull reads (physical 0)
                continue
            stop = -1 - phys
            if phys < 0 and skipped is not None and stop in skipped.last_phys:  # a run
                # of units failing the tag-code test (_Skipped.visits)
                full_at, last_phys, missed = skipped.pass_over(tags, stop, count, total, skip_below)
                if last_phys >= 0:
                    max_phy_pulling = last_phys
                if missed:
                    miss = GetStatus.NO_MATCHED_MESSAGE
                if full_at is not None:
                    q = q0 + full_at
                    break
                q = q0 + stop
                continue
        if count:  # the batch is full: limits.caps folds the request's limits in
            if phys >= mem_from:  # "in memory"
                if total + size > mem_bytes or count >= mem_count:
                    break
            elif total + size > disk_bytes or count >= disk_count:
                break
        max_phy_pulling = phys
        this_q = q
        q += 1
        if phys < skip_below:
            continue
        if not mf_start <= phys < mf_end:  # once per CommitLog file
            mf_view, mf_start, mf_end, mf_wrote = _commitlog_file(log, phys)
        view = None
        rel = phys - mf_start
        if mf_view is not None and rel + size <= mf_wrote:
            try:
                view = mf_view[rel : rel + size]
            except ValueError:  # the segment was deleted under us
                view = None
        if view is None:
            miss, skip_below, mf_start, mf_end = _removed(log, phys)
            continue
        if take is None:  # raw: the view itself (saves a call per message)
            items.append(view)  # type: ignore[arg-type]
        else:
            item = take(view, this_q)
            if item is None:
                miss = GetStatus.NO_MATCHED_MESSAGE
                continue
            items.append(item)
        qoffs.append(this_q)
        total += size
        count += 1
        skip_below = -1
    return miss, q, items, qoffs, total, max_phy_pulling


class _Runs(Protocol):
    """The runs of units a scan passes over (:class:`_Skipped`, :class:`_Covered`)."""

    last_phys: dict[int, int]

    def pass_over(
        self, start: int, stop: int, count: int, total: int, skip_below: int
    ) -> tuple[int | None, int, bool]: ...


class _Covered:
    """A stretch a match list covers: its matches visited, the runs between them (every
    unit FALSE) passed over without effect on the batch (a run never fills it: the scan
    stops at the match that does not fit)."""

    def __init__(self, units: NDArray[np.void], hits: NDArray[np.int64], end: int) -> None:
        n = len(hits)
        rows = np.concatenate((hits, np.maximum(hits - 1, 0), [end - 1]))  # one gather
        phys = units["phys"][rows].astype(np.int64).tolist()
        size = units["size"][hits].astype(np.int64).tolist()
        visits: list[Unit] = []
        self.last_phys: dict[int, int] = {}
        """Run ending at index -> its last unit's physical offset."""
        at = 0
        for k, i in enumerate(hits.tolist()):
            if i != at:
                visits.append((-1 - i, BLANK_SIZE, at))
                self.last_phys[i] = phys[n + k]
            visits.append((phys[k], size[k], 0))
            at = i + 1
        if at != end:
            visits.append((-1 - end, BLANK_SIZE, at))
            self.last_phys[end] = phys[-1]
        self.visits = visits

    def pass_over(
        self, start: int, stop: int, count: int, total: int, skip_below: int
    ) -> tuple[int | None, int, bool]:
        """As :meth:`_Skipped.pass_over`: the run's units are examined, none fills."""
        return None, self.last_phys[stop], True


def _covered(
    buf: memoryview, offset: int, upto: int, max_count: int, matches: MatchReader
) -> _Covered | None:
    """The stretch from ``offset`` the match list covers, or None."""
    end, hits = matches(offset, upto, phys_low32(buf, upto - offset), max_count)
    if hits is None:
        return None
    return _Covered(np.frombuffer(buf, UNITS_LOW_TAGS, end - offset), hits, end - offset)


_SPAN_SEARCH = 64
"""Above this many records of one CommitLog file, the needles are searched once over
their span rather than record by record (few records far apart: their own bytes only)."""


def _may_hold(
    log: Segments, phys: NDArray[np.int64], size: NDArray[np.int64], needles: tuple[bytes, ...]
) -> NDArray[np.bool_]:
    """False for the units whose record the CommitLog holds whole and which contain none
    of ``needles`` (a SQL92 expression's bound: the record filter would refuse them);
    True for the rest, blank units and records no longer held included."""
    keep = np.ones(len(phys), bool)
    width = log.file_size
    for first in np.unique(phys // width).tolist():
        mf = log.find(first * width)
        mm = getattr(mf, "mapping", None)
        if mf is None or mm is None:
            continue
        rel = phys - mf.file_from_offset
        inside = np.flatnonzero((rel >= 0) & (rel + size <= mf.wrote_position))
        if len(inside):
            # Unmapped meanwhile: the scan judges them one by one.
            with contextlib.suppress(ValueError, BufferError):
                if len(inside) > _SPAN_SEARCH:  # dense: one search over their span
                    keep[inside] = needle_candidates(mm, rel[inside], size[inside], needles)
                    continue
                for i, a in zip(inside.tolist(), rel[inside].tolist(), strict=True):
                    b = a + int(size[i])
                    keep[i] = any(mm.find(x, a, b) >= 0 for x in needles)
    return keep


class _Skipped:
    """The units of a scanned range that failed the tag-code test (or hold none of a
    SQL92 expression's needles), passed over a run at
    a time with the effects the scan would have had visiting them one by one: each
    non-blank one may find the batch full (the scan stops there), becomes the last
    physical offset examined, and counts as a miss unless it lies below the CommitLog
    file the scan skips to.

    The runs lie between the units passing the test and after the last: what the common
    case needs of each (the last non-blank unit's physical offset) is computed for all
    of them at once.
    """

    def __init__(
        self,
        units: NDArray[np.void],
        sub: Subscription,
        needles: tuple[bytes, ...] | None,
        caps: Caps,
        log: Segments,
        verdicts: Verdicts | None = None,
    ) -> None:
        n = len(units)
        self.phys = units["phys"].astype(np.int64)
        self.size = units["size"].astype(np.int64)
        picked = sub.code_candidates(units["tags_low"])
        if picked is None:
            picked = np.arange(n)
        sure = None
        if verdicts is not None:  # units with a verdict: TRUE ones visited, others not
            known, sure = verdicts  # a blank unit never has one
            picked = picked[~known[picked]]
        if needles is not None and len(picked):
            keep = _may_hold(log, self.phys[picked], self.size[picked], needles)
            picked = picked[keep]
        if sure is not None:
            picked = np.union1d(picked, np.flatnonzero(sure))
        real = (self.size != BLANK_SIZE) | (self.phys != 0)
        self.real = np.flatnonzero(real)
        """Indexes of the non-blank units."""
        self.caps = caps
        mem_from, mem_bytes, mem_count, disk_bytes, disk_count = caps
        most = int(self.size[self.real].max()) if len(self.real) else 0
        if not len(self.real) or self.phys[self.real].min() >= mem_from:  # all "in memory"
            self.room, self.count = mem_bytes - most, mem_count
        else:
            self.room, self.count = min(mem_bytes, disk_bytes) - most, min(mem_count, disk_count)
        """While a batch's bytes are at most ``room`` and its count below ``count``, no
        unit of the range can find it full."""
        stops = np.append(picked, n)
        starts = np.append(0, picked + 1)
        last_real = np.maximum.accumulate(np.where(real, np.arange(n), -1))
        before = last_real[np.maximum(stops - 1, 0)]
        last_phys = np.where((stops > 0) & (before >= starts), self.phys[np.maximum(before, 0)], -1)
        self.last_phys = dict(zip(stops.tolist(), last_phys.tolist(), strict=True))
        """Run ending at index -> its last non-blank unit's physical offset, or -1."""
        visits: list[Unit] = []
        at = 0
        chosen = picked.tolist()
        for i, phys, size in zip(chosen, self.phys[picked].tolist(), self.size[picked].tolist(),
                                 strict=True):  # fmt: skip
            if i != at:
                visits.append((-1 - i, BLANK_SIZE, at))
            visits.append((phys, size, 0))
            at = i + 1
        if at != n:
            visits.append((-1 - n, BLANK_SIZE, at))
        self.visits = visits
        """The units passing the test, each run between them (and after the last) marked
        by ``(-1 - end, BLANK_SIZE, start)`` (a unit read as such must also end a run to
        be taken for a marker)."""

    def pass_over(
        self, start: int, stop: int, count: int, total: int, skip_below: int
    ) -> tuple[int | None, int, bool]:
        """Pass over units ``[start, stop)`` (a run): (the index where the batch is full,
        or None; the last non-blank unit's physical offset passed, or -1; whether one
        counted as a miss)."""
        last = self.last_phys[stop]
        if last < 0:
            return None, -1, False
        if skip_below < 0 and (not count or (count < self.count and total <= self.room)):
            return None, last, True
        lo, hi = np.searchsorted(self.real, (start, stop))
        real = self.real[lo:hi]
        if count:  # the batch may be full at one of them: judge each, as the scan would
            mem_from, mem_bytes, mem_count, disk_bytes, disk_count = self.caps
            for k, j in enumerate(real.tolist()):
                phys, size = int(self.phys[j]), int(self.size[j])
                if phys >= mem_from:
                    full = total + size > mem_bytes or count >= mem_count
                else:
                    full = total + size > disk_bytes or count >= disk_count
                if full:
                    passed = self.phys[real[:k]]
                    return j, int(passed[-1]) if k else -1, bool((passed >= skip_below).any())
        passed = self.phys[real]
        return None, last, bool((passed >= skip_below).any())


def _commitlog_file(log: Segments, phys: int) -> CachedFile:
    """The CommitLog file holding ``phys``: (view, start, end, write position), or _NO_FILE.

    The scan caches the file of the last record read: a unit is only ever dispatched
    below the write position, which never shrinks while the file is mapped, so caching
    it for one call is safe.
    """
    mf = log.find(phys)
    if mf is None:
        return _NO_FILE
    start = mf.file_from_offset
    return mf.view, start, start + mf.file_size, mf.wrote_position


def _removed(log: Segments, phys: int) -> tuple[GetStatus, int, int, int]:
    """The record at ``phys`` is gone: (MESSAGE_WAS_REMOVING, skip units below the next
    CommitLog file, and forget the cached file)."""
    return GetStatus.MESSAGE_WAS_REMOVING, log.roll_next_offset(phys), 0, 0
