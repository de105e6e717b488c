"""The file writers of :mod:`mqstore.tools.spark.reindex`: index/ and consumequeue/ from arrays.

The range tasks hash every index key in their one bulk scan; the driver gets, in CommitLog
order, one ``(physical offset, store timestamp, key hash)`` triple per key and writes the
index files with numpy, byte for byte what ``IndexService.build`` + ``IndexFile.put_hashes``
write when fed the same messages in the same order:

* keys fill the files in arrival order, ``indexNum - 1`` entries a file (a message's keys
  may straddle two files, as ``put_hashes`` returns how many fit);
* entry ``k`` of a file (numbers from 1) links to the previous entry of its slot
  (``keyHash % hashSlotNum``) in the same file, 0 for the first: a stable sort by slot
  gives each chain in arrival order; the slot table holds each chain's newest entry;
* time diffs are seconds from the file's begin timestamp (the first entry's store time),
  except the first entry's, which is measured from the header's begin when the file was
  created: the previous file's end timestamp (0 for the first file, which gives 0);
* the header: first and last entry's timestamp and offset, slots in use, entries + 1;
* names are creation times: the given names in order, then the clock, each after the
  previous one (``IndexService._new_path``).

A message whose physical offset is not above the previous message's would be skipped or
completed by the service (``IndexService._boundary``: the keys already in are the trailing
entries that point at it, counted through as many files as they span); such offsets cannot
come from a CommitLog read in order, but a damaged store's header fields could repeat one:
a key already indexed at the same offset (same hash) by an earlier message is then skipped
here. The byte-for-byte contract holds for increasing offsets.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from mqstore.commitlog.dispatch_rule import UNIT_DTYPE
from mqstore.consumequeue import format as cqfmt
from mqstore.index import format as ifmt

if TYPE_CHECKING:
    from numpy.typing import NDArray

FAIL_ENV: Final = "MQSTORE_REINDEX_FAIL_FIRST_ATTEMPT"
"""Test hook: when set, attempt 0 of every task fails after writing half a file."""
_PAGE: Final = 4096
_ENTRY_DTYPE: Final = np.dtype([("h", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
assert _ENTRY_DTYPE.itemsize == ifmt.ENTRY_SIZE and UNIT_DTYPE.itemsize == cqfmt.UNIT_SIZE


Parts = list[tuple[int, bytes | memoryview]]
"""What goes into a file: (position, bytes) pairs; the rest of the file is a hole of zeros."""
FileWriter = Callable[[Path, int, Parts], None]
"""Writes a file of a size from its parts (:func:`write_file`, or a :class:`WriterPool`)."""


def write_file(path: Path, size: int, parts: Parts) -> None:
    """Create ``path`` of ``size`` bytes (sparse), write ``parts`` (position, bytes), fsync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        for start, data in parts:
            view, at = memoryview(data), start
            while view:
                n = os.pwrite(fd, view, at)
                view, at = view[n:], at + n
        os.fsync(fd)
    finally:
        os.close(fd)


def is_sorted(values: NDArray[Any]) -> bool:
    """Whether ``values`` never decrease (then a stable sort would not move anything)."""
    return bool(np.all(values[1:] >= values[:-1]))


class WriterPool:
    """A :data:`FileWriter` that writes (and fsyncs) on a few threads while the caller
    computes the next file: the disk's wait overlaps the numpy work. :meth:`close` waits
    for every file and raises the first error; a file is not durable before it returns."""

    def __init__(self, threads: int = 2) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="reindex-write")
        self._pending: list[Future[None]] = []

    def __call__(self, path: Path, size: int, parts: Parts) -> None:
        self._pending.append(self._pool.submit(write_file, path, size, parts))

    def close(self) -> None:
        """Wait for every file written so far; raise the first failure."""
        self._pool.shutdown(wait=True)
        for f in self._pending:
            f.result()

    def __enter__(self) -> WriterPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # the caller's error is the one to see; the files are discarded with staging
            self._pool.shutdown(wait=True)


