"""The cut an audit judges a live store at: what the broker had dispatched when it began.

A broker keeps appending while an operator audits its store in place. Whatever was
written after the audit looked (records, consume-queue units, index entries, the
checkpoint) or is half written as it reads is in flight, not damage. So before the scan
the audit takes a cut (:func:`take`) and judges only what lies below it:

* the cut is the end of the last record the dispatcher had handled: the highest
  ``offset + size`` of the last unit of every consume queue (the dispatcher handles
  records in log order and writes a record's unit before its index keys: docs/store.md
  §1.5, RocketMQ's ReputMessageService). Every record below it has its unit;
* the scan reads the segments only up to the cut; units and index entries pointing at or
  past it are not checked, nor are the newest index file's header fields and slot that
  trail an entry being added (tools.spark.indexcheck, ``live``);
* the bytes past the cut (the in-flight tail) are walked once on the driver for the
  report: where the tail starts, its bytes and records, and its newest store time, which
  the checkpoint (read before the scan) may already name.

The cut is taken when the store is live or was not closed cleanly: its ``lock`` is held
(``flock``, as mqstore's broker holds it; ``fcntl``, as RocketMQ's FileChannel.tryLock
takes it), or an ``abort`` file is there (both write it at start and delete it at a clean
shutdown, once the dispatcher has caught up: docs/store.md §1.5). A cleanly closed store
is judged whole: there a record without its unit is damage.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from mqstore.commitlog.cursor import BufferSegment, LogCursor, Run
from mqstore.consumequeue import format as cqfmt
from mqstore.tools.spark.byterange import ByteRange
from mqstore.tools.spark.layout import StoreLayout
from mqstore.tools.spark.report import Cut
from mqstore.tools.spark.segscan import data_spans

_PROBE = 1 << 20


@dataclass(frozen=True, slots=True)
class Tail:
    """The in-flight tail as walked: records, bytes, newest store time (None: none)."""

    records: int
    bytes: int
    newest_ts: int | None


def store_root(layout: StoreLayout) -> Path:
    """The directory holding ``lock``, ``abort`` and ``checkpoint``."""
    if layout.checkpoint is not None:
        return layout.checkpoint.parent
    return layout.commitlog_dir.parent if layout.commitlog_dir != layout.root else layout.root


def live_reason(root: Path) -> str | None:
    """Why the store at ``root`` must be judged at a cut, or None (closed cleanly)."""
    lock = root / "lock"
    if lock.is_file():
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                for take_lock in (fcntl.flock, fcntl.lockf):
                    try:
                        take_lock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                        take_lock(fd, fcntl.LOCK_UN)
                    except OSError:
                        return "a broker holds the store's lock"
            finally:
                os.close(fd)
    if (root / "abort").exists():
        return "abort file present: a broker is running or did not close cleanly"
    return None


def dispatched_end(layout: StoreLayout) -> int | None:
    """The end of the last record the consume queues name (None without units)."""
    import numpy as np

    last: dict[tuple[str, int], tuple[int, Path]] = {}
    for f in layout.cq_files:
        key = (f.topic, f.queue_id)
        if key not in last or f.base_unit > last[key][0]:
            last[key] = (f.base_unit, Path(f.path))
    end = None
    for _, path in last.values():
        size = path.stat().st_size
        at = last_written(path, size - size % cqfmt.UNIT_SIZE)
        if at < 0:
            continue
        unit = at - at % cqfmt.UNIT_SIZE
        with open(path, "rb") as fh:
            phys, usize, tags = cqfmt.unpack_unit(os.pread(fh.fileno(), cqfmt.UNIT_SIZE, unit))
        if phys >= 0 and usize > 0 and not cqfmt.is_blank(phys, usize, tags):
            end = max(end or 0, int(np.int64(phys) + usize))
    return end


def take(layout: StoreLayout) -> Cut | None:
    """The cut of a live (or not cleanly closed) store with consume queues, else None."""
    from mqstore.tools.spark.queues import rel_name

    reason = live_reason(store_root(layout))
    if reason is None or not layout.segments:
        return None
    end = dispatched_end(layout)
    if end is None:
        return None
    seg = next((s for s in reversed(layout.segments) if s.base_offset <= end), None)
    if seg is None:
        return None
    data_end = _data_end(layout)
    return Cut(reason, end, rel_name(layout, seg.path), end - seg.base_offset,
               max(0, data_end - end))  # fmt: skip


def last_written(path: Path, end: int) -> int:
    """Position of the last non-zero byte of the file's first ``end`` bytes, or -1. Read
    in copies (a writer changes a mapping under numpy), backwards in 1 MiB probes, the
    file's holes skipped."""
    import numpy as np

    with open(path, "rb") as f:
        for lo_span, hi_span in reversed(data_spans(str(path), 0, end)):
            hi = hi_span
            while hi > lo_span:
                lo = max(lo_span, hi - _PROBE)
                chunk = np.frombuffer(os.pread(f.fileno(), hi - lo, lo), np.uint8)
                nz = np.flatnonzero(chunk)
                if nz.size:
                    return lo + int(nz[-1])
                hi = lo
    return -1


def _data_end(layout: StoreLayout) -> int:
    """Log offset just past the last non-zero byte of the segments."""
    for seg in reversed(layout.segments):
        if seg.length:
            at = last_written(Path(seg.path), seg.length)
            if at >= 0:
                return seg.base_offset + at + 1
    return 0


def clip(ranges: list[ByteRange], cut: Cut) -> list[ByteRange]:
    """``ranges`` cut at the log offset ``cut.log_end``: later ranges dropped, the one
    holding it ending there (and treated as the log's last)."""
    out = []
    for r in ranges:
        lo, hi = r.base_offset + r.start, r.base_offset + r.end
        if lo >= cut.log_end:
            continue
        if hi >= cut.log_end:
            end = cut.log_end - r.base_offset
            out.append(ByteRange(r.path, r.name, r.base_offset, r.start, end, True, True))
        else:
            out.append(r)
    return out


def walk_tail(layout: StoreLayout, cut: Cut) -> Tail:
    """The records past the cut, read once from a copy through the cursor (no CRC):
    count, bytes, newest store time. A record still being written (damage to the
    cursor: the in-flight tail's own torn tail) ends the walk, as a blank does."""
    count, newest = 0, None
    for seg in layout.segments:
        if seg.base_offset + seg.length <= cut.log_end or not seg.length:
            continue
        pos = max(0, cut.log_end - seg.base_offset)
        end = last_written(Path(seg.path), seg.length) + 1
        if end <= pos:
            continue
        with open(seg.path, "rb") as f:
            data = os.pread(f.fileno(), end - pos, pos)
        copy = BufferSegment(memoryview(data), seg.base_offset + pos, len(data))
        for item in LogCursor([copy], copy.file_from_offset).runs():
            if not isinstance(item, Run):
                break
            count += item.count
            top = int(item.records.store_timestamp[: item.count].max())
            newest = top if newest is None else max(newest, top)
    return Tail(count, cut.tail_bytes, newest)
