"""The watcher thread of the dispatcher process's parent side (``mqstore.consumequeue.process``).

A mixin: :class:`~mqstore.consumequeue.process.DispatchProcess` inherits
:class:`WatcherMixin` and provides the state it uses (the shared page, the child,
the checkpoint, the dispatcher's listeners, ``_spawn`` and ``_close_pipes``). Every
:data:`POLL` seconds the thread publishes the dispatch limit and the CommitLog's
first offset, announces newly dispatched records to arrival listeners, copies the
child's checkpoint timestamps, and restarts a child that died (unless a failed
sync poisoned the store). It runs until ``_stopping`` is set.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from mqstore.checkpoint import Checkpoint
from mqstore.commitlog import format as fmt
from mqstore.commitlog.segments import Segments
from mqstore.config import StoreConfig
from mqstore.consumequeue.dispatch import Dispatcher
from mqstore.consumequeue.shared import SharedState, Slot
from mqstore.consumequeue.worker import EXIT_FLUSH_FAILED, Start

log = logging.getLogger("mqstore.consumequeue.process")  # the process's messages, as before

POLL = 0.001
"""The watcher's period (RocketMQ's reput thread polls every millisecond too)."""
RESTART_BACKOFF = 1.0


class WatcherMixin:
    """The watcher loop, arrival announcement and checkpoint sync (mixed into DispatchProcess)."""

    cfg: StoreConfig
    state: SharedState
    limit: Callable[[], int]
    last_error: BaseException | None
    restarts: int
    _segments: Segments
    _checkpoint: Checkpoint
    _dispatcher: Dispatcher
    _on_error: Callable[[BaseException], None]
    _proc: subprocess.Popen[bytes] | None
    _progress: threading.Condition
    _stopping: threading.Event
    _announced: int

    if TYPE_CHECKING:  # provided by DispatchProcess

        @property
        def reput_from(self) -> int: ...

        def _spawn(self, start: Start) -> None: ...

        @staticmethod
        def _close_pipes(proc: subprocess.Popen[bytes]) -> None: ...

    def _watch(self) -> None:
        st = self.state
        restart_at = 0.0
        while not self._stopping.is_set():
            try:
                st.set(Slot.LIMIT, self.limit())
                st.set(Slot.MIN_PHYSICAL, self._segments.min_offset)
                self._announce()
                self._sync_checkpoint()
                proc = self._proc
                if proc is not None and proc.poll() is not None:
                    restart_at = self._child_died(proc)
                if self._proc is None and restart_at and time.monotonic() >= restart_at:
                    self._restart()
                    restart_at = 0.0
            except Exception as e:
                self.last_error = e
                log.exception("dispatcher process watcher")
                restart_at = time.monotonic() + RESTART_BACKOFF
            self._stopping.wait(POLL)

    def _child_died(self, proc: subprocess.Popen[bytes]) -> float:
        """Handle an unexpected exit; return when to restart (0: never)."""
        self._proc = None
        self._close_pipes(proc)
        code = proc.returncode
        if code == EXIT_FLUSH_FAILED:
            err = OSError(f"the dispatcher process could not sync consume queues (exit {code})")
            self.last_error = err
            self._on_error(err)
            return 0.0
        self.last_error = RuntimeError(f"the dispatcher process died (exit {code})")
        log.error("%s; restarting it from %d", self.last_error, self.reput_from)
        return time.monotonic() + RESTART_BACKOFF

    def _restart(self) -> None:
        self.restarts += 1
        self._spawn(Start(self.cfg, self.reput_from, None, restart=True))

    def _announce(self) -> None:
        """Wake waiters and, for arrival listeners, announce newly dispatched records."""
        done = self.state.get(Slot.DISPATCHED)
        if done == self._announced:
            return
        start, self._announced = self._announced, done
        if self._dispatcher.listeners and done > start:
            self._announce_records(start, done)
        with self._progress:
            self._progress.notify_all()

    def _announce_records(self, start: int, end: int) -> None:
        """Announce every queued record in [start, end) (headers only)."""
        segs = self._segments
        arrival_of = self._dispatcher.arrival_of
        notify = self._dispatcher.notify
        pos = start
        while pos < end:
            mf = segs.find(pos)
            if mf is None:
                return
            base = mf.file_from_offset
            stop = min(end - base, mf.wrote_position)
            rel = pos - base
            try:
                view = mf.view
                while rel < stop:
                    f = fmt.unpack_trusted_at(view, rel, stop)
                    if f is not None:
                        a = arrival_of(f[0], f[1], f[2], f[6], f[9], f[12])
                        rel += f[4]
                    else:
                        r = fmt.scan(view, rel, stop, check_crc=False)
                        if isinstance(r, fmt.EndOfSegment):
                            rel = mf.file_size
                            break
                        if not isinstance(r, fmt.RecordInfo):
                            return  # the child skipped it too (and logged it)
                        a = arrival_of(
                            r.topic, r.queue_id, r.queue_offset, r.sys_flag,
                            r.store_timestamp, r.properties_string,
                        )  # fmt: skip
                        rel += r.size
                    if a is not None:
                        notify(a)
            except ValueError:  # the file was deleted under us
                return
            if base + rel <= pos:
                return
            pos = base + rel

    def _sync_checkpoint(self) -> None:
        st, cp = self.state, self._checkpoint
        logics = st.get(Slot.LOGICS_MSG_TIMESTAMP)
        index = st.get(Slot.INDEX_MSG_TIMESTAMP)
        if logics != cp.logics_msg_timestamp or index != cp.index_msg_timestamp:
            cp.logics_msg_timestamp = logics
            cp.index_msg_timestamp = index
            try:
                cp.flush()
            except OSError as e:
                self.last_error = e
                log.error("checkpoint flush failed: %s", e)
