"""The store's parts, built in one place with their collaborators passed in.

:func:`build` constructs what a :class:`~mqstore._lifecycle.StoreLifecycle` loads,
recovers and starts (docs/store.md §1.8): the CommitLog's segments, the checkpoint, the
logic files with their dispatcher and reput thread (:class:`~mqstore.logics.Logics`), the
CommitLog and its flusher. Each part gets what it calls in its constructor (the disk
check, the quarantine's test, the error handler), so no part is wired by setting its
attributes afterwards. Nothing is loaded, recovered or started here: that is the
lifecycle's order to keep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mqstore.checkpoint import Checkpoint
from mqstore.commitlog.commitlog import CommitLog
from mqstore.commitlog.flush import AsyncFlusher, GroupCommitter
from mqstore.commitlog.segments import Segments
from mqstore.config import FlushDiskType, RecoveryPolicy, StoreConfig
from mqstore.logics import Logics
from mqstore.message import host_bytes


@dataclass(frozen=True, slots=True)
class Parts:
    """A store's parts, wired, none loaded or started."""

    segments: Segments
    checkpoint: Checkpoint
    logics: Logics
    commitlog: CommitLog
    flusher: GroupCommitter | AsyncFlusher


def build(
    cfg: StoreConfig,
    *,
    policy: RecoveryPolicy,
    disk_check: Callable[[], object],
    fenced: Callable[[int], bool],
    on_error: Callable[[BaseException], None],
    on_flushed: Callable[[], None],
) -> Parts:
    """The parts of ``cfg``'s store.

    ``policy``: the recovery policy in force (KEEP makes the segments fill a missing
    file with zeros at load); ``disk_check``: run per created segment and index file
    and when the index runs out of space; ``fenced``: whether a CommitLog offset lies
    in a fenced range (no key lookup serves it); ``on_error``: what a failed flush
    calls (it poisons the store); ``on_flushed``: what each completed flush calls (the
    checkpoint's physic time follows it).

    Raises:
        OSError: the checkpoint file could not be opened.
    """
    segments = Segments(
        cfg.commitlog_path,
        cfg.commitlog_file_size,
        reserve_chunk=cfg.commitlog_reserve_chunk,
        durable_entries=True,  # acknowledged data must be reachable after a power loss
        fill_gaps=policy is RecoveryPolicy.KEEP,
        on_create=disk_check,
    )
    checkpoint = Checkpoint(cfg.root / "checkpoint")
    try:
        logics = Logics(cfg, segments, checkpoint, disk_check=disk_check, fenced=fenced)
    except BaseException:
        checkpoint.close()
        raise

    flusher: GroupCommitter | AsyncFlusher
    if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
        flusher = GroupCommitter(
            segments,
            timeout_ms=cfg.sync_flush_timeout_ms,
            on_error=on_error,
            on_flushed=on_flushed,
        )
    else:
        flusher = AsyncFlusher(
            segments,
            interval_ms=cfg.flush_interval_commitlog_ms,
            least_pages=cfg.flush_commitlog_least_pages,
            thorough_interval_ms=cfg.flush_commitlog_thorough_interval_ms,
            on_error=on_error,
            on_flushed=on_flushed,
        )
    return Parts(
        segments, checkpoint, logics, CommitLog(segments, host_bytes(cfg.store_host)), flusher
    )


__all__ = ["Parts", "build"]
