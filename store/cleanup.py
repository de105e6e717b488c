"""Reclaiming disk: expired CommitLog files, then the queue and index files into them.

RocketMQ ``CleanCommitLogService`` + ``CleanConsumeQueueService``. Every
``clean_resource_interval`` (10 s) the service decides whether deleting is allowed:

* at a ``delete_when`` hour (``"04"``, or several: ``"03;04"``), or
* when the CommitLog's disk is fuller than ``disk_max_used_space_ratio`` (75 %), or
* when asked (:meth:`CleanupService.clean` with ``force=True``).

Then CommitLog files (never the last one, at most ``delete_files_batch_max`` per round)
last modified more than ``file_reserved_time_hours`` ago are deleted; above
``disk_space_clean_forcibly_ratio`` (85 %) age no longer matters. Afterwards each
consume queue drops the files whose last unit points below the new CommitLog start
and corrects its minimum offset, and so does the index.

Readers are never broken: a file not yet dispatched is never deleted, and a reader
holding a view of a deleted file keeps the mapping alive (``MappedFile.close``);
readers that look a file up after its deletion get "not held" (a pull then says
MESSAGE_WAS_REMOVING or OFFSET_TOO_SMALL).

The disk guard (:class:`DiskGuard`, RocketMQ's ``runningFlags`` DISK_FULL bit set
by ``CleanCommitLogService.isSpaceToDelete``): each round, and whenever a CommitLog
segment or an index file is created, the used ratio of the store's disk
(``statvfs``) is compared with ``disk_space_warning_level_ratio`` (90 %). Above it
the store is *disk full*: puts return SERVICE_NOT_AVAILABLE with a "disk full"
error (``MessageStore.disk_full`` says why), reads go on. Once usage is back under
the ratio (this round deleted files, or someone else freed space) puts resume by
themselves. No check runs per message.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mqstore.commitlog.mapped_file import MappedFile
from mqstore.commitlog.segments import Segments
from mqstore.config import StoreConfig
from mqstore.consumequeue.store import ConsumeQueueStore
from mqstore.failures import FailureCounter
from mqstore.index.service import IndexService
from mqstore.service import ServiceThread

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class CleanupResult:
    """Files deleted by one cleanup round."""

    commitlog_files: int
    consume_queue_files: int
    index_files: int
    disk_used_ratio: float


def disk_used_ratio(
    path: str | os.PathLike[str],
    statvfs: Callable[[str], os.statvfs_result] = os.statvfs,
) -> float:
    """Used fraction of the partition holding ``path``, as RocketMQ 4.9.8 computes it.

    ``UtilAll.getDiskPartitionSpaceUsedPercent``: used = total - free, over used +
    *usable*, where usable (``File.getUsableSpace``, statvfs ``f_bavail``) leaves out
    the blocks reserved for root; the percentage is rounded up to a whole percent and
    returned as a fraction (0.93). So a disk whose reserved blocks are all that is
    left counts as full, as RocketMQ refuses puts there. 0.0 when the path cannot be
    measured (RocketMQ's -1, "unknown", which never trips a threshold either).
    """
    try:
        st = statvfs(os.fspath(path))
    except OSError:
        return 0.0
    if st.f_blocks == 0:
        return 0.0
    used = st.f_blocks - st.f_bfree
    entire = used + st.f_bavail
    if entire <= 0:
        return 0.0
    return -(-used * 100 // entire) / 100.0


class DiskGuard:
    """Marks the store disk-full above ``warning_ratio`` used, and clears the mark below.

    ``check()`` costs one ``statvfs`` per directory; callers run it per cleanup
    round and per created file. ``statvfs`` is replaceable (a fault hook for tests
    on systems where a small tmpfs cannot be mounted).
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        warning_ratio: float,
        on_change: Callable[[str | None], None] | None = None,
    ) -> None:
        self.paths = list(dict.fromkeys(str(p) for p in paths))
        self.warning_ratio = warning_ratio
        self.on_change = on_change
        self.statvfs: Callable[[str], os.statvfs_result] = os.statvfs
        self.full: str | None = None
        """Why the disk counts as full (None: it does not)."""
        self.last_ratio = 0.0
        self._lock = threading.Lock()

    def ratio(self) -> tuple[float, str]:
        """(highest used ratio among the directories, that directory)."""
        worst, where = 0.0, self.paths[0] if self.paths else ""
        for p in self.paths:
            r = disk_used_ratio(p, self.statvfs)
            if r > worst:
                worst, where = r, p
        return worst, where

    def check(self) -> float:
        """Measure now and update the mark; return the used ratio."""
        ratio, where = self.ratio()
        self.update(ratio, where)
        return ratio

    def update(self, ratio: float, where: str = "") -> None:
        """Set or clear the disk-full mark from a measured ``ratio``."""
        with self._lock:
            self.last_ratio = ratio
            was = self.full
            if ratio > self.warning_ratio:
                if was is not None:
                    return
                self.full = (
                    f"disk full: {ratio:.1%} of the disk of {where or self.paths[0]} is used, "
                    f"over disk_space_warning_level_ratio {self.warning_ratio:.0%}; "
                    "writes resume when usage falls below it"
                )
                log.error("%s", self.full)
            else:
                if was is None:
                    return
                self.full = None
                log.warning("disk usage back to %.1f%%: the store accepts writes again",
                            ratio * 100)  # fmt: skip
            now = self.full
        if self.on_change is not None:
            self.on_change(now)


