"""Simulated power loss: rewrite a crashed store's files to what a disk could hold.

``MessageStore.abandon()`` stops a store the way a killed process stops: the page
cache still holds everything the process wrote, so a SIGKILL loses nothing that was
written. A power loss also loses the page cache. :func:`power_loss` decides, page by
page, what reached the disk, and rewrites the files to that.

The model
---------
1. **Durable content.** What a file held at the *start* of its last
   ``fdatasync`` that *completed* is on disk (everything in the page cache when the
   call is made is written by the time it returns). :class:`DiskModel` tracks this
   through the engine's fault points: it snapshots the file at ``before_fdatasync``
   and commits the snapshot at ``after_fdatasync``. A failed ``fdatasync`` makes
   nothing durable. Files as they are when the model is created (the previous
   "boot") are durable; a file created later is durable as zeros (segments are
   preallocated, unwritten blocks read back as zeros).
2. **Uncertain pages.** Every 4 KiB page (or the part of one at a file's end) whose
   content in memory differs from its durable content is, at random:

   * *kept*: the kernel wrote it back before the power failed;
   * *dropped*: the disk still holds the durable version (zeros in a fresh segment,
     the old bytes where recovery zeroed a torn tail it never synced);
   * *torn*: the first k of its 512-byte sectors (0 < k < 8) hold the new bytes, the
     rest the durable ones. Sector writes are atomic; nothing else is assumed.

   Pages identical in memory and on disk need no decision, so bytes the engine
   flushed can only be lost if the engine acknowledged them without a completed
   sync, which is exactly what the tests look for.
3. **Checkpoint.** The ``checkpoint`` page follows the same rule: it is kept or rolled
   back to what was last synced.
4. **abort file.** If ``abort`` was created in this boot and never synced, it is
   lost with probability ``abort_lost`` (the next open then runs *normal* recovery
   on a crashed log, which trusts all but the last three segments).
5. **The crash instant.** :meth:`DiskModel.cut` is the moment the power fails: the
   durable state is frozen and the page cache is read. From then on every sync or
   allocation fault point raises ``OSError(EIO)`` ("the disk is gone"), so the
   store stops acknowledging; anything it does afterwards is discarded.
   :meth:`DiskModel.crash_at` makes the power fail inside the n-th call of a fault
   point (``before_fdatasync``, ``after_fdatasync``, ``before_allocate``,
   ``before_write_checkpoint``); a test may also call ``cut()`` from any thread.

A segment deleted by recovery and created again under the same name starts from
zeros (the model forgets a file seen empty at ``before_allocate``; inode numbers
alone do not tell, file systems reuse them). Not modelled: file creation, deletion and
size changes are durable as performed
(ext4 makes the directory entry of a new file durable with the file's first fsync,
``ext4_sync_parent``; other file systems need an fsync of the directory, which the
engine does not do); a device that scrambles the sector it was writing; "fsyncgate"
(a kernel that marks pages clean after a failed writeback, so a later successful
fsync does not write them).

Without a :class:`DiskModel`, :func:`power_loss` falls back to the CrashImage alone:
bytes below each segment's flushed position are durable, zeros above. That is exact
only for a store that started empty, and it trusts the engine's flushed positions.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mqstore import faults
from mqstore.message_store import CrashImage
from mqstore.tools._pageloss import (
    PAGE,
    SECTOR,
    Decide,
    PowerLossReport,
    _first_diff,
    _fit,
    _lose_pages,
)

CRASH_POINTS = ("before_fdatasync", "after_fdatasync", "before_allocate", "before_write_checkpoint")


def _key(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(path)


def _read(path: str | os.PathLike[str]) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _read_ino(path: str | os.PathLike[str]) -> tuple[int, bytes]:
    """(inode, content): a file deleted and created again is a different file."""
    with open(path, "rb") as f:
        return os.fstat(f.fileno()).st_ino, f.read()


class DiskModel:
    """What the disk durably holds for one store directory, kept up to date from fault points.

    Create it before opening the store (the files as they are count as durable),
    install its hooks with :meth:`installed`, crash with :meth:`cut` or
    :meth:`crash_at`, then hand it to :func:`power_loss`. One model per "boot".
    """

    def __init__(self, root: Path | str, commitlog_dir: Path | str | None = None) -> None:
        self.root = Path(root)
        self.commitlog_dir = Path(commitlog_dir) if commitlog_dir else self.root / "commitlog"
        self._lock = threading.Lock()
        self._abort = self.root / "abort"
        self._durable: dict[str, tuple[int, bytes]] = {_key(p): _read_ino(p) for p in self._files()}
        if self._abort.exists():
            self._durable[_key(self._abort)] = _read_ino(self._abort)
        self._pending: dict[tuple[int, str], tuple[int, bytes]] = {}
        self._calls: Counter[str] = Counter()
        self._crash_point: tuple[str, int] | None = None
        self.io_error: int | None = None
        """When set (see :meth:`fail_syncs`), every ``fdatasync`` fails with this errno."""
        self.crashed = threading.Event()
        self.crash_reason = ""
        self.syncs = 0
        self.failed_syncs = 0
        self.frozen: dict[str, bytes] = {}
        """Durable content at the crash of each file in ``memory`` (absent: zeros)."""
        self.memory: dict[str, bytes] = {}
        """Page-cache content at the crash, by real path."""
        self.abort_at_cut = False
        self.abort_synced = False

    def _files(self) -> list[Path]:
        files: list[Path] = []
        if self.commitlog_dir.is_dir():
            files += sorted(p for p in self.commitlog_dir.iterdir() if p.is_file())
        checkpoint = self.root / "checkpoint"
        if checkpoint.is_file():
            files.append(checkpoint)
        return files

    def _tracks(self, path: str) -> bool:
        p = Path(path)
        return p.parent == self.commitlog_dir or p in (self.root / "checkpoint", self._abort)

    def durable(self, path: str | os.PathLike[str]) -> bytes | None:
        """Durable content of ``path`` now (None: never synced, i.e. zeros)."""
        with self._lock:
            entry = self._durable.get(_key(path))
        if entry is None or not os.path.exists(path) or os.stat(path).st_ino != entry[0]:
            return None
        return entry[1]

    # ---------------------------------------------------------------- hooks

    @contextmanager
    def installed(self) -> Iterator[DiskModel]:
        """Register the model at every sync/allocation fault point for a ``with`` block."""
        for point in CRASH_POINTS:
            faults.register(point, self._hook(point))
        try:
            yield self
        finally:
            for point in CRASH_POINTS:
                faults.clear(point)

    def _hook(self, point: str) -> faults.Hook:
        def hook(**ctx: Any) -> None:
            self._on_point(point, ctx)

        return hook

    def _dead(self) -> OSError:
        return OSError(errno.EIO, f"simulated power loss ({self.crash_reason})")

    def _on_point(self, point: str, ctx: dict[str, Any]) -> None:
        if self.crashed.is_set():
            raise self._dead()
        with self._lock:
            self._calls[point] += 1
            crash_now = self._crash_point == (point, self._calls[point])
        if point == "before_allocate":
            self._forget_new_files()
        if point == "before_fdatasync" and self.io_error is not None and not crash_now:
            raise OSError(self.io_error, os.strerror(self.io_error))  # nothing made durable
        what = ctx.get("what")
        if what is not None and self._tracks(what):
            slot = (threading.get_ident(), _key(what))
            if point == "before_fdatasync" and not crash_now:
                snapshot = _read_ino(what)
                with self._lock:
                    self._pending[slot] = snapshot
            elif point == "after_fdatasync":
                # The sync completed: what it covered is durable even if the power
                # fails right now, before the store hears about it.
                with self._lock:
                    if self.crashed.is_set():  # the power failed while the sync ran
                        raise self._dead()
                    covered = self._pending.pop(slot, None)
                    if covered is not None:  # None: installed while this sync ran
                        self._durable[slot[1]] = covered
                        self.syncs += 1
        if crash_now:
            self.cut(f"{point} #{self._calls[point]}")
            raise self._dead()

    def _forget_new_files(self) -> None:
        """A segment being allocated has size 0: it is a new file even if a deleted one
        had its name (and, file systems reuse them, its inode number)."""
        for p in self._files():
            with contextlib.suppress(FileNotFoundError):
                if p.stat().st_size == 0:
                    with self._lock:
                        self._durable.pop(_key(p), None)

    def fail_syncs(self, code: int | None = errno.EIO) -> None:
        """Make every later ``fdatasync`` fail with ``code`` (None: work again)."""
        self.io_error = code

    def crash_at(self, point: str, nth: int) -> None:
        """Make the power fail inside the ``nth`` call (1-based) of fault point ``point``."""
        if point not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {point!r}; one of {CRASH_POINTS}")
        self._crash_point = (point, nth)

    def cut(self, reason: str = "cut") -> bool:
        """The power fails now: freeze the durable state and read the page cache.

        Idempotent; returns True for the call that cut. Safe from any thread.
        """
        with self._lock:
            if self.crashed.is_set():
                return False
            self.crash_reason = reason
            self.crashed.set()
            self.failed_syncs = len(self._pending)
            current: dict[str, tuple[int, bytes]] = {}
            for p in self._files():
                with contextlib.suppress(FileNotFoundError):
                    current[_key(p)] = _read_ino(p)
            self.memory = {k: data for k, (_ino, data) in current.items()}
            self.frozen = {
                k: data
                for k, (ino, data) in self._durable.items()
                if k in current and current[k][0] == ino
            }
            self.abort_at_cut = self._abort.exists()
            synced = self._durable.get(_key(self._abort))
            self.abort_synced = (
                self.abort_at_cut
                and synced is not None
                and synced[0] == os.stat(self._abort).st_ino
            )
        return True


def run_producers(n_threads: int, worker: Callable[[int], None]) -> None:
    """Run ``worker(tid)`` for each ``tid`` in ``range(n_threads)`` on its own thread and
    wait for all of them; then re-raise the first exception a worker raised.

    The producers of a power-loss trial: a worker stops on its own when the model has
    cut (its puts fail), and one that raised does not stop the others, so every put
    already made is recorded before the error surfaces in the caller's thread.
    """
    errors: list[BaseException] = []

    def run(tid: int) -> None:
        try:
            worker(tid)
        except BaseException as e:  # surfaced in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


# ----------------------------------------------------------------- the loss


def _segment_order(paths: list[str]) -> list[str]:
    return sorted((p for p in paths if Path(p).name.isdigit()), key=lambda p: int(Path(p).name))


def _claimed_flushed(image: CrashImage) -> int:
    """The store's log-wide flushed offset according to the image."""
    segs = {_key(p): pos for p, pos in image.segments.items()}
    claimed = 0
    for path in _segment_order(list(segs)):
        flushed, _wrote = segs[path]
        start = int(Path(path).name)
        claimed = start + flushed
        if flushed < os.path.getsize(path):
            break
    return claimed


