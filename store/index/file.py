"""One index file: a mapped hash table of key hashes to CommitLog offsets.

The layout is ``mqstore.index.format``'s. This module adds the file (mapped read-write
for its whole length, created sparse as RocketMQ's mapped-beyond-EOF files are: a
default file is 420 MB and most stores fill a small part of it) and RocketMQ's
``putKey`` / ``selectPhyOffset`` rules.

Space: writing through a mapping into a hole the disk cannot back is a SIGBUS, not
an exception. So the file reserves (``posix_fallocate``) what it is about to touch
before touching it: the header's chunk at creation, each 64 KiB chunk of the slot
table on the first key hashed into it, and the entry area ahead of the next entry,
as much again as the entries written, 64 KiB to 4 MiB at a time (a page at a time
when less than that is free). A small store's index so costs about 1 MiB, not the
8 MiB that 1 MiB slot chunks and a fixed 4 MiB entry reserve took. A reservation that
fails raises ``OSError`` (ENOSPC) *before* any byte of the message is written, so
the file is unchanged and the message can be indexed again later
(``mqstore.consumequeue.dispatch``: "index disabled until space is available").
Allocating a hole does not change what it reads (zeros), so the file's bytes are
the same as without reservations; only the chunks touched are allocated, never the
whole file up front.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from mqstore import _platform, faults
from mqstore.errors import CorruptIndexError
from mqstore.index import format as ifmt

_SLOT_UNPACK = ifmt.SLOT.unpack_from
_SLOT_BYTES = ifmt.SLOT.pack
_ENTRY_PACK = ifmt.ENTRY.pack_into
_FIELDS_BYTES = ifmt.HEADER_FIELDS.pack
_COUNT_AT = ifmt.HEADER_FIELDS.size
_EMPTY_ENTRY = bytes(ifmt.ENTRY_SIZE)
_ENTRY_DTYPE = np.dtype([("h", ">i4"), ("p", ">i8"), ("d", ">i4"), ("v", ">i4")])
assert _ENTRY_DTYPE.itemsize == ifmt.ENTRY_SIZE
I64 = NDArray[np.int64]

SLOT_CHUNK_SHIFT = 16
"""Slot-table reservations are 64 KiB chunks (2**16), reserved on first touch: a
default file's 20 MB table is 306 of them, so a key's first touch of its chunk is
rare after the first few thousand keys."""
ENTRY_RESERVE = 4 << 20
"""The entry area is reserved at most this far ahead of the next entry..."""
ENTRY_RESERVE_FLOOR = 64 << 10
"""... and at least this far (``mqstore._platform.reserve_ahead``)."""


def reserve(fd: int, offset: int, length: int, *, what: str = "") -> None:
    """:func:`mqstore._platform.allocate_range` with the fault point
    ``before_index_allocate``.

    Raises:
        OSError: ENOSPC (or EDQUOT) when the disk cannot back the range.
    """
    _platform.allocate_range(fd, offset, length, point="before_index_allocate", what=what)


@dataclass(frozen=True, slots=True)
class Repair:
    """What :meth:`IndexFile.repair` changed."""

    heads_rolled_back: int
    """Slot heads put back to entries the count covers."""
    fields: tuple[str, ...]
    """Header fields rewritten (``ifmt.Header`` names)."""


class IndexFile:
    """A mapped index file with its header cached in attributes.

    Lookups take no lock: entries are written before their slot (:meth:`put_hashes`),
    so a reader that follows a slot finds the entry whole, even one linked after the
    header's count was read.
    """

    def __init__(
        self,
        path: Path,
        hash_slot_num: int,
        index_num: int,
        *,
        create: bool,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
    ) -> None:
        """Open ``path`` (or create it, with begin = end = the given previous end).

        Raises:
            CorruptIndexError: an existing file has the wrong size.
            OSError: the file cannot be opened or created.
        """
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = ifmt.file_size(hash_slot_num, index_num)
        self._entries_pos = ifmt.entry_position(hash_slot_num, 0)
        slot_end = ifmt.HEADER_SIZE + hash_slot_num * ifmt.SLOT_SIZE
        self._slot_chunks = bytearray(((slot_end - 1) >> SLOT_CHUNK_SHIFT) + 1)
        """1 where a slot-table chunk is known to be allocated."""
        self._slot_chunks_left = len(self._slot_chunks)
        self._reserved_to = 0
        """Byte position up to which the entry area is known to be allocated."""
        self._fd = self._open_mapped(create)
        self._closed = False
        if create:
            self._init_header(end_phy_offset, end_timestamp)
        else:
            self.reload_header()
            # What was written is allocated; what comes next is reserved on first put.
            self._reserved_to = self._entries_pos + self.index_count * ifmt.ENTRY_SIZE

    def _open_mapped(self, create: bool) -> int:
        """Open (or create, sparse) ``self.path``, map it into ``self._mm``; return the fd.

        On any failure the fd is closed and a file being created is removed.
        """
        path = self.path
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o644)
        try:
            if create:
                # Sparse, as RocketMQ's index files are: a default index file is
                # 420 MB and mostly empty slots. Allocating it up front made every
                # default-config store (and the test suite) consume 420 MB per index
                # file; instead each region is reserved before its first write
                # (module docstring), starting with the header's chunk.
                os.ftruncate(fd, self.file_size)
                self._reserve_slot_chunk(fd, 0)
            elif os.fstat(fd).st_size != self.file_size:
                raise CorruptIndexError(
                    f"{path}: size {os.fstat(fd).st_size} != {self.file_size} "
                    f"({self.hash_slot_num} slots, {self.index_num} entries)"
                )
            self._mm = mmap.mmap(fd, self.file_size)
        except BaseException:
            os.close(fd)
            if create:
                path.unlink(missing_ok=True)
            raise
        return fd

    # ------------------------------------------------------------------ header

    def _init_header(self, end_phy_offset: int, end_timestamp: int) -> None:
        """A new file's header: begin = end = the previous file's end, no entries yet."""
        self.begin_timestamp = end_timestamp
        self.end_timestamp = end_timestamp
        self.begin_phy_offset = end_phy_offset
        self.end_phy_offset = end_phy_offset
        self.hash_slot_count = 0
        self.index_count = 1
        self._write_header()

    def _write_header(self) -> None:
        """Write the cached header (:meth:`header`) to the file."""
        self._put_header(*self.header())

    def _put_header(
        self, bt: int, et: int, bp: int, ep: int, used: int, count: int, *, put: bool = False
    ) -> None:
        """Write the header: its first 36 bytes, then ``indexCount`` alone.

        Packed first, then copied in, because ``pack_into`` zeroes its target before
        filling it and a reader could catch the zeros (a count of 0, an empty slot).
        The count goes last, in one aligned 4-byte store: a writer killed part way
        leaves the old count under fields that may be old, new or a mix (a 36-byte
        copy is several stores), never a new count under old fields; :meth:`repair`
        rebuilds the fields from the entries the count covers. ``put``: a put's header
        (the fault point ``index_header_fields_written`` between the two stores).
        """
        mm = self._mm
        mm[0:_COUNT_AT] = _FIELDS_BYTES(bt, et, bp, ep, used)
        if put:
            faults.point("index_header_fields_written", what=str(self.path))
        mm[_COUNT_AT : ifmt.HEADER_SIZE] = _SLOT_BYTES(count)

    def reload_header(self) -> None:
        """Read the header from the mapping (at load, and when another process writes
        the file)."""
        h = ifmt.Header(*ifmt.HEADER.unpack_from(self._mm, 0))
        self.begin_timestamp = h.begin_timestamp
        self.end_timestamp = h.end_timestamp
        self.begin_phy_offset = h.begin_phy_offset
        self.end_phy_offset = h.end_phy_offset
        self.hash_slot_count = h.hash_slot_count
        self.index_count = max(1, h.index_count)

    def header(self) -> ifmt.Header:
        """The header as cached (what the file holds after the last put)."""
        return ifmt.Header(
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    @property
    def is_full(self) -> bool:
        """No room for another entry (``indexCount >= indexNum``)."""
        return self.index_count >= self.index_num

    def time_matched(self, begin: int, end: int) -> bool:
        """Whether [begin, end] overlaps the file's [beginTimestamp, endTimestamp]."""
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or b <= begin <= e or b <= end <= e

    # ------------------------------------------------------------------- write

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add an entry for ``key`` (already ``topic#key``); False when the file is full."""
        return self.put_hashes((ifmt.key_hash(key),), phy_offset, store_timestamp) == 1

    def put_hashes(self, hashes: Sequence[int], phy_offset: int, store_timestamp: int) -> int:
        """Add one message's entries (``key_hash`` values, in order); return how many fit.

        RocketMQ's ``putKey`` per key, with the header written once for the whole
        message instead of once per key (the bytes are the same once it returns).
        """
        count = self.index_count
        n = min(len(hashes), self.index_num - count)
        if n <= 0:
            return 0
        mm = self._mm
        slots = self.hash_slot_num
        entries_pos = self._entries_pos
        # Reserve before writing anything (a failure leaves the file as it was).
        need_end = entries_pos + (count + n) * ifmt.ENTRY_SIZE
        if need_end > self._reserved_to or self._slot_chunks_left:
            self._reserve_for(hashes, n, need_end)
        begin = self.begin_timestamp
        diff = ifmt.time_diff_seconds(store_timestamp, begin) if begin > 0 else 0
        used = self.hash_slot_count
        for i in range(n):
            h = hashes[i]
            slot_pos = ifmt.HEADER_SIZE + (h % slots) * ifmt.SLOT_SIZE
            (slot_value,) = _SLOT_UNPACK(mm, slot_pos)
            if slot_value <= 0 or slot_value > count:
                slot_value = 0
                used += 1
            # The entry before its slot: a reader that finds the slot finds the entry
            # whole (``_select``), even before the count in the header covers it.
            _ENTRY_PACK(mm, entries_pos + count * ifmt.ENTRY_SIZE, h, phy_offset, diff, slot_value)
            mm[slot_pos : slot_pos + 4] = _SLOT_BYTES(count)
            if count <= 1:
                self.begin_phy_offset = phy_offset
                self.begin_timestamp = begin = store_timestamp
                diff = ifmt.time_diff_seconds(store_timestamp, begin)
            count += 1
        self.hash_slot_count = used
        self.index_count = count
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        faults.point("index_slots_written", what=str(self.path))
        # Slots, counts and the header are overwritten in place while the store may
        # read them from another process (``dispatch_process``): see _put_header.
        self._put_header(
            self.begin_timestamp,
            store_timestamp,
            self.begin_phy_offset,
            phy_offset,
            used,
            count,
            put=True,
        )
        return n

    def put_entries(
        self, hashes: NDArray[np.int32], phy_offsets: I64, store_timestamps: I64
    ) -> int:
        """Add the entries of many messages at once (one element per entry, messages in
        log order, a message's keys in order); return how many fit.

        The bytes are those of :meth:`put_hashes` called per message: entry ``k`` gets
        number ``count + k``, the previous entry of its slot as ``prevIndex`` (an earlier
        entry of the batch, else the slot's value if it is a valid entry number) and
        its time from the file's begin (the file's first entry from the begin it was
        created with, every later one from the first entry's message). Entries are
        written before the slots that point at them, the header last. Space is reserved
        before anything is written, so a failure leaves the file unchanged.

        Raises:
            OSError: ENOSPC/EDQUOT reserving (nothing written).
        """
        count = self.index_count
        n = min(int(hashes.size), self.index_num - count)
        if n <= 0:
            return 0
        h = hashes[:n].astype(np.int64)
        phys = phy_offsets[:n]
        ts = store_timestamps[:n]
        slots = h % self.hash_slot_num
        need_end = self._entries_pos + (count + n) * ifmt.ENTRY_SIZE
        if need_end > self._reserved_to:
            self._reserve_entries(need_end)
        if self._slot_chunks_left:
            touched = np.unique((ifmt.HEADER_SIZE + slots * ifmt.SLOT_SIZE) >> SLOT_CHUNK_SHIFT)
            for c in touched.tolist():
                if not self._slot_chunks[c]:
                    self._reserve_slot_chunk(self._fd, c)
        nums = np.arange(count, count + n, dtype=np.int64)
        begin0 = self.begin_timestamp
        if count <= 1:  # the file's first entry sets its begin
            self.begin_phy_offset = int(phys[0])
            self.begin_timestamp = int(ts[0])
        begin = np.full(n, self.begin_timestamp, np.int64)
        if count <= 1:
            begin[0] = begin0
        secs = np.trunc((ts - begin) / 1000)  # as time_diff_seconds: float division
        diff = np.where(begin > 0, np.clip(secs, 0, ifmt.INT_MAX), 0).astype(np.int64)
        order = np.argsort(slots, kind="stable")
        s_sorted = slots[order]
        n_sorted = nums[order]
        first = np.r_[True, s_sorted[1:] != s_sorted[:-1]]
        last = np.r_[s_sorted[1:] != s_sorted[:-1], True]
        prev_sorted = np.r_[0, n_sorted[:-1]]
        mm = self._mm
        table = np.frombuffer(mm, ">i4", self.hash_slot_num, ifmt.HEADER_SIZE)
        try:
            old = table[s_sorted[first]].astype(np.int64)
            valid = (old > 0) & (old <= n_sorted[first])
            prev_sorted[first] = np.where(valid, old, 0)
            used = self.hash_slot_count + int(valid.size - np.count_nonzero(valid))
            prev = np.empty(n, np.int64)
            prev[order] = prev_sorted
            entries = np.empty(n, _ENTRY_DTYPE)
            entries["h"] = h
            entries["p"] = phys
            entries["d"] = diff
            entries["v"] = prev
            at = self._entries_pos + count * ifmt.ENTRY_SIZE
            mm[at : at + n * ifmt.ENTRY_SIZE] = entries.tobytes()
            faults.point("index_entries_written", what=str(self.path))
            table[s_sorted[last]] = n_sorted[last]
        finally:
            del table  # no buffer export may outlive the call (close unmaps)
        count += n
        self.hash_slot_count = used
        self.index_count = count
        self.end_phy_offset = end_phy = int(phys[-1])
        self.end_timestamp = end_ts = int(ts[-1])
        faults.point("index_slots_written", what=str(self.path))
        self._put_header(
            self.begin_timestamp, end_ts, self.begin_phy_offset, end_phy, used, count, put=True
        )
        return n

    def _reserve_for(self, hashes: Sequence[int], n: int, entries_end: int) -> None:
        """Reserve the entry area to ``entries_end`` and the slot chunks of ``hashes[:n]``.

        Called once per put, only when something may be unreserved.

        Raises:
            OSError: ENOSPC/EDQUOT (nothing of the message written yet).
        """
        if entries_end > self._reserved_to:
            self._reserve_entries(entries_end)
        if self._slot_chunks_left:
            slots = self.hash_slot_num
            chunks = self._slot_chunks
            for i in range(n):
                c = (ifmt.HEADER_SIZE + (hashes[i] % slots) * ifmt.SLOT_SIZE) >> SLOT_CHUNK_SHIFT
                if not chunks[c]:
                    self._reserve_slot_chunk(self._fd, c)

    def _reserve_slot_chunk(self, fd: int, chunk: int) -> None:
        start = chunk << SLOT_CHUNK_SHIFT
        end = min(start + (1 << SLOT_CHUNK_SHIFT), self._entries_pos, self.file_size)
        reserve(fd, start, end - start, what=str(self.path))
        self._slot_chunks[chunk] = 1
        self._slot_chunks_left -= 1

    def _reserve_entries(self, need_end: int) -> None:
        start = self._reserved_to if self._reserved_to > self._entries_pos else self._entries_pos
        ahead = _platform.reserve_ahead(start - self._entries_pos, ENTRY_RESERVE,
                                        ENTRY_RESERVE_FLOOR)  # fmt: skip
        end = min(self.file_size, max(need_end, start + ahead))
        try:
            reserve(self._fd, start, end - start, what=str(self.path))
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            # Not that much left: as much as this message needs, to the end of its page.
            end = min(self.file_size, -(-need_end // mmap.PAGESIZE) * mmap.PAGESIZE)
            reserve(self._fd, start, end - start, what=str(self.path))
        self._reserved_to = end

    # ----------------------------------------------------------------- repair

    @property
    def header_written(self) -> bool:
        """Whether the file's header was ever written (a file is created with a count
        of 1 before any entry: 0 means its creator was killed between sizing the file
        and writing the header)."""
        return bool(ifmt.HEADER.unpack_from(self._mm, 0)[5] != 0)

    def repair(self, previous_end: tuple[int, int] | None) -> Repair:
        """Make the newest file's header agree with its entries after its writer was
        killed; return what changed.

        ``previous_end`` is the previous file's (endTimestamp, endPhyOffset), the
        values this file was created with (None for a file with no predecessor).

        A put writes its entries, then the slot heads that point at them, then the
        header (:meth:`_put_header`). A kill before the header leaves heads past the
        count (:meth:`roll_back_uncounted` puts them back); a kill inside the header's
        copy leaves any mix of old and new fields. So no field is trusted on its own:

        * the count is the header's, once the heads are consistent with it: no head
          at or past it after the roll-back, so every entry it covers is linked;
        * ``endPhyOffset`` is the last counted entry's offset, ``beginPhyOffset`` the
          first's, ``hashSlotCount`` the number of slots whose head is a counted
          entry (a put counts a slot the first time it links an entry there);
        * a file with no counted entry gets begin = end = the previous file's end,
          as it was created;
        * ``beginTimestamp`` is only ever rewritten by the file's first put: when it
          still holds the creation value but the first entry's time offset (taken
          from that value) shows its message was stored a second or more later,
          the first put was cut and is rolled back whole (the file holds nothing
          else: a later put would have rewritten the field).

        ``endTimestamp`` is not in the entries (they keep seconds); it is restated
        from the CommitLog by the index catch-up, which starts at the last indexed
        message (``IndexService.build``), and rewritten by every put.

        Without this, a kill inside the header could leave ``endPhyOffset`` new and
        the count old: the catch-up would start after the cut put's earlier
        messages, whose keys are then never found.

        For the writer only (at load, before any put); a reader never calls it.
        """
        rolled = self.roll_back_uncounted()
        if previous_end is not None:
            created_ts, created_phy = previous_end
        else:  # the first file: created with zeros (or after older files expired)
            created_ts = min(self.begin_timestamp, self.end_timestamp)
            created_phy = min(self.begin_phy_offset, self.end_phy_offset)
        if self.index_count > 1 and created_ts > 0 and self.begin_timestamp == created_ts:
            first = self._entry(1)
            if first.time_diff > 0:  # stored >= 1 s after created_ts: the field is stale
                rolled += self._roll_back_heads(1)
                self.index_count = 1
        before = self.header()
        count = self.index_count
        if count <= 1:
            self.begin_timestamp = self.end_timestamp = created_ts
            self.begin_phy_offset = self.end_phy_offset = created_phy
            self.hash_slot_count = 0
        else:
            self.begin_phy_offset = self._entry(1).phy_offset
            self.end_phy_offset = self._entry(count - 1).phy_offset
            table = np.frombuffer(self._mm, ">i4", self.hash_slot_num, ifmt.HEADER_SIZE)
            try:
                self.hash_slot_count = int(np.count_nonzero((table > 0) & (table < count)))
            finally:
                del table
        after = self.header()
        changed = tuple(f for f, a, b in zip(after._fields, before, after, strict=True) if a != b)
        if changed or ifmt.HEADER.unpack_from(self._mm, 0) != after:
            self._write_header()
        return Repair(rolled, changed)

    def _entry(self, number: int) -> ifmt.Entry:
        return ifmt.Entry(
            *ifmt.ENTRY.unpack_from(self._mm, ifmt.entry_position(self.hash_slot_num, number))
        )

    def roll_back_uncounted(self) -> int:
        """Undo what a writer killed in the middle of a put left past the header's count;
        return the number of slot heads put back.

        A put (:meth:`put_hashes`, :meth:`put_entries`) writes its entries, then the slot
        heads that point at them, then the header whose count covers them. A writer
        killed before the header leaves heads pointing at entries numbered
        ``>= indexCount``, while the header's count still describes the file as it was
        before the put. The restarted writer resumes from the header (the index
        catch-up starts at its last message) and puts those entries again, and a put
        takes a head past the count for an empty slot (the older entries of that slot
        are cut off: their keys are no longer found) and a head equal to it for a
        valid predecessor (the new entry points at itself). Each such head is walked
        back through the uncounted entries' ``prevIndex`` links to the value it had
        before the put: the entries are whole (written before any head pointed at
        them), and each links to an older one. The entries past the count are left as
        they are: nothing points at them any more, and the put done again writes the
        same bytes over them.

        For the writer only (at load, before any put); a reader never calls it.
        """
        count = self.index_count
        at = self._entries_pos + count * ifmt.ENTRY_SIZE
        if count >= self.index_num or self._mm[at : at + ifmt.ENTRY_SIZE] == _EMPTY_ENTRY:
            return 0  # no entry past the count, so no head points at one
        return self._roll_back_heads(count)

    def _roll_back_heads(self, count: int) -> int:
        """Walk every slot head ``>= count`` back along ``prevIndex`` links to below
        ``count``; return how many heads changed."""
        mm = self._mm
        table = np.frombuffer(mm, ">i4", self.hash_slot_num, ifmt.HEADER_SIZE)
        prevs = np.frombuffer(mm, _ENTRY_DTYPE, self.index_num, self._entries_pos)["v"]
        try:
            bad = np.flatnonzero(table >= count)
            if not bad.size:
                return 0
            heads = table[bad].astype(np.int64)
            past = heads >= count
            while past.any():
                v = heads[past]
                inside = v < self.index_num
                prev = np.zeros(v.size, np.int64)
                prev[inside] = prevs[v[inside]]
                # A put links an entry to an older one; anything else is not a put's.
                heads[past] = np.where((prev >= 0) & (prev < v), prev, 0)
                past = heads >= count
            table[bad] = heads
            return int(bad.size)
        finally:
            del table, prevs  # no buffer export may outlive the call (close unmaps)

    def trailing_entries_of(self, phy_offset: int) -> tuple[int, bool]:
        """How many of the last counted entries point at ``phy_offset`` (one message's
        keys are consecutive entries), and whether they reach back to entry 1 (the
        message's earlier keys may then be in the previous file)."""
        last = self.index_count - 1
        if last < 1:
            return 0, True
        phys = np.frombuffer(self._mm, _ENTRY_DTYPE, last, self._entries_pos + ifmt.ENTRY_SIZE)
        try:
            window = 64
            while True:
                lo = max(0, last - window)
                tail = phys["p"][lo:last]
                other = np.flatnonzero(tail != phy_offset)
                if other.size:
                    return int(tail.size - 1 - other[-1]), False
                if lo == 0:
                    return last, True
                window *= 8
        finally:
            del phys

    def restate_last(self, phy_offset: int, store_timestamp: int) -> bool:
        """Set the header's end time (and begin time, when the file's first entry is
        this message's) from the last indexed message at ``phy_offset`` as the
        CommitLog holds it; True if the header changed.

        The entries keep whole seconds only, so after a cut header copy
        (:meth:`repair`) these times come from the message itself.
        """
        if self.index_count <= 1 or self.end_phy_offset != phy_offset:
            return False
        changed = False
        if self.end_timestamp != store_timestamp:
            self.end_timestamp = store_timestamp
            changed = True
        if self.begin_phy_offset == phy_offset and self.begin_timestamp != store_timestamp:
            self.begin_timestamp = store_timestamp
            changed = True
        if changed:
            self._write_header()
        return changed

    # ------------------------------------------------------------------ lookup

    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """CommitLog offsets of entries whose hash equals ``key``'s, stored in [begin, end].

        Newest first, at most ``max_num``. Hash collisions are included: the caller
        filters by the real key.
        """
        return self.select_by_hash(ifmt.key_hash(key), max_num, begin, end)

    def select_by_hash(self, key_hash: int, max_num: int, begin: int, end: int) -> list[int]:
        """:meth:`select_phy_offsets` given the key's hash (``ifmt.key_hash(key)``)."""
        out: list[int] = []
        if self._closed:
            return out
        try:
            return self._select(key_hash, max_num, begin, end, out)
        except ValueError:  # closed (expired) while we read
            return out

    def _select(
        self, key_hash: int, max_num: int, begin: int, end: int, out: list[int]
    ) -> list[int]:
        mm = self._mm
        count = self.index_count
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

    # --------------------------------------------------------------- lifecycle

    def flush(self) -> None:
        """Write the header and sync the file.

        Raises:
            OSError: the sync failed.
        """
        if self._closed:
            return
        self._write_header()
        _platform.fdatasync(self._fd, what=str(self.path))

    def close(self) -> None:
        """Unmap and close (no flush)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(BufferError):
            self._mm.close()
        os.close(self._fd)

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"IndexFile({self.path.name}, count={self.index_count}/{self.index_num})"
