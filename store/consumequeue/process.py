"""Parent side of the dispatcher process (``StoreConfig.dispatch_process``).

:class:`DispatchProcess` starts ``mqstore.consumequeue.worker`` once the store's
recovery is done, and stands in for the in-process :class:`ReputService` towards
readers (``reput_from``, ``behind``, ``indexed``, ``wait_until``). Its watcher
thread, every millisecond (the first three through its
:class:`~mqstore.consumequeue.watch.Watcher`):

* publishes the dispatch limit (written end under ASYNC_FLUSH, flushed end under
  SYNC_FLUSH) and the CommitLog's first offset in the shared page
  (``mqstore.consumequeue.shared``);
* when the child's published progress moves and arrival listeners are registered
  (a broker's long polling), reads the newly dispatched records' headers and
  announces them, so held pulls wake as with the thread;
* copies the child's ``logicsMsgTimestamp``/``indexMsgTimestamp`` into the
  checkpoint and flushes it when they change;
* restarts a child that died (it resumes from its last published progress: units
  past it are cut and dispatched again; the index catches up from its last entry),
  unless it died because a sync failed, which poisons the store.

The parent's :class:`ConsumeQueueStore` and :class:`IndexService` become readers
(``follow``): they never write while the child lives.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from mqstore.checkpoint import Checkpoint
from mqstore.commitlog.segments import Segments
from mqstore.config import StoreConfig
from mqstore.consumequeue.dispatch import Dispatcher
from mqstore.consumequeue.shared import FILE_NAME, SharedState, Slot
from mqstore.consumequeue.watch import POLL, Watcher
from mqstore.consumequeue.worker import EXIT_FLUSH_FAILED, Start

log = logging.getLogger(__name__)

START_TIMEOUT = 60.0
"""Seconds a child may take to map its files and answer ``ready``."""
STOP_TIMEOUT = 120.0
"""Seconds a child may take to drain and flush at close."""
RESTART_BACKOFF = 1.0
"""Seconds between a child's death (or a failed watcher round) and its restart."""


class DispatchProcessError(RuntimeError):
    """The dispatcher process could not be started."""


class DispatchProcess:
    """A running dispatcher child and the thread that keeps in touch with it."""

    def __init__(
        self,
        cfg: StoreConfig,
        segments: Segments,
        checkpoint: Checkpoint,
        dispatcher: Dispatcher,
        *,
        limit: Callable[[], int],
        lock_fd: int,
        on_error: Callable[[BaseException], None],
    ) -> None:
        self.cfg = cfg
        self._segments = segments
        self._lock_fd = lock_fd
        self._on_error = on_error
        self.state = SharedState(cfg.root / FILE_NAME, create=True)
        self._watcher = Watcher(
            self.state, segments, checkpoint, dispatcher, limit=limit, note_error=self._note_error
        )
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: BaseException | None = None
        self.restarts = 0

    # ------------------------------------------------------------ the facade

    @property
    def reput_from(self) -> int:
        """Every record before this offset has its queue unit (published by the child)."""
        return self.state.get(Slot.DISPATCHED)

    @property
    def behind(self) -> int:
        """Bytes written to the CommitLog but not dispatched."""
        return max(0, self._segments.max_offset - self.reput_from)

    @property
    def indexed(self) -> bool:
        """False while an index catch-up is running or pending in the child."""
        return self.state.get(Slot.INDEXED) == 1

    @property
    def index_disabled(self) -> str | None:
        """Why the child is not indexing (no disk space), or None."""
        if self.state.get(Slot.INDEX_DISABLED):
            return "index disabled until space is available (see the dispatcher process log)"
        return None

    def wait_until(self, offset: int, timeout: float, *, indexed: bool = True) -> bool:
        """Block until everything before ``offset`` is dispatched (and, with
        ``indexed``, the index is whole, unless indexing is disabled for lack of
        space); False on timeout."""
        deadline = time.monotonic() + timeout
        while self.reput_from < offset or (
            indexed and not self.indexed and self.index_disabled is None
        ):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._watcher.progress:
                self._watcher.progress.wait(min(left, 0.005))
        return True

    # ------------------------------------------------------------- lifecycle

    def start(self, reput_from: int, index_from: int | None) -> None:
        """Publish the starting state, start the child and wait for ``ready``.

        Raises:
            DispatchProcessError: the child did not start.
        """
        self.state.set(Slot.INDEXED, 1 if index_from is None else 0)
        self._watcher.start_at(reput_from)
        self._spawn(Start(self.cfg, reput_from, index_from, restart=False))
        self._thread = threading.Thread(target=self._watch, name="dispatch-watch", daemon=True)
        self._thread.start()

    def _note_error(self, err: BaseException) -> None:
        self.last_error = err

    def _watch(self) -> None:
        """The watcher thread: a :class:`Watcher` round, then the child's health."""
        restart_at = 0.0
        while not self._stopping.is_set():
            try:
                self._watcher.tick()
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

    def _spawn(self, start: Start) -> None:
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-m", "mqstore.consumequeue.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # The child shares the store's lock (worker docs); -1: a caller without one.
            pass_fds=(self._lock_fd,) if self._lock_fd >= 0 else (),
            env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        data = pickle.dumps(start)
        try:
            proc.stdin.write(len(data).to_bytes(4, "big") + data)
            proc.stdin.flush()
            line = self._read_line(proc, START_TIMEOUT)
        except OSError as e:
            line = f"<{e}>".encode()
        if line != b"ready":
            proc.kill()
            proc.wait()
            raise DispatchProcessError(
                f"the dispatcher process did not start (exit {proc.returncode}, said {line!r})"
            )
        self._proc = proc

    @staticmethod
    def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                return b"<timeout>"
            readable, _, _ = select.select([fd], [], [], left)
            if readable:
                chunk = os.read(fd, 256)
                if not chunk:
                    return b"<eof>"
                buf += chunk
        return buf.strip()

    def stop(self) -> bool:
        """Let the child drain up to the current limit, flush and exit; True when
        everything was dispatched, indexed and flushed."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        proc = self._proc
        self._proc = None
        if proc is None:
            return False
        self._watcher.publish()  # the limit to drain up to
        assert proc.stdin is not None
        try:
            proc.stdin.write(b"stop\n")
            proc.stdin.flush()
            answer = self._read_line(proc, STOP_TIMEOUT)
        except OSError as e:
            answer = f"<{e}>".encode()
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._close_pipes(proc)
        self._watcher.sync_checkpoint()
        self._watcher.announce()
        if answer != b"stopped 1":
            log.error("dispatcher process stopped uncleanly: %r", answer)
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the child (a simulated crash): nothing is drained or flushed."""
        self._stopping.set()
        proc = self._proc
        self._proc = None
        if proc is not None:
            proc.kill()
            proc.wait()
            self._close_pipes(proc)
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    @property
    def pid(self) -> int | None:
        """The child's process id (None when not running)."""
        return self._proc.pid if self._proc is not None else None

    def close(self) -> None:
        """Unmap and delete the shared page (after :meth:`stop` or :meth:`kill`)."""
        self.state.close()
        self.state.path.unlink(missing_ok=True)

    @staticmethod
    def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
