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

Blank pre-fill units are skipped like filtered ones (RocketMQ would read 2 GiB at
offset 0 and report MESSAGE_WAS_REMOVING).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from store.commitlog.segments import Segments
from store.config import StoreConfig
from store.consumequeue.filter import Subscription
from store.consumequeue.format import BLANK_SIZE, UNIT_SIZE, iter_units
from store.consumequeue.queue import ConsumeQueue
from store.status import GetStatus

MAX_PULL_MSG_SIZE = 128 * 1024 * 1024
"""Upper bound of a request's byte limit (RocketMQ ``MAX_PULL_MSG_SIZE``)."""

T = TypeVar("T")


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
        return Selection(
            GetStatus.OFFSET_FOUND_NULL,
            correct(offset, cq.roll_next_file(offset)),
            low,
            high,
            [],
            [],
        )
    log_max = log.max_offset
    memory = limits.memory_bytes
    b_mem, c_mem = limits.bytes_in_memory, limits.count_in_memory
    b_disk, c_disk = limits.bytes_in_disk, limits.count_in_disk
    max_pull = min(max(max_bytes, 100), MAX_PULL_MSG_SIZE)
    # (q - offset) * 20 > max(maxFilterMessageSize, count * 20) ends the scan, as does the max
    stop = min(
        high, offset + max(limits.max_filter_message_size, max_count * UNIT_SIZE) // UNIT_SIZE + 1
    )
    status = GetStatus.NO_MATCHED_MESSAGE
    items: list[T] = []
    qoffs: list[int] = []
    total = count = max_phy_pulling = 0
    q = offset
    skip_below = -1
    # The CommitLog file of the last record read: its view, range and write position
    # (a unit is only ever dispatched below the write position, which never shrinks
    # while the file is mapped, so caching it for this call is safe).
    mf_view: memoryview | None = None
    mf_start = mf_end = mf_wrote = 0
    filtering = not sub.matches_all
    match_code = sub.matches_code
    # The hot loop of every pull, kept in one piece: each call costs per unit.
    for phys, size, tags in iter_units(buf):
        if q >= stop:
            break
        if count:
            if count >= max_count or total + size > max_pull:
                break
            if log_max - phys <= memory:  # "in memory"
                if total + size > b_mem or count >= c_mem:
                    break
            elif total + size > b_disk or count >= c_disk:
                break
        max_phy_pulling = phys
        this_q = q
        q += 1
        if phys < skip_below or (size == BLANK_SIZE and not phys):
            continue
        if filtering and not match_code(tags):
            if not count:
                status = GetStatus.NO_MATCHED_MESSAGE
            continue
        if not mf_start <= phys < mf_end:
            mf = log.find(phys)
            if mf is None:
                mf_view, mf_start, mf_end = None, 0, 0
            else:
                mf_view, mf_wrote = mf.view, mf.wrote_position
                mf_start = mf.file_from_offset
                mf_end = mf_start + mf.file_size
        view = None
        rel = phys - mf_start
        if mf_view is not None and rel + size <= mf_wrote:
            try:
                view = mf_view[rel : rel + size]
            except ValueError:  # the segment was deleted under us
                view = None
        if view is None:
            if not count:
                status = GetStatus.MESSAGE_WAS_REMOVING
            skip_below = log.roll_next_offset(phys)
            mf_start = mf_end = 0
            continue
        if take is None:  # raw: the view itself (saves a call per message)
            items.append(view)  # type: ignore[arg-type]
        else:
            item = take(view, this_q)
            if item is None:
                if not count:
                    status = GetStatus.NO_MATCHED_MESSAGE
                continue
            items.append(item)
        qoffs.append(this_q)
        total += size
        count += 1
        status = GetStatus.FOUND
        skip_below = -1
    return Selection(
        status,
        q,
        low,
        high,
        items,
        qoffs,
        total,
        log_max - max_phy_pulling > memory,
    )
