"""What an open :class:`~mqstore.message_store.MessageStore` holds, and the ways in and out.

:class:`StoreLifecycle` takes and gives back the store's resources: the ``lock``
file, the ``abort`` marker, the loaded and recovered segments, checkpoint and logic
files, the CommitLog, replication and the flusher. ``MessageStore._open`` runs its
steps in the order of docs/store.md §1.8; the algorithms stay in the components
(``mqstore.commitlog.recovery``, ``mqstore.logics``, ``mqstore.commitlog.flush``). It
ends in one of three ways: :meth:`~StoreLifecycle.close`, :meth:`~StoreLifecycle.abandon`,
or :meth:`~StoreLifecycle.undo_open` after a failed open.

:class:`StoreState` is whether the store is open and why puts are refused; the
lifecycle owns it and hands it to the writer and the reader, which only read it.

Contract: the components (``segments`` ... ``flusher``) exist once
:meth:`~StoreLifecycle.start_flusher` returned; :meth:`StoreState.poison_with` and
:meth:`StoreState.set_disk_full` may be called from any thread (flusher, cleanup,
dispatcher); ``close`` and ``abandon`` are called by the owner, after the last put
it waits for.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mqstore import _platform
from mqstore._parts import Parts, build
from mqstore.checkpoint import Checkpoint
from mqstore.cleanup import DiskGuard
from mqstore.commitlog import clean_close
from mqstore.commitlog import format as fmt
from mqstore.commitlog.commitlog import CommitLog
from mqstore.commitlog.flush import AsyncFlusher, GroupCommitter
from mqstore.commitlog.recovery import RecoveryResult, recover
from mqstore.commitlog.recovery_damage import DAMAGE_FILE, Quarantine
from mqstore.commitlog.segments import Segments
from mqstore.config import BrokerRole, FlushDiskType, RecoveryPolicy, StoreConfig
from mqstore.errors import CorruptRecordError, StoreClosedError, StoreLockedError
from mqstore.ha import service as ha_service
from mqstore.ha.master import HAMaster
from mqstore.logics import Logics
from mqstore.message import Message
from mqstore.status import PutStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CrashImage:
    """What ``abandon()`` leaves: per segment path, (flushed, written) positions."""

    segments: dict[str, tuple[int, int]]
    checkpoint_path: str


class StoreState:
    """Whether the store is open, and why puts are refused.

    Puts are refused while the store is closed, poisoned by a failed flush, short of
    disk space, or a SLAVE. The put fast path reads only :attr:`refusing` (no
    per-put cost for the reasons behind it); :meth:`refusal` says which reason.
    Changes come from any thread, under one lock; reads take none.
    """

    __slots__ = ("_lock", "_root", "_slave", "closed", "disk_full", "poison", "refusing")

    def __init__(self, root: Path, *, slave: bool) -> None:
        self._root = root
        self._slave = slave
        self._lock = threading.Lock()
        self.closed = True
        self.poison: BaseException | None = None
        """The flush error that poisoned the store (it refuses puts until reopened)."""
        self.disk_full: str | None = None
        """Why the disk counts as full (``mqstore.cleanup``), or None."""
        self.refusing = True

    def _update(self) -> None:
        self.refusing = (
            self.closed or self.poison is not None or self.disk_full is not None or self._slave
        )

    def mark_open(self) -> None:
        """The store accepts puts from now on (unless another reason refuses them)."""
        self.closed = False
        self._update()

    def mark_closed(self) -> None:
        """Every put from now on raises :class:`StoreClosedError`."""
        self.closed = True
        self.refusing = True

    def poison_with(self, err: BaseException) -> None:
        """A sync failed: keep the first error, refuse puts until the store is reopened."""
        with self._lock:
            if self.poison is None:
                self.poison = err
            self.refusing = True

    def set_disk_full(self, reason: str | None) -> None:
        """The disk guard's verdict (None: enough space again)."""
        with self._lock:
            self.disk_full = reason
            self._update()

    def refusal(self) -> str | None:
        """Why a put is refused (SERVICE_NOT_AVAILABLE), None when it is not.

        Raises:
            StoreClosedError: the store is closed.
        """
        if self.closed:
            raise StoreClosedError(f"store {self._root} is closed")
        if self.poison is not None:
            return f"store poisoned by a failed flush ({self.poison}); reopen it to recover"
        if self._slave:
            return "a SLAVE store refuses writes"
        return self.disk_full  # RocketMQ: SERVICE_NOT_AVAILABLE while DISK_FULL is up


