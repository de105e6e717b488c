"""Match lists: where a registered SQL92 expression is TRUE in a queue, so a filtered read
costs per match and not per unit.

Beside each verdict file (``mqstore.consumequeue.filter_bits``), one list per expression
slot: ``{topic}/{queueId}/{first queue offset, 20 digits}.m{slot}``, the queue offsets of
the file's range whose verdict is TRUE, ascending, one 8-byte little-endian word each:

=========  ======  ======================================================================
bits       field   meaning
=========  ======  ======================================================================
46-63      q       the TRUE unit's queue offset, relative to the file's first offset
28-45      gap     ``q - start``: the entry covers the units ``start`` to ``q``
0-27       check   the low 28 bits of the TRUE unit's physical offset (never 0)
=========  ======  ======================================================================

An entry claims: the units ``start`` to ``q - 1`` were evaluated FALSE, unit ``q`` TRUE.
Entries chain when an entry's ``start`` is the previous entry's ``q + 1``; a read from a
queue offset that an entry covers follows the chain from match to match
(``np.searchsorted`` for the first), touching no unit in between. A stretch no entry
covers (before a slot's first verdict, after a queue's last match, a unit whose record
could not be evaluated, a dispatch restart after a crash) is read through the verdicts or
the old way. Worked example: units 0-9, TRUE at 3 and 7, slot registered before unit 0:
entries ``(q=3, gap=3)`` and ``(q=7, gap=3)``; a read from 1 takes 3 and 7 and covers
``[1, 8)``; units 8 and 9 are not covered (no entry names them yet). A stretch may begin
in an earlier file's range (the first entry of a file covers the units after the last
match of the one before); one longer than ``2**18 - 1`` units is claimed in part only.

Like the verdict files, each list file is created sparse at its full size (one word per
unit of the range: an all-zero word ends a list), written with ``pwrite`` before the
consume-queue units its entries name, and read through a read-only mapping.

Crash safety: an entry is taken only when it is well formed (``check`` not 0, its
stretch after the previous entry's ``q``) and its ``check`` equals the unit's
physical offset; a chain ends at the first entry that is not. When a list is first opened
its entries from the first malformed one on are zeroed (a torn tail); at every open,
after recovery, the entries naming queue offsets at or beyond the queue's recovered end
are cut (:func:`cut_queue`), so no claim about units a recovery dropped survives.
"""

from __future__ import annotations

import bisect
import contextlib
import mmap
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from mqstore import _platform, faults

Q_SHIFT: Final = 46
GAP_SHIFT: Final = 28
REL_MASK: Final = (1 << 18) - 1
"""The ``q`` and ``gap`` fields' widths: below 2**18."""
CHECK_MASK: Final = (1 << 28) - 1
WORD: Final = 8
SUFFIX: Final = ".m"
"""A list file's name: the verdict file's, this, the slot."""

MatchReader = Callable[[int, int, NDArray[np.uint32], int], tuple[int, NDArray[np.int64] | None]]
"""``(q0, limit, low, want) -> (end, hits)``: from queue offset ``q0`` (below ``limit``;
``low``: the low 32 bits of the physical offsets of the units from ``q0``), either the
stretch ``[q0, end)`` is covered and ``hits`` are its TRUE units (offsets relative to
``q0``, at most ``want``; with ``want`` of them ``end`` is one past the last), or ``hits``
is None and no entry covers ``[q0, end)``."""


def pack(q_rel: int, gap: int, phys: int) -> int:
    """One entry (module docstring); ``phys & CHECK_MASK`` must not be 0."""
    return (q_rel << Q_SHIFT) | (gap << GAP_SHIFT) | (phys & CHECK_MASK)


def fields(words: NDArray[np.uint64]) -> tuple[NDArray[np.int64], ...]:
    """(q, start, check) of entries, ``q`` and ``start`` relative to their file's first
    offset (``start`` may be negative: a stretch from an earlier file's range)."""
    q = (words >> np.uint64(Q_SHIFT)).astype(np.int64)
    gap = ((words >> np.uint64(GAP_SHIFT)) & np.uint64(REL_MASK)).astype(np.int64)
    return q, q - gap, (words & np.uint64(CHECK_MASK)).astype(np.int64)


def valid_prefix(words: NDArray[np.uint64], end_rel: int) -> int:
    """How many leading entries are well formed and name units below ``end_rel``."""
    q, start, check = fields(words)
    prev = np.concatenate(([np.iinfo(np.int64).min], q[:-1]))
    bad = (check == 0) | (start <= prev) | (q >= end_rel)
    return int(np.argmax(bad)) if bad.any() else len(words)


@dataclass(slots=True)
class _List:
    """One open list file: its descriptor, mapping (and the mapping as words, which
    ``bisect`` searches: numpy's ``searchsorted`` copies a read-only array first), and
    entry count."""

    fd: int
    mm: mmap.mmap
    words: memoryview
    count: int

    def resize(self, count: int) -> None:
        """The list now holds ``count`` entries (written, or cut back)."""
        self.count = count


