"""Reading an index file: RocketMQ's ``selectPhyOffset`` over the mapped hash table.

A mixin: :class:`~mqstore.index.file.IndexFile` inherits :class:`LookupMixin` and
provides the mapping and the cached header it reads. Reads take no lock: entries are
written before their slot (``IndexFile.put_hashes``), so a reader that follows a slot
finds the entry whole, even one linked after the header's count was read.
"""

from __future__ import annotations

import mmap

from mqstore.index import format as ifmt

_EMPTY_ENTRY = bytes(ifmt.ENTRY_SIZE)


class LookupMixin:
    """select_phy_offsets and entries (mixed into IndexFile)."""

    hash_slot_num: int
    index_num: int
    index_count: int
    begin_timestamp: int
    _mm: mmap.mmap
    _closed: bool

    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """CommitLog offsets of entries whose hash equals ``key``'s, stored in [begin, end].

        Newest first, at most ``max_num``. Hash collisions are included: the caller
        filters by the real key.
        """
        out: list[int] = []
        if self._closed:
            return out
        try:
            return self._select(key, max_num, begin, end, out)
        except ValueError:  # closed (expired) while we read
            return out

    def _select(self, key: str, max_num: int, begin: int, end: int, out: list[int]) -> list[int]:
        mm = self._mm
        count = self.index_count
        key_hash = ifmt.key_hash(key)
        (slot_value,) = ifmt.SLOT.unpack_from(mm, ifmt.slot_position(key_hash % self.hash_slot_num))
        if count < slot_value < self.index_num:
            # Linked since our count was read (by another thread, or the process this
            # store follows): entries are written before their slot, so a non-empty
            # entry there is whole. An empty one is a slot torn by a crash.
            pos = ifmt.entry_position(self.hash_slot_num, slot_value)
            if mm[pos : pos + ifmt.ENTRY_SIZE] != _EMPTY_ENTRY:
                count = slot_value + 1
        if slot_value <= 0 or slot_value > count or count <= 1:
            return out
        begin_ts = self.begin_timestamp
        current = slot_value
        while len(out) < max_num:
            e = ifmt.Entry(
                *ifmt.ENTRY.unpack_from(mm, ifmt.entry_position(self.hash_slot_num, current))
            )
            if e.time_diff < 0:
                break
            time_read = begin_ts + e.time_diff * 1000
            if e.key_hash == key_hash and begin <= time_read <= end:
                out.append(e.phy_offset)
            prev = e.prev_index
            if prev <= 0 or prev > count or prev == current or time_read < begin:
                break
            current = prev
        return out

    def entries(self) -> list[ifmt.Entry]:
        """Every entry in order of insertion (numbers 1 .. indexCount-1): for checkers."""
        return [
            ifmt.Entry(
                *ifmt.ENTRY.unpack_from(self._mm, ifmt.entry_position(self.hash_slot_num, i))
            )
            for i in range(1, self.index_count)
        ]