def power_loss(
    image: CrashImage | None,
    rng: random.Random,
    model: DiskModel | None = None,
    *,
    p_keep: float = 1 / 3,
    p_drop: float = 1 / 3,
    abort_lost: float = 0.2,
    decide: Decide | None = None,
) -> PowerLossReport:
    """Rewrite the abandoned store's files to one random outcome of a power loss.

    ``image`` comes from ``abandon()`` (the store must not be open); it may be None
    with a ``model`` when the store never finished opening. With ``model`` the crash
    instant is the model's cut (made now if none happened yet); each
    uncertain page is kept with probability ``p_keep``, dropped with ``p_drop``,
    torn otherwise (or as ``decide`` says). Returns what happened; the files are left
    as the "disk" holds them, ready for ``MessageStore.open``.
    """
    if image is None:
        if model is None:
            raise ValueError("power_loss needs a CrashImage, a DiskModel, or both")
        image = CrashImage({}, str(model.root / "checkpoint"))
    report = PowerLossReport(claimed_flushed=_claimed_flushed(image))
    root = Path(image.checkpoint_path).parent
    checkpoint = _key(image.checkpoint_path)
    if model is not None:
        report.reason, memory, durable, abort_volatile, commitlog_dir = _model_state(model)
        _check_flushed_claims(image, memory, durable, report)
    else:
        report.reason = "image"
        memory, durable, abort_volatile, commitlog_dir = _image_state(image, root, checkpoint)

    report.durable_end = _durable_end(memory, durable)
    if commitlog_dir is not None and commitlog_dir.is_dir():
        for p in commitlog_dir.iterdir():  # created after the crash instant: never existed
            if _key(p) not in memory:
                p.unlink()
    for k, data in memory.items():
        lost = _lose_pages(k, data, durable[k], rng, p_keep, p_drop, decide, report)
        with open(k, "wb") as f:
            f.write(lost)
    if abort_volatile and rng.random() < abort_lost:
        (root / "abort").unlink(missing_ok=True)
        report.abort_lost = True
    return report