@dataclass(slots=True)
class _Chain:
    """Dispatch state of one queue: the last unit noted and, per slot, the first unit of
    the stretch the slot's next entry covers (None: the slot has no verdict yet)."""

    last: int
    starts: list[int | None] = field(default_factory=list)

    def noted(self, q: int) -> None:
        """Unit ``q`` is noted."""
        self.last = q


class MatchLists:
    """The match lists of a store's queues (``{store}/filterbits``, beside the verdicts).

    The dispatcher notes each evaluated unit (:meth:`note`) and writes the entries at
    :meth:`flush`, before the units; reads take :meth:`reader`. Thread-safe as
    ``FilterBits`` is (one dispatching thread, reads from any).

    Args:
        directory: ``{store}/filterbits``.
        segment_units: units per verdict file (and per list file).
    """

    def __init__(self, directory: Path, segment_units: int) -> None:
        if segment_units > REL_MASK + 1:
            raise ValueError(f"segment_units {segment_units} above {REL_MASK + 1}")
        self.directory = directory
        self.units = segment_units
        self._lock = threading.Lock()
        self._lists: dict[tuple[str, int, int, int], _List] = {}
        """(topic, queue id, first offset, slot) -> open list."""
        self._chains: dict[tuple[str, int], _Chain] = {}
        self._pending: dict[tuple[str, int, int, int], list[int]] = {}

    # --------------------------------------------------------------- dispatch

    def note(self, topic: str, queue_id: int, q: int, phys: int, slots: int, hit: int) -> None:
        """Note the verdicts of unit ``q`` (at ``phys``) for the topic's ``slots`` slots:
        ``hit`` the TRUE ones as bits, -1 when the unit got no verdict. Entries are
        held until :meth:`flush`."""
        chain = self._chains.get((topic, queue_id))
        if chain is None or q != chain.last + 1:
            if chain is not None and q <= chain.last:  # dispatched again: from q afresh
                self._rewind(topic, queue_id, q)
            chain = self._chains[topic, queue_id] = _Chain(q - 1)
        starts = chain.starts
        while len(starts) < slots:
            starts.append(None)
        chain.noted(q)
        if hit < 0 or not phys & CHECK_MASK:  # no verdict, or no check: not covered
            for s in range(slots):
                starts[s] = q + 1
            return
        base = q - q % self.units
        for s in range(slots):
            first = starts[s]
            if first is None:
                first = q
            if hit >> s & 1:
                entry = pack(q - base, min(q - first, REL_MASK), phys)
                self._pending.setdefault((topic, queue_id, base, s), []).append(entry)
                first = q + 1
            starts[s] = first

    def flush(self) -> None:
        """Write the noted entries, one ``pwrite`` per list file.

        Raises:
            OSError: a list file could not be written.
        """
        pending, self._pending = self._pending, {}
        for key, entries in pending.items():
            data = np.array(entries, "<u8").tobytes()
            with self._lock:
                lst = self._open(key, create=True)
                assert lst is not None
                os.pwrite(lst.fd, data, lst.count * WORD)
                lst.resize(lst.count + len(entries))
            faults.point("match_list_written", what=key)

    def _rewind(self, topic: str, queue_id: int, q: int) -> None:
        """Forget the entries naming units ``q`` and beyond (dispatched again)."""
        self._pending = {
            k: [e for e in v if k[2] + (e >> Q_SHIFT) < q] for k, v in self._pending.items()
        }
        with self._lock:
            for (t, qid, base, _slot), lst in list(self._lists.items()):
                if t != topic or qid != queue_id or base + self.units <= q:
                    continue
                keep = bisect.bisect_left(lst.words, max(q - base, 0) << Q_SHIFT, 0, lst.count)
                if keep < lst.count:
                    os.pwrite(lst.fd, bytes((lst.count - keep) * WORD), keep * WORD)
                    lst.resize(keep)

    # ------------------------------------------------------------------- read

    def reader(self, topic: str, queue_id: int, slot: int) -> MatchReader:
        """The match reader of one slot of one queue (:data:`MatchReader`)."""

        def coverage(
            q0: int, limit: int, low: NDArray[np.uint32], want: int
        ) -> tuple[int, NDArray[np.int64] | None]:
            parts: list[NDArray[np.int64]] = []
            at = q0  # the first unit not covered yet
            base = at - at % self.units
            while at < limit and base < limit and want > 0:
                got = self._cover(topic, queue_id, base, slot, at, limit, low[at - q0 :], want)
                if got is None:  # no entry at or after `at` here: the next file's first
                    base += self.units
                    continue
                end, hits = got
                if hits is None:
                    if not parts:
                        return end, None
                    break
                parts.append(hits + (at - q0))
                want -= len(hits)
                at = end
                base = at - at % self.units
            if not parts:
                return min(limit, base + self.units), None
            return at, parts[0] if len(parts) == 1 else np.concatenate(parts)

        return coverage

    def _cover(
        self,
        topic: str,
        queue_id: int,
        base: int,
        slot: int,
        q0: int,
        limit: int,
        low: NDArray[np.uint32],
        want: int,
    ) -> tuple[int, NDArray[np.int64] | None] | None:
        """:func:`_cover` over one list file (a missing one: nothing covered)."""
        with self._lock:
            lst = self._open((topic, queue_id, base, slot), create=False)
        if lst is None:
            return min(limit, base + self.units), None
        try:
            return _cover(lst, base, q0, limit, low, want)
        except (ValueError, BufferError):  # closed meanwhile
            return min(limit, base + self.units), None

    # ------------------------------------------------------------------ files

    def _open(self, key: tuple[str, int, int, int], *, create: bool) -> _List | None:
        """An open list (under the lock); opening one zeroes a malformed tail."""
        lst = self._lists.get(key)
        if lst is not None:
            return lst
        topic, queue_id, base, slot = key
        path = self.directory / topic / str(queue_id) / f"{base:020d}{SUFFIX}{slot}"
        try:
            fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        except FileNotFoundError:
            return None
        size = self.units * WORD
        if os.fstat(fd).st_size != size:
            os.ftruncate(fd, size)
        mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        words = np.frombuffer(mm, "<u8")
        count = valid_prefix(words, self.units)
        dirty = bool(words[count:].any())
        del words
        if dirty:
            _zero_from(fd, count * WORD, size)
        lst = self._lists[key] = _List(fd, mm, memoryview(mm).cast("Q"), count)
        return lst

    def forget(self, topic: str, queue_id: int, base: int) -> None:
        """Close the lists of one verdict file (it is being deleted) and delete them."""
        with self._lock:
            for key in [k for k in self._lists if k[:3] == (topic, queue_id, base)]:
                _close(self._lists.pop(key))
        folder = self.directory / topic / str(queue_id)
        for f in folder.glob(f"{base:020d}{SUFFIX}*"):
            f.unlink(missing_ok=True)

    def close(self) -> None:
        """Close every list (the dispatch state is dropped too: a reopened store's
        first entries start new chains)."""
        with self._lock:
            for lst in self._lists.values():
                _close(lst)
            self._lists.clear()
            self._chains.clear()
            self._pending.clear()


