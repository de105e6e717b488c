"""A bounded set of mapped consume-queue files, least recently used unmapped first.

A store may hold 100,000 queues of which a few are written or read at a time. Each
mapped file costs a mapping, two descriptors (Python's ``mmap`` keeps its own copy
of the descriptor) and the resident pages its units touched, so an idle queue should
hold none: queue files are opened unmapped (``Segments(lazy=True)``) and every access
to their bytes goes through :meth:`MappingPool.view`, which maps on demand and, once
more than ``capacity`` files are mapped, unmaps the least recently used ones.

Unmapping is safe under readers and the writer: a view taken from :meth:`view`
stays valid after its file is unmapped (``MappedFile.unmap`` only drops the file's
own references; the mapping goes with the last view), and units written through it
are in the page cache like any other write. Recency is a counter stamped on the file
on each use, read lock-free; only mapping and eviction take the pool's lock.
"""

from __future__ import annotations

import itertools
import threading

from mqstore.commitlog.mapped_file import UNMAPPED, MappedFile

DEFAULT_CAPACITY = 1024


class MappingPool:
    """At most about ``capacity`` mapped files (eviction brings it to 3/4 of that)."""

    __slots__ = ("_clock", "_lock", "_mapped", "capacity")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"a mapping pool holds at least one file, not {capacity}")
        self.capacity = capacity
        self._mapped: set[MappedFile] = set()
        self._lock = threading.Lock()
        self._clock = itertools.count(1)

    def __len__(self) -> int:
        return len(self._mapped)

    def view(self, mf: MappedFile) -> memoryview:
        """The whole file's view, mapping it if needed (and unmapping others).

        Raises:
            OSError: the file cannot be opened or mapped (deleted meanwhile, ...).
            ValueError: the file was closed.
        """
        mf.used_at = next(self._clock)
        v = mf.view  # one read: the mapped view, or UNMAPPED (unmap sets it first)
        if v is not UNMAPPED:
            return v
        with self._lock:
            v = mf.map()
            self._mapped.add(mf)
            if len(self._mapped) > self.capacity:
                self._evict(keep=mf)
        return v

    def _evict(self, keep: MappedFile) -> None:
        """Unmap the least recently used files down to 3/4 of the capacity."""
        target = max(1, self.capacity * 3 // 4)
        mapped = self._mapped
        stale = [m for m in mapped if not m.is_mapped]
        mapped.difference_update(stale)
        excess = len(mapped) - target
        if excess <= 0:
            return
        for m in sorted(mapped, key=_used_at)[:excess]:
            if m is not keep:
                m.unmap()
                mapped.discard(m)

    def forget(self, mf: MappedFile) -> None:
        """``mf`` is being closed or deleted: stop tracking it."""
        with self._lock:
            self._mapped.discard(mf)

    def unmap_all(self) -> None:
        """Unmap every file (a store closing, a test wanting cold reads)."""
        with self._lock:
            for m in self._mapped:
                m.unmap()
            self._mapped.clear()


def _used_at(mf: MappedFile) -> int:
    return mf.used_at
