"""The index service: the ordered index files of ``index/``, building and querying them.

RocketMQ ``IndexService``. For every dispatched message (ROLLBACK excepted) it adds
``topic#UNIQ_KEY`` and ``topic#k`` for each space-separated token ``k`` of KEYS to the
newest file; a full file is followed by a new one whose begin = end = the full file's
end, and is then flushed in the background, after which the checkpoint's
``indexMsgTimestamp`` becomes its end time.

Recovery (``load``): after a crash, files newer than ``indexMsgTimestamp`` may be
torn and are destroyed (RocketMQ does the same). RocketMQ then re-indexes only what
abnormal CommitLog recovery re-dispatches, which loses the keys of older messages
that were in the destroyed file unless ``messageIndexSafe`` is set. :meth:`load`
instead returns the CommitLog offset from which the destroyed files must be rebuilt,
so the store re-indexes exactly them.

Idempotence: a message at or before the last indexed one is skipped, so re-dispatch
after a crash or a restart adds no duplicates.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from mqstore.config import StoreConfig
from mqstore.errors import CorruptIndexError
from mqstore.index import format as ifmt
from mqstore.index.file import IndexFile

log = logging.getLogger(__name__)

LONG_MAX = (1 << 63) - 1
I64 = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class QueryOffsetResult:
    """CommitLog offsets found for a key (hash matches: filter by the real key)."""

    phy_offsets: tuple[int, ...]
    index_last_update_timestamp: int
    index_last_update_phy_offset: int


@dataclass(frozen=True, slots=True)
class BatchStop:
    """Where :meth:`IndexService.build_batch` stopped: the first message (its number in
    the batch) not wholly indexed, and the error that stopped it."""

    message: int
    error: OSError


def _nothing_fenced(_offset: int) -> bool:
    return False


class IndexService:
    """All index files of one directory."""

    def __init__(
        self,
        directory: Path,
        hash_slot_num: int,
        index_num: int,
        *,
        on_file_full: Callable[[int], None] | None = None,
        clock: Callable[[], int] | None = None,
        on_new_file: Callable[[], object] | None = None,
        fenced: Callable[[int], bool] | None = None,
    ) -> None:
        self.directory = directory
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.files: list[IndexFile] = []
        self._on_file_full = on_file_full
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._lock = threading.RLock()
        self._flushers: list[threading.Thread] = []
        self.error: BaseException | None = None
        self.on_new_file = on_new_file
        """Called after a new index file is created (the store's disk check)."""
        self.following = False
        """True when another process writes the files (``dispatch_process``): queries
        then first map new files, re-read headers and let go of deleted files
        (:meth:`follow`)."""
        self.fenced = fenced or _nothing_fenced
        """Whether a CommitLog offset lies in a range recovery fenced off as damaged
        (the store's quarantine): :meth:`query` leaves such entries out."""

    def follow(self) -> None:
        """From now on another process writes the files (``dispatch_process``); this
        one only reads them as that process leaves them."""
        self.following = True

    def refresh(self) -> None:
        """Following: catch up with the files as the writing process left them."""
        with self._lock:
            kept = [f for f in self.files if f.path.exists()]
            for f in self.files:
                if f not in kept:
                    f.close()
            self.files = kept
            last = self.files[-1].path.name if self.files else ""
            try:
                names = sorted(
                    n
                    for n in os.listdir(self.directory)
                    if len(n) == ifmt.NAME_LENGTH and n.isdigit() and n > last
                )
            except FileNotFoundError:
                names = []
            for name in names:
                try:
                    self.files.append(
                        IndexFile(
                            self.directory / name, self.hash_slot_num, self.index_num, create=False
                        )
                    )
                except (OSError, CorruptIndexError):
                    break  # still being created: next time
            # Every file not full when last read may have grown since (several
            # files can fill between two queries); a full file is never written again.
            for f in self.files:
                if not f.is_full:
                    f.reload_header()

    @classmethod
    def for_store(
        cls,
        cfg: StoreConfig,
        on_file_full: Callable[[int], None],
        *,
        on_new_file: Callable[[], object] | None = None,
        fenced: Callable[[int], bool] | None = None,
    ) -> IndexService | None:
        """The index of ``cfg``'s store (None with ``message_index_enable=False``)."""
        if not cfg.message_index_enable:
            return None
        return cls(
            cfg.index_path,
            cfg.max_hash_slot_num,
            cfg.max_index_num,
            on_file_full=on_file_full,
            on_new_file=on_new_file,
            fenced=fenced,
        )

    # ----------------------------------------------------------------- loading

    def load(
        self, *, last_exit_ok: bool, index_msg_timestamp: int, closed_cleanly: bool = False
    ) -> int | None:
        """Map the index files; after a crash destroy those newer than the checkpoint.

        The newest file is then rid of a put cut short by a kill, its header made to
        agree with its entries (:meth:`IndexFile.repair`), after a clean exit too: a
        dispatcher process restarted after a SIGKILL loads the files as they were left.
        Not with ``closed_cleanly``: the store's clean close was recorded and matched
        (``mqstore.commitlog.clean_close``), so its writer stopped between puts, and the
        repair's pass over the slot table (20 MB by default) is not paid at open.

        Returns the CommitLog offset from which destroyed files must be re-indexed
        (None when nothing was destroyed).

        Raises:
            CorruptIndexError: a file of the wrong size.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        names = sorted(
            n for n in os.listdir(self.directory) if len(n) == ifmt.NAME_LENGTH and n.isdigit()
        )
        rebuild_from: int | None = None
        for i, name in enumerate(names):
            path = self.directory / name
            if i == len(names) - 1 and path.stat().st_size == 0:
                # Killed between creating the newest file and sizing it (as RocketMQ's
                # loader, a zero-length last file is dropped): it holds no entry, but
                # what was headed for it must be indexed again.
                log.info("index: removing empty %s left by a crash", name)
                path.unlink()
                begin = self.files[-1].end_phy_offset if self.files else 0
                rebuild_from = begin if rebuild_from is None else min(rebuild_from, begin)
                continue
            f = IndexFile(path, self.hash_slot_num, self.index_num, create=False)
            if i == len(names) - 1 and not f.header_written:
                # Killed between sizing the newest file and writing its header (which
                # comes before any entry): as an empty file.
                log.info("index: removing %s, its header never written", name)
                f.destroy()
                begin = self.files[-1].end_phy_offset if self.files else 0
                rebuild_from = begin if rebuild_from is None else min(rebuild_from, begin)
                continue
            # A header with no end time is an empty file or one whose header page was
            # lost: after a crash, rebuild it from where the previous file ended.
            torn = f.end_timestamp <= 0
            if not last_exit_ok and (torn or f.end_timestamp > index_msg_timestamp):
                begin = f.begin_phy_offset
                if torn:
                    begin = self.files[-1].end_phy_offset if self.files else 0
                rebuild_from = begin if rebuild_from is None else min(rebuild_from, begin)
                log.info("index: destroying %s (newer than the checkpoint)", f.path.name)
                f.destroy()
                continue
            self.files.append(f)
        if self.files and not closed_cleanly:
            # Only the newest file is ever written, so only it can hold a killed put.
            prev = self.files[-2] if len(self.files) > 1 else None
            newest = self.files[-1]
            fixed = newest.repair(
                (prev.end_timestamp, prev.end_phy_offset) if prev is not None else None
            )
            if fixed.heads_rolled_back or fixed.fields:
                log.info(
                    "index: %s: a put cut short: %d slot heads put back, header fields %s "
                    "restated from the entries",
                    newest.path.name,
                    fixed.heads_rolled_back,
                    ", ".join(fixed.fields) or "none",
                )
        return rebuild_from

    # ----------------------------------------------------------------- writing

    def _boundary(self, phy_offset: int) -> bool | None:
        """None: ``phy_offset`` is new; False: already indexed (before the last indexed
        message); True: it *is* the last indexed message, whose keys may be partly in
        (a crash can stop between two keys, or between two files)."""
        if not self.files:
            return None
        last = self.files[-1]
        if phy_offset < last.end_phy_offset:
            return False
        if phy_offset == last.end_phy_offset and (last.index_count > 1 or len(self.files) > 1):
            return True
        return None

    def _indexed_keys(self, phy_offset: int, store_timestamp: int) -> int:
        """How many of the last indexed message's keys are in (it is at ``phy_offset``).

        A message's keys are put in order, as consecutive entries, so the ones in are
        a prefix of its keys: the entries at the end of the index that point at it,
        counted back through as many files as they span. The header's times are also
        restated from the message (:meth:`IndexFile.restate_last`).
        """
        with self._lock:
            files = list(self.files)
        if files:
            files[-1].restate_last(phy_offset, store_timestamp)
        n = 0
        for f in reversed(files):
            k, reached_start = f.trailing_entries_of(phy_offset)
            n += k
            if not reached_start:
                break
        return n

    def build(
        self,
        topic: str,
        phy_offset: int,
        store_timestamp: int,
        uniq_key: str | None,
        keys: Iterable[str],
    ) -> None:
        """Index one message's UNIQ_KEY and KEYS tokens; keys already there are skipped
        (RocketMQ skips messages before the last indexed one; we also complete that
        last one, after the keys of it already in, instead of indexing it twice).

        Raises:
            OSError: a new file could not be created.
        """
        boundary = self._boundary(phy_offset)
        if boundary is False:
            return
        prefix = topic + "#"
        full = [prefix + k for k in (uniq_key, *keys) if k]
        if boundary:
            full = full[self._indexed_keys(phy_offset, store_timestamp) :]
        key_hash = ifmt.key_hash
        hashes = [key_hash(k) for k in full]
        files = self.files
        f = files[-1] if files else None
        while hashes:
            if f is None or f.index_count >= f.index_num:
                f = self._writable()
            n = f.put_hashes(hashes, phy_offset, store_timestamp)
            hashes = hashes[n:]

    def build_batch(
        self,
        phy_offsets: I64,
        store_timestamps: I64,
        key_record: I64,
        key_hashes: NDArray[np.int32],
    ) -> BatchStop | None:
        """:meth:`build` for many messages at once, with their keys already hashed.

        Message ``i`` is at ``phy_offsets[i]`` (increasing) and stored at
        ``store_timestamps[i]``; ``key_hashes[k]`` (``key_hash("topic#key")``) belongs to
        message ``key_record[k]``, in the order :meth:`build` takes the keys. The files
        end up byte for byte as :meth:`build` per message leaves them: messages before
        the last indexed one are skipped, the last indexed one gets only the keys it
        lacks, full files are followed by new ones.

        Returns None when every key is in, else where and why it stopped: a new file
        could not be created or its space reserved (nothing of that file's part
        written), after the keys :meth:`build` per message would have written before
        raising the same error for the same message.
        """
        phys = phy_offsets[key_record]
        ts = store_timestamps[key_record]
        h = key_hashes
        rec = key_record
        files = self.files
        if files:
            last = files[-1]
            end = last.end_phy_offset
            keep = phys > end
            if not (last.index_count > 1 or len(files) > 1):
                keep |= phys == end  # nothing indexed yet: the message is new
            else:
                at = np.flatnonzero(phys == end)  # the last indexed message's keys, in order
                if at.size:
                    ts_end = int(store_timestamps[key_record[at[0]]])
                    keep[at[self._indexed_keys(end, ts_end) :]] = True
            if not keep.all():
                phys, ts, h, rec = phys[keep], ts[keep], h[keep], rec[keep]
        f = files[-1] if files else None
        while h.size:
            try:
                if f is None or f.index_count >= f.index_num:
                    f = self._writable()
                n = f.put_entries(h, phys, ts)
            except OSError as e:
                return BatchStop(int(rec[0]), e)
            h, phys, ts, rec = h[n:], phys[n:], ts[n:], rec[n:]
        return None

    def _writable(self) -> IndexFile:
        with self._lock:
            last = self.files[-1] if self.files else None
            if last is not None and not last.is_full:
                return last
            end_phy = last.end_phy_offset if last is not None else 0
            end_ts = last.end_timestamp if last is not None else 0
            f = IndexFile(
                self._new_path(),
                self.hash_slot_num,
                self.index_num,
                create=True,
                end_phy_offset=end_phy,
                end_timestamp=end_ts,
            )
            self.files.append(f)
        if self.on_new_file is not None:
            self.on_new_file()
        if last is not None:
            self._flush_full_later(last)
        return f

    def _new_path(self) -> Path:
        """A name after every existing one, even if the clock went back."""
        self.directory.mkdir(parents=True, exist_ok=True)
        ts = self._clock()
        if self.files:
            last = self.files[-1].path.name
            if ifmt.file_name(ts) <= last:
                ts = ifmt.name_to_millis(last) + 1
        while (self.directory / ifmt.file_name(ts)).exists():
            ts += 1
        return self.directory / ifmt.file_name(ts)

    def _flush_full_later(self, full: IndexFile) -> None:
        def run() -> None:
            try:
                full.flush()
            except OSError as e:  # a later thorough flush or the next recovery covers it
                self.error = e
                log.error("index: flushing full file %s failed: %s", full.path.name, e)
                return
            if self._on_file_full is not None:
                self._on_file_full(full.end_timestamp)

        # One at a time, in order: indexMsgTimestamp must only move forward.
        self.join_flushers()
        t = threading.Thread(target=run, name="index-flush", daemon=True)
        self._flushers.append(t)
        t.start()

    # ----------------------------------------------------------------- queries

    @property
    def end_phy_offset(self) -> int:
        """CommitLog offset of the last indexed message (0 with no files)."""
        return self.files[-1].end_phy_offset if self.files else 0

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """Offsets of messages whose ``topic#key`` hash matches, newest files first.

        RocketMQ ``queryOffset``: files whose time range overlaps [begin, end] are
        searched until ``max_num`` offsets are found or a file starts before
        ``begin``. Contains hash false positives.
        """
        if self.following:
            self.refresh()
        with self._lock:
            files = list(self.files)
        full_key = ifmt.build_key(topic, key)
        out: list[int] = []
        last_ts = last_phy = 0
        for i in range(len(files) - 1, -1, -1):
            f = files[i]
            if i == len(files) - 1:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.time_matched(begin, end):
                found = f.select_phy_offsets(full_key, max_num - len(out), begin, end)
                out.extend(p for p in found if not self.fenced(p))
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return QueryOffsetResult(tuple(out), last_ts, last_phy)

    # -------------------------------------------------------------- lifecycle

    def delete_expired(self, min_phy_offset: int) -> int:
        """Delete leading files whose last entry points below ``min_phy_offset``
        (always keeping the newest). Returns files deleted."""
        if self.following:  # the writing process deletes; we let go of its deletions
            before = len(self.files)
            self.refresh()
            return max(0, before - len(self.files))
        doomed: list[IndexFile] = []
        with self._lock:
            while len(self.files) > 1 and self.files[0].end_phy_offset < min_phy_offset:
                doomed.append(self.files.pop(0))
        for f in doomed:
            f.destroy()
        return len(doomed)

    def flush(self) -> None:
        """Flush every file (shutdown).

        Raises:
            OSError: a sync failed.
        """
        self.join_flushers()
        with self._lock:
            files = list(self.files)
        for f in files:
            f.flush()

    def join_flushers(self, timeout: float = 30.0) -> None:
        """Wait for background flushes of full files."""
        for t in self._flushers:
            t.join(timeout)
        self._flushers = []

    def close(self) -> None:
        """Unmap every file (no flush)."""
        self.join_flushers()
        with self._lock:
            for f in self.files:
                f.close()
            self.files.clear()

    def destroy(self) -> None:
        """Delete every index file."""
        with self._lock:
            for f in self.files:
                f.destroy()
            self.files.clear()