def dedupe_repeated_offsets(
    offsets: NDArray[Any], records: NDArray[Any], hashes: NDArray[Any]
) -> NDArray[np.bool_]:
    """Which keys to index, given keys in order (``records``: the message of each key,
    ``offsets`` non-decreasing): all, except the keys of a message that repeats an earlier
    message's offset whose hash that offset already has (see the module doc)."""
    keep = np.ones(offsets.size, np.bool_)
    repeats = (offsets[1:] == offsets[:-1]) & (records[1:] != records[:-1])
    if not np.any(repeats):
        return keep
    indexed: dict[int, set[int]] = {}  # offset -> hashes indexed by earlier messages
    owner: dict[int, int] = {}  # offset -> its first message
    adding: set[int] = set()
    current: int | None = None
    prev_off = 0
    for i, (off, rec, h) in enumerate(
        zip(offsets.tolist(), records.tolist(), hashes.tolist(), strict=True)
    ):
        if rec != current:
            if current is not None:
                indexed.setdefault(prev_off, set()).update(adding)
            current, prev_off, adding = rec, off, set()
        if owner.setdefault(off, rec) != rec and h in indexed.get(off, ()):
            keep[i] = False
            continue
        adding.add(h)
    return keep


def index_names(given: list[str], count: int, clock: Callable[[], int] | None = None) -> list[str]:
    """``count`` file names: ``given`` in order, then the clock's, each after the last."""
    now = clock or (lambda: time.time_ns() // 1_000_000)
    planned = iter([ifmt.name_to_millis(n) for n in given])
    names: list[str] = []
    for _ in range(count):
        ts = next(planned, None)
        if ts is None:
            ts = now()
        if names and ifmt.file_name(ts) <= names[-1]:
            ts = ifmt.name_to_millis(names[-1]) + 1
        while ifmt.file_name(ts) in names:
            ts += 1
        names.append(ifmt.file_name(ts))
    return names


def _time_diffs(ts: NDArray[np.int64], begin: NDArray[np.int64]) -> NDArray[np.int64]:
    """``time_diff_seconds`` element-wise (0 where begin <= 0)."""
    diff = np.trunc((ts - begin) / 1000.0)
    diff = np.clip(diff, 0, ifmt.INT_MAX).astype(np.int64)
    return np.where(begin > 0, diff, 0)


def write_index_files(
    folder: Path, given_names: list[str], slots: int, num: int,
    offsets: NDArray[Any], records: NDArray[Any], timestamps: NDArray[Any],
    hashes: NDArray[Any], clock: Callable[[], int] | None = None,
    writer: FileWriter = write_file,
) -> list[tuple[str, int]]:  # fmt: skip
    """Write the index files of the keys (one element per key, CommitLog order;
    ``records`` numbers their messages) into ``folder`` with ``writer``; return (name,
    entries) per file. ``clock`` (ms) names the files beyond ``given_names``."""
    offsets = np.asarray(offsets, np.int64)
    timestamps = np.asarray(timestamps, np.int64)
    hashes = np.asarray(hashes, np.int64)
    keep = dedupe_repeated_offsets(offsets, np.asarray(records, np.int64), hashes)
    if not keep.all():
        offsets, timestamps, hashes = offsets[keep], timestamps[keep], hashes[keep]
    per_file = num - 1
    total = int(offsets.size)
    if total == 0 or per_file <= 0:
        return []
    n_files = -(-total // per_file)
    names = index_names(given_names, n_files, clock)
    size = ifmt.file_size(slots, num)
    entries_at = ifmt.entry_position(slots, 1)
    out: list[tuple[str, int]] = []
    prev_end_ts = 0
    for k in range(n_files):
        a, b = k * per_file, min(total, (k + 1) * per_file)
        n = b - a
        off, ts, h = offsets[a:b], timestamps[a:b], hashes[a:b]
        begin = np.full(n, ts[0], np.int64)
        begin[0] = prev_end_ts
        slot = h % slots
        order = np.argsort(slot, kind="stable")
        s_sorted = slot[order]
        same = np.r_[False, s_sorted[1:] == s_sorted[:-1]]
        prev = np.zeros(n, np.int64)
        prev[order[same]] = order[np.flatnonzero(same) - 1] + 1
        entries = np.empty(n, _ENTRY_DTYPE)
        entries["h"], entries["phy"] = h, off
        entries["diff"], entries["prev"] = _time_diffs(ts, begin), prev
        last_of_slot = np.r_[~same[1:], True]
        used_slots = s_sorted[last_of_slot]
        newest = order[last_of_slot] + 1
        header = ifmt.HEADER.pack(
            int(ts[0]), int(ts[-1]), int(off[0]), int(off[-1]), int(used_slots.size), n + 1
        )
        parts: Parts = [(0, header)]
        parts.extend(_slot_pages(slots, used_slots, newest))
        parts.append((entries_at, entries.tobytes()))
        writer(folder / names[k], size, parts)
        out.append((names[k], n))
        prev_end_ts = int(ts[-1])
    return out


def _slot_pages(
    slots: int, used: NDArray[np.int64], newest: NDArray[np.int64]
) -> list[tuple[int, bytes | memoryview]]:
    """The slot table's non-zero values as writes: the whole table when dense, else
    only the pages holding used slots (the rest of the file stays a hole of zeros)."""
    pos = ifmt.HEADER_SIZE + used * ifmt.SLOT_SIZE
    pages = np.unique(pos // _PAGE)
    if pages.size * _PAGE * 4 >= slots * ifmt.SLOT_SIZE:
        table = np.zeros(slots, ">i4")
        table[used] = newest
        return [(ifmt.HEADER_SIZE, table.tobytes())]
    first = np.maximum(pages * _PAGE, ifmt.HEADER_SIZE)
    last = np.minimum((pages + 1) * _PAGE, ifmt.HEADER_SIZE + slots * ifmt.SLOT_SIZE)
    out: list[tuple[int, bytes | memoryview]] = []
    page_of = np.searchsorted(pages, pos // _PAGE)
    for i, (lo, hi) in enumerate(zip(first.tolist(), last.tolist(), strict=True)):
        buf = np.zeros((hi - lo) // ifmt.SLOT_SIZE, ">i4")
        mine = page_of == i
        buf[(pos[mine] - lo) // ifmt.SLOT_SIZE] = newest[mine]
        out.append((lo, buf.tobytes()))
    return out


def write_queue_files(
    folder: Path, qoff: NDArray[Any], phys: NDArray[Any], size: NDArray[Any],
    tags: NDArray[Any], file_size: int = cqfmt.FILE_SIZE, writer: FileWriter = write_file,
) -> list[tuple[str, int]]:  # fmt: skip
    """Write one queue's files into ``folder`` as the dispatcher writes them (see
    reindex.py) with ``writer``; return (name, units that point at a message) per file."""
    if qoff.size == 0:
        return []
    q, p, s, t = qoff, phys, size, tags
    if not is_sorted(phys):
        order = np.argsort(phys, kind="stable")
        q, p, s, t = qoff[order], phys[order], size[order], tags[order]
    before = np.r_[-1, np.maximum.accumulate(q)[:-1]]
    keep = q > before  # a unit below the queue's next offset is a re-dispatch: skipped
    q, p, s, t = q[keep], p[keep], s[keep], t[keep]
    per_file = file_size // cqfmt.UNIT_SIZE
    first = int(q[0]) // per_file * per_file
    span = int(q[-1]) - first + 1
    units = np.empty(span, UNIT_DTYPE)
    units["p"], units["s"], units["t"] = 0, cqfmt.BLANK_SIZE, 0
    at = q - first
    units["p"][at], units["s"][at], units["t"][at] = p, s, t
    real = np.bincount(at // per_file)
    data = units.view(np.uint8).data
    out: list[tuple[str, int]] = []
    for i, start in enumerate(range(0, span * cqfmt.UNIT_SIZE, file_size)):
        name = f"{first * cqfmt.UNIT_SIZE + start:020d}"
        writer(folder / name, file_size, [(0, data[start : start + file_size])])
        out.append((name, int(real[i]) if i < real.size else 0))
    return out