class StoreLifecycle:
    """Lock, load and recover, replication, flusher, flush/close/abandon of one store."""

    segments: Segments
    checkpoint: Checkpoint
    logics: Logics
    commitlog: CommitLog
    flusher: GroupCommitter | AsyncFlusher

    def __init__(self, cfg: StoreConfig) -> None:
        self.cfg = cfg
        self.root = cfg.root
        self.state = StoreState(cfg.root, slave=cfg.broker_role is BrokerRole.SLAVE)
        self.disk_guard = DiskGuard(
            [cfg.commitlog_path, cfg.root],
            cfg.disk_space_warning_level_ratio,
            self.state.set_disk_full,
        )
        """RocketMQ's disk-full flag (``mqstore.cleanup``): checked per cleanup round and
        per created segment or index file, never per put."""
        self.ha: ha_service.HAService | None = None
        self.recovery: RecoveryResult | None = None
        self.quarantine = Quarantine(cfg.root / DAMAGE_FILE)
        """The fenced CommitLog ranges, loaded and updated by recovery."""
        self.last_exit_ok = True
        self.lock_fd = -1
        self._parts: Parts | None = None
        """What :func:`~mqstore._parts.build` made (None before the open built it)."""
        self.verification: clean_close.Verification | None = None
        """What the background check after a trusted open found (None: not run, or
        not finished)."""
        self._verifier: threading.Thread | None = None
        self._stop_verify = threading.Event()

    # ------------------------------------------------------------------ open

    def take_lock(self) -> None:
        """Open step 2 (docs/store.md §1.8): create the directory, take ``lock``, read ``abort``.

        Raises:
            StoreLockedError: another process (or open store) holds the directory.
        """
        _platform.make_dirs_durable(self.root)
        path = self.root / "lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _platform.try_lock(fd):
            os.close(fd)
            raise StoreLockedError(
                f"{self.root} is in use by another process or open store (lock file {path})"
            )
        os.ftruncate(fd, 0)
        os.write(fd, b"lock")
        self.lock_fd = fd
        self.last_exit_ok = not (self.root / "abort").exists()

    @property
    def recovery_policy(self) -> RecoveryPolicy:
        """``cfg.recovery_policy``, except that a slave always truncates: its master
        re-sends whatever is cut, while a fenced range would leave the replica without
        those records for good (the master resumes after the range)."""
        if self.cfg.broker_role is BrokerRole.SLAVE:
            return RecoveryPolicy.TRUNCATE
        return self.cfg.recovery_policy

    def load_and_recover(self) -> None:
        """Open step 3: build the parts (:func:`~mqstore._parts.build`), load segments,
        checkpoint, queues and index, recover them."""
        cfg = self.cfg
        self.quarantine = Quarantine.load(self.root / DAMAGE_FILE)
        parts = build(
            cfg,
            policy=self.recovery_policy,
            disk_check=self.disk_guard.check,
            fenced=self.quarantine.covers,  # no key lookup serves a fenced record
            on_error=self.state.poison_with,
            on_flushed=self._note_flushed,
        )
        self._parts = parts
        self.segments, self.checkpoint, self.logics = parts.segments, parts.checkpoint, parts.logics
        self.commitlog, self.flusher = parts.commitlog, parts.flusher
        self.segments.load()
        trusted_end = self._trusted_end()
        self.logics.load(last_exit_ok=self.last_exit_ok, closed_cleanly=trusted_end is not None)
        # From here on the queues and the index are written (cut, re-dispatched, a
        # backlog dispatched): a crash before the flusher starts must still make the
        # next open recover abnormally, which re-indexes what this one dispatched.
        self._write_abort(self.root / "abort")
        self.recovery = recover(
            self.segments,
            self.checkpoint,
            last_exit_ok=self.last_exit_ok,
            check_crc=cfg.check_crc_on_recover,
            on_record=self.logics.recover(last_exit_ok=self.last_exit_ok),
            policy=self.recovery_policy,
            quarantine=self.quarantine,
            trusted_end=trusted_end,
        )
        if self.recovery.damaged and self.last_exit_ok:
            self.logics.redispatch_around_damage(self.recovery)
        # Dispatched up to the end either way once damage was fenced: the reput must
        # not start before a fenced range (as after an abnormal recovery's replay).
        dispatched = not self.last_exit_ok or bool(self.recovery.damaged)
        self.commitlog.restore_queue_offsets(
            self.logics.after_log_recovery(
                end=self.recovery.end_offset, last_exit_ok=not dispatched
            )
        )

    def _trusted_end(self) -> int | None:
        """Take the clean close's record (``mqstore.commitlog.clean_close``) whatever
        the verdict, so that no later open finds it; the log's end it recorded when it
        matches the loaded files after a clean shutdown (and ``trust_clean_close``) and
        no damage was ever fenced, else None (recovery scans)."""
        record = clean_close.take(self.root)
        if record is None or not self.last_exit_ok or not self.cfg.trust_clean_close:
            return None
        if Quarantine.load(self.root / DAMAGE_FILE).ranges:
            return None  # the scan reports fenced damage again (RecoveryResult.damaged)
        why = clean_close.mismatch(record, self.segments, self.checkpoint)
        if why is not None:
            log.warning("clean close record of %s not trusted (%s): scanning", self.root, why)
            return None
        return record.end_offset

    def start_verify(self) -> None:
        """After a trusted open (``verify_clean_open``): check in a thread what
        RocketMQ's normal recovery would have scanned (:func:`clean_close.verify`)."""
        rec = self.recovery
        if rec is None or rec.mode.value != "trusted" or not self.cfg.verify_clean_open:
            return
        end = rec.end_offset
        self._verifier = threading.Thread(
            target=self._verify_in_background, args=(end,), name="mqstore-verify", daemon=True
        )
        self._verifier.start()

    def _verify_in_background(self, end: int) -> None:
        result = self.verify(end)
        if not self._stop_verify.is_set():
            self.verification = result

    def verify(self, end: int | None = None, *, whole: bool = False) -> clean_close.Verification:
        """Check the log's records up to ``end`` (default: everything written so far),
        read-only (:func:`clean_close.verify`); damage found is logged and poisons the
        store: puts are refused and ``abort`` is kept, so the next open recovers (and
        under ``KEEP`` fences the damage) as after a crash."""
        upto = self.segments.max_offset if end is None else end
        fenced = [(r.start, r.end) for r in self.quarantine.ranges]
        result = clean_close.verify(
            self.segments, upto, whole=whole, fenced=fenced, stopped=self._stop_verify.is_set
        )
        if result.problem is not None and not self._stop_verify.is_set():
            log.error("%s: the CommitLog failed verification: %s", self.root, result.problem)
            self.state.poison_with(CorruptRecordError(f"CommitLog damaged: {result.problem}"))
        return result

    def _stop_verifier(self) -> None:
        self._stop_verify.set()
        if self._verifier is not None:
            self._verifier.join()
            self._verifier = None

    def start_replication(self) -> None:
        """What the role asks for (``mqstore.ha.service.start_for``)."""
        self.ha = ha_service.start_for(self.cfg, self.commitlog)

    def serve_replicas(self) -> HAMaster:
        """Serve slaves from this open master store (the running master if there is
        one); :meth:`close` and :meth:`abandon` stop it.

        Raises:
            OSError: the HA port could not be bound.
        """
        if isinstance(self.ha, HAMaster):
            return self.ha
        master = ha_service.master_for(self.cfg, self.commitlog).start()
        self.ha = master
        return master

    @property
    def replica_wait(self) -> ha_service.ReplicaWait | None:
        """The put-path wait for a slave's ack (a SYNC_MASTER's), or None."""
        return self.ha.replica_wait if self.ha is not None else None

    def start_flusher(self) -> None:
        """Open step 4: start the CommitLog flusher (``abort`` exists)."""
        self.flusher.start()

    def start_services(
        self,
        *,
        put: Callable[[Message], PutStatus],
        read: Callable[[int, int], fmt.MessageRecord | None],
    ) -> None:
        """Open step 6: accept puts, then start the services around the
        queues (reput, queue flush, schedule, cleanup); ``put`` and ``read`` are the
        store's, for the schedule service and the dispatcher."""
        self.state.mark_open()
        self.disk_guard.check()
        self.logics.start(
            limit=self._dispatch_limit,
            put=put,
            read=read,
            on_error=self.state.poison_with,
            master=self.cfg.broker_role is not BrokerRole.SLAVE,
            disk_guard=self.disk_guard,
            lock_fd=self.lock_fd,
        )

    def undo_open(self) -> None:
        """A failed open: stop and close whatever it started, release the lock."""
        self.state.mark_closed()
        self._stop_verifier()
        if self.ha is not None:
            self.ha.stop()
            self.ha = None
        parts = self._parts
        if parts is not None:  # stop and unmap what was built, loaded or not
            parts.flusher.stop()
            parts.logics.abandon()
            parts.checkpoint.close()
            parts.segments.close()
        self._release_lock()

    def _dispatch_limit(self) -> int:
        """How far the dispatcher may read: flushed data only under SYNC_FLUSH."""
        sync = self.cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
        return self.segments.flushed_where if sync else self.segments.max_offset

    @staticmethod
    def _write_abort(abort: Path) -> None:
        """Create ``abort`` durably: were it lost in a power failure, the next open
        would run normal recovery, which trusts all but the last three segments."""
        fd = os.open(abort, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, str(os.getpid()).encode())
            _platform.fdatasync(fd, what=str(abort))
        finally:
            os.close(fd)
        _platform.fsync_dir(abort.parent)

    def _release_lock(self) -> None:
        if self.lock_fd >= 0:
            _platform.unlock(self.lock_fd)
            os.close(self.lock_fd)
            self.lock_fd = -1

    def _note_flushed(self) -> None:
        ts = self.segments.flushed_store_timestamp
        if ts:
            self.checkpoint.note(physic=ts)

    # --------------------------------------------------------------- shutdown

    def flush(self) -> None:
        """Flush everything written so far and the checkpoint (a manual durability point).

        Raises:
            OSError: the sync failed (the store is then poisoned).
        """
        try:
            self.segments.flush_all()
            self._note_flushed()
            self.checkpoint.flush()
        except OSError as e:
            self.state.poison_with(e)
            raise

    def close(self) -> None:
        """Stop services, flush, persist the checkpoint, record the clean close
        (``mqstore.commitlog.clean_close``), remove ``abort``, unlock."""
        if self.state.closed:
            return
        self.logics.stop_schedule()  # it puts: stop it while puts are still accepted
        self.state.mark_closed()
        self._stop_verifier()
        if self.ha is not None:
            self.ha.stop()
        self.flusher.stop()
        clean = self.state.poison is None
        if clean:
            try:
                self.flush()
            except OSError:
                clean = False
        dispatched = self.logics.stop()  # drains the dispatcher, flushes queues + index
        end = self.segments.max_offset
        self.segments.close()
        self.checkpoint.close()
        if clean and dispatched and self.state.poison is None:
            try:
                cfg = self.cfg
                clean_close.write(
                    self.root, cfg.commitlog_path, cfg.commitlog_file_size, end, self.checkpoint
                )
            except OSError as e:  # no record: the next open scans, as RocketMQ's does
                log.warning("%s: clean close record not written: %s", self.root, e)
                clean_close.discard(self.root)
            (self.root / "abort").unlink(missing_ok=True)
        self._release_lock()

    def abandon(self) -> CrashImage:
        """Stop as if the process died: no flush, ``abort`` left behind, lock released.

        For fault-injection tests and the flush lab: the returned image says which
        bytes of each segment were durable (flushed) when the "crash" happened.
        """
        if self.state.closed:
            raise StoreClosedError("store already closed")
        self.state.mark_closed()
        self._stop_verifier()
        if self.ha is not None:
            self.ha.stop()
        self.flusher.halt()
        with self.commitlog.put_lock:
            image = CrashImage(
                {
                    str(mf.path): (mf.flushed_position, mf.wrote_position)
                    for mf in self.segments.files
                },
                str(self.checkpoint.path),
            )
        self.flusher.stop()
        self.logics.abandon()
        self.segments.close()
        self.checkpoint.close()
        self._release_lock()
        return image


__all__ = ["CrashImage", "StoreLifecycle", "StoreState"]