def _cover(
    lst: _List, base: int, q0: int, limit: int, low: NDArray[np.uint32], want: int
) -> tuple[int, NDArray[np.int64] | None] | None:
    """:data:`MatchReader` over one list file's entries (None: none names ``q0`` or a
    later unit). A chain is followed only through entries naming units below ``limit``
    whose check matches: the stretch after the last of them is left to the caller (read
    another way), however far the next entry says it goes."""
    count = lst.count
    j = bisect.bisect_left(lst.words, max(q0 - base, 0) << Q_SHIFT, 0, count)
    if j == count:
        return None
    n = min(max(want, 1), count - j)
    q, start, check = fields(np.frombuffer(lst.mm, "<u8", n, j * WORD))
    q += base
    start += base
    if start[0] > q0:  # the units before the first entry's stretch: not covered
        return min(int(start[0]), limit), None
    inside = q < limit
    ok = (check != 0) & inside
    ok[1:] &= start[1:] == q[:-1] + 1
    named = np.flatnonzero(ok)
    ok[named] = (low[q[named] - q0].astype(np.int64) & CHECK_MASK) == check[named]
    k = len(ok) if ok.all() else int(np.argmin(ok))  # the chain's trusted entries
    if k == 0:  # its stretch is read another way
        return min(int(q[0]) + 1, limit), None
    return int(q[k - 1]) + 1, q[:k] - q0


def cut_queue(folder: Path, end: int) -> None:
    """Cut one queue's list files at queue offset ``end`` (entries naming units at or
    beyond it, and malformed ones from the first on, zeroed), durably."""
    for f in sorted(folder.glob(f"*{SUFFIX}*")):
        base = int(f.name.partition(SUFFIX)[0])
        if base >= end:
            f.unlink()
            continue
        words = np.fromfile(f, "<u8")
        keep = valid_prefix(words, end - base)
        if words[keep:].any():
            fd = os.open(f, os.O_RDWR)
            try:
                _zero_from(fd, keep * WORD, os.fstat(fd).st_size)
                _platform.fdatasync(fd, what=str(f))
            finally:
                os.close(fd)


def _zero_from(fd: int, at: int, size: int) -> None:
    """Zero a file from ``at`` (cut, then holes to ``size`` again)."""
    os.ftruncate(fd, at)
    os.ftruncate(fd, size)


def _close(lst: _List) -> None:
    lst.words.release()
    with contextlib.suppress(BufferError):
        lst.mm.close()
    os.close(lst.fd)