def is_delete_hour(delete_when: str, now_ms: int) -> bool:
    """Whether the local hour of ``now_ms`` is one of ``delete_when`` ("04" or "03;04")."""
    hour = time.localtime(now_ms // 1000).tm_hour
    return any(h.strip().isdigit() and int(h) == hour for h in delete_when.split(";"))


class CleanupService(ServiceThread):
    """Deletes expired files every ``clean_resource_interval``."""

    name = "cleanup"

    def __init__(
        self,
        cfg: StoreConfig,
        segments: Segments,
        queues: ConsumeQueueStore,
        index: IndexService | None,
        *,
        dispatched_offset: Callable[[], int],
        clock: Callable[[], int] | None = None,
        disk_ratio: Callable[[], float] | None = None,
        guard: DiskGuard | None = None,
    ) -> None:
        super().__init__(cfg.clean_resource_interval_ms / 1000.0)
        self.cfg = cfg
        self._segments = segments
        self._queues = queues
        self._index = index
        self._dispatched = dispatched_offset
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._guard = guard
        self._measure = disk_ratio or (lambda: disk_used_ratio(segments.directory))
        self._custom_ratio = disk_ratio is not None
        self._cleaned_below = -1
        self.failures = FailureCounter(log, self.name)

    def _disk_ratio(self) -> float:
        """The used ratio, also setting or clearing the guard's disk-full mark."""
        guard = self._guard
        if guard is None:
            return self._measure()
        if not self._custom_ratio:
            return guard.check()
        r = self._measure()
        guard.update(r)
        return r

    def _can_delete(self, mf: MappedFile) -> bool:
        return mf.file_from_offset + mf.file_size <= self._dispatched()

    def clean(self, *, force: bool = False, immediately: bool = False) -> CleanupResult:
        """One round (see the module docstring).

        ``force``: a manual delete request (as at the delete hour: files past their
        reserved time go). ``immediately``: every file but the last goes whatever its
        age, as above the forcible disk ratio.

        Raises:
            OSError: a file could not be deleted.
        """
        cfg = self.cfg
        now = self._clock()
        ratio = self._disk_ratio()
        at_once = immediately or (
            cfg.clean_file_forcibly_enable and ratio > cfg.disk_space_clean_forcibly_ratio
        )
        allowed = (
            force
            or is_delete_hour(cfg.delete_when, now)
            or ratio > cfg.disk_max_used_space_ratio / 100
            or at_once
        )
        log_files = 0
        if allowed:
            expired_before = now + 1 if at_once else now - cfg.file_reserved_time_hours * HOUR_MS
            deleted = self._segments.delete_expired(
                expired_before_ms=expired_before,
                keep_last=1,
                max_delete=cfg.delete_files_batch_max,
                can_delete=self._can_delete,
            )
            log_files = len(deleted)
            if deleted:
                log.info(
                    "cleanup: deleted %d CommitLog files (disk %.0f%% used)", log_files, ratio * 100
                )
        min_phy = self._segments.min_offset
        cq_files = index_files = 0
        if min_phy != self._cleaned_below:  # queues and index only change when the log did
            cq_files = self._queues.delete_expired(min_phy)
            index_files = self._index.delete_expired(min_phy) if self._index is not None else 0
            self._cleaned_below = min_phy
        if (log_files or cq_files or index_files) and self._guard is not None:
            self._disk_ratio()  # space was freed: writes may resume now, not next round
        return CleanupResult(log_files, cq_files, index_files, ratio)

    def run_once(self) -> None:
        try:
            self.clean()
        except Exception as e:  # logged once per kind, counted; the next round tries again
            self.failures.record("cleaning expired files", e)