_State = tuple[dict[str, bytes], dict[str, bytes], bool, Path | None]
"""(memory, durable, abort file volatile, commitlog directory) of a crash."""


def _model_state(model: DiskModel) -> tuple[str, *_State]:
    """Cut ``model`` now (if not yet); return (reason, memory, durable, abort volatile, dir)."""
    model.cut("abandon")
    memory = dict(model.memory)
    durable = {k: _fit(model.frozen.get(k), len(v)) for k, v in memory.items()}
    abort_volatile = model.abort_at_cut and not model.abort_synced
    return model.crash_reason, memory, durable, abort_volatile, model.commitlog_dir


def _image_state(image: CrashImage, root: Path, checkpoint: str) -> _State:
    """The crash state from ``image`` alone: durable is what the store reports flushed."""
    memory = {_key(p): _read(p) for p in image.segments}
    durable = {
        _key(p): _fit(memory[_key(p)][:flushed], os.path.getsize(p))
        for p, (flushed, _w) in image.segments.items()
    }
    if os.path.exists(checkpoint):
        memory[checkpoint] = durable[checkpoint] = _read(checkpoint)
    abort_volatile = (root / "abort").exists()
    commitlog_dir = Path(next(iter(image.segments))).parent if image.segments else None
    return memory, durable, abort_volatile, commitlog_dir


def _check_flushed_claims(
    image: CrashImage,
    memory: dict[str, bytes],
    durable: dict[str, bytes],
    report: PowerLossReport,
) -> None:
    """Add a violation to ``report`` for each flushed byte no fdatasync covered."""
    for path, (flushed, _wrote) in image.segments.items():
        k = _key(path)
        if k in memory and flushed:
            i = _first_diff(memory[k][:flushed], durable[k][:flushed])
            if i >= 0:
                report.violations.append(
                    f"{path}: the store reports {flushed} bytes flushed, but byte {i} "
                    "was never covered by a completed fdatasync"
                )


def _durable_end(memory: dict[str, bytes], durable: dict[str, bytes]) -> int:
    """First log offset whose byte in memory was not durable (end of log if none)."""
    end = 0
    for k in _segment_order(list(memory)):
        start = int(Path(k).name)
        i = _first_diff(memory[k], durable[k])
        if i >= 0:
            return start + i
        end = start + len(memory[k])
    return end


__all__ = [
    "CRASH_POINTS",
    "PAGE",
    "SECTOR",
    "DiskModel",
    "PowerLossReport",
    "power_loss",
    "run_producers",
]
