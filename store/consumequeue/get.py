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

Blank units (pre-fill, and padding of a gap) are skipped before anything else: they
neither end a batch (RocketMQ would count their 2 GiB size, or read 2 GiB at offset 0
and report MESSAGE_WAS_REMOVING) nor count as the physical offset the pull reached.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from mqstore.commitlog.segments import Segments
from mqstore.config import StoreConfig
from mqstore.consumequeue.filter import Subscription
from mqstore.consumequeue.format import BLANK_SIZE, UNIT_SIZE, iter_units
from mqstore.consumequeue.queue import ConsumeQueue
from mqstore.status import GetStatus

MAX_PULL_MSG_SIZE = 128 * 1024 * 1024
"""Upper bound of a request's byte limit (RocketMQ ``MAX_PULL_MSG_SIZE``)."""

T = TypeVar("T")
Unit = tuple[int, int, int]
"""(physical offset, size, tags code): one consume-queue unit."""
Caps = tuple[int, int, int, int, int]
"""One pull's batch limits (:meth:`PullLimits.caps`)."""
Match = Callable[[int], bool]
"""A subscription's tags-code test."""
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
) -> Selection[T]:
    """Run the pull of ``max_count`` messages from ``offset`` (see the module docstring).

    ``take`` turns each record's bytes (a view of the mapped CommitLog) into the
    returned item, or filters it out with None; without ``take`` the views are the
    items. Not locked: it reads units and
    records below their files' write positions, which never change.
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
    # (q - offset) * 20 > max(maxFilterMessageSize, count * 20) ends the scan, as does the max
    stop = min(
        high, offset + max(limits.max_filter_message_size, max_count * UNIT_SIZE) // UNIT_SIZE + 1
    )
    units = iter_units(buf[: (stop - offset) * UNIT_SIZE])  # the units of [offset, stop)
    match_code = sub.code_test
    caps = limits.caps(log_max, max_count, max_bytes)
    miss, q, items, qoffs, total, max_phy_pulling = _scan(
        units, log, offset, caps, match_code, take
    )
    status = GetStatus.FOUND if qoffs else miss
    suggest_slave = log_max - max_phy_pulling > limits.memory_bytes
    return Selection(status, q, low, high, items, qoffs, total, suggest_slave)


def _scan(
    units: Iterator[Unit], log: Segments, q: int, caps: Caps, match: Match | None, take: Take[T]
) -> tuple[GetStatus, int, list[T], list[int], int, int]:
    """The scan: (last miss, next offset, items, their offsets, bytes, last unit's physical)."""
    mem_from, mem_bytes, mem_count, disk_bytes, disk_count = caps
    miss = GetStatus.NO_MATCHED_MESSAGE  # the status while nothing is found
    items: list[T] = []
    qoffs: list[int] = []
    total, count, max_phy_pulling, skip_below = 0, 0, 0, -1
    mf_view, mf_start, mf_end, mf_wrote = _NO_FILE  # see _commitlog_file
    for phys, size, tags in units:  # the hot loop of every pull: no call per unit
        if size == BLANK_SIZE and not phys:  # a blank pads: it neither fills a batch
            q += 1  # (its size is 2 GiB) nor says where the pull reads (physical 0)
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
        if match is not None and not match(tags):
            miss = GetStatus.NO_MATCHED_MESSAGE
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
