"""The dispatcher process: consume queues and index built outside the store's interpreter.

Run by :class:`mqstore.consumequeue.process.DispatchProcess` as
``python -m mqstore.consumequeue.worker``. Why a process: dispatching a put (unit,
index keys) costs more CPU than the put itself; with both in one interpreter they
take turns under the GIL, and the put rate is bounded by the sum.
In a child they run on two cores.

The child runs the same code the in-process thread runs (:class:`Dispatcher`,
:class:`ReputService`, :class:`IndexCatchUp`, :class:`ConsumeQueueFlusher`) on its
own mappings of the same files. It owns every write to ``consumequeue/`` and
``index/`` while it lives; the parent owns the CommitLog and the checkpoint.

Protocol (stdin/stdout pipes, one line per message):

1. parent -> child: 4-byte big-endian length, then a pickle of :class:`Start`;
2. child -> parent: ``ready`` once its files are mapped;
3. parent -> child: ``stop``; the child dispatches up to the published limit,
   flushes queues and index, publishes its final state and answers
   ``stopped 1`` (all dispatched and flushed) or ``stopped 0``, then exits 0.

End of file on stdin means the parent died: the child exits at once, flushing
nothing, as a crash would (the next open recovers). The child also holds the
store's ``lock`` (the parent passes its locked descriptor), so no new open can
start before the child is gone. Exit status :data:`EXIT_FLUSH_FAILED` means a sync
failed (the parent poisons the store); any other death is restarted by the parent.
"""

from __future__ import annotations

import logging
import os
import pickle
import select
import signal
import sys
from dataclasses import dataclass

from mqstore import affinity
from mqstore.commitlog.segments import Segments
from mqstore.config import StoreConfig
from mqstore.consumequeue.dispatch import Dispatcher, ReputService
from mqstore.consumequeue.flush import ConsumeQueueFlusher
from mqstore.consumequeue.shared import FILE_NAME, SharedState, Slot
from mqstore.consumequeue.store import ConsumeQueueStore
from mqstore.errors import ConfigError
from mqstore.index.service import IndexService
from mqstore.schedule import DelayLevels

log = logging.getLogger("mqstore.dispatch-process")

EXIT_FLUSH_FAILED = 3
ROUND_RECORDS = 8192
"""At most this many records per round, so commands and a dead parent are noticed."""
PUBLISH_CHUNK = 64
"""Records between two publications of the dispatched offset."""
BATCH_RECORDS = 1024
"""At most this many records per batch (a backlog of plain records), published as one:
a batch's fixed cost (numpy calls) spread over :data:`PUBLISH_CHUNK` records cost more
than dispatching them one by one."""


@dataclass(frozen=True)
class Start:
    """What the parent tells a starting child."""

    cfg: StoreConfig
    reput_from: int
    """Where dispatching resumes (the parent's recovery dispatched everything before)."""
    index_from: int | None
    """Where an index catch-up starts (None: the index is whole), when ``restart`` is
    False. A restarted child catches up from the last message the index holds."""
    restart: bool


class _SharedCheckpoint:
    """What :class:`ConsumeQueueFlusher` needs of a checkpoint: its thorough flush
    publishes ``logicsMsgTimestamp`` for the parent, which owns the real file."""

    def __init__(self, state: SharedState) -> None:
        self._state = state
        self.logics_msg_timestamp = 0

    def note(self, *, logics: int) -> None:
        self.logics_msg_timestamp = logics

    def flush(self) -> None:
        self._state.set(Slot.LOGICS_MSG_TIMESTAMP, self.logics_msg_timestamp)


class Worker:
    """The child's files and services, stepped by :func:`main`'s loop."""

    def __init__(self, start: Start, state: SharedState) -> None:
        cfg = start.cfg
        self.state = state
        self.segments = Segments(cfg.commitlog_path, cfg.commitlog_file_size)
        self.segments.map_new_files()
        self.queues = ConsumeQueueStore(
            cfg.consume_queue_path,
            cfg.consume_queue_file_size,
            max_mapped_files=cfg.max_mapped_consume_queue_files,
        )
        self.queues.load()
        self.queues.recover()
        # Units past the published progress may be a dead predecessor's half-done
        # work: cut them, they are dispatched again.
        self.queues.truncate_dirty(start.reput_from)
        self.index = IndexService.for_store(cfg, lambda ts: state.set(Slot.INDEX_MSG_TIMESTAMP, ts))
        if self.index is not None:
            self.index.load(last_exit_ok=True, index_msg_timestamp=0)
        self.dispatcher = Dispatcher(
            self.queues, self.index, DelayLevels.parse(cfg.message_delay_level)
        )
        self.reput = ReputService(
            self.segments,
            self.dispatcher,
            reput_from=start.reput_from,
            limit=lambda: state.get(Slot.LIMIT),
            dispatch_fields=self.dispatcher.dispatch_one,
            chunk=PUBLISH_CHUNK,
            batch_records=BATCH_RECORDS,
            round_budget=ROUND_RECORDS,
            on_progress=lambda offset: state.set(Slot.DISPATCHED, offset),
        )
        index_from = start.index_from
        if start.restart and self.index is not None:
            index_from = self.index.end_phy_offset if self.index.files else self.segments.min_offset
        if index_from is not None and self.index is not None:
            self.reput.index_from(index_from)
        self._min_physical = 0
        self.flusher = ConsumeQueueFlusher(
            self.queues,
            _SharedCheckpoint(state),  # type: ignore[arg-type]
            interval_ms=cfg.flush_interval_consume_queue_ms,
            least_pages=cfg.flush_consume_queue_least_pages,
            thorough_interval_ms=cfg.flush_consume_queue_thorough_interval_ms,
            on_error=self._flush_failed,
        )
        self.publish()
        state.set(Slot.GENERATION, state.get(Slot.GENERATION) + 1)

    def _flush_failed(self, err: BaseException) -> None:
        log.critical("dispatcher process: flushing consume queues failed: %s", err)
        os._exit(EXIT_FLUSH_FAILED)

    def publish(self) -> None:
        """Publish progress and index state."""
        st = self.state
        st.set(Slot.DISPATCHED, self.reput.reput_from)
        st.set(Slot.INDEXED, 1 if self.reput.indexed else 0)
        st.set(Slot.INDEX_DISABLED, 1 if self.dispatcher.index_disabled else 0)

    def step(self) -> None:
        """One round: follow the log's new files, dispatch, expire, publish."""
        limit = self.state.get(Slot.LIMIT)
        last = self.segments.last
        if last is None or limit > last.file_from_offset + last.file_size:
            self.segments.map_new_files()
        self.reput.run_once()
        self.publish()
        low = self.state.get(Slot.MIN_PHYSICAL)
        if low > self._min_physical:
            self._min_physical = low
            self.segments.forget_before(low)
            self.queues.delete_expired(low)
            if self.index is not None:
                self.index.delete_expired(low)

    def stop(self) -> bool:
        """Drain up to the limit, flush queues and index; True when all is done."""
        self.flusher.stop()
        self.segments.map_new_files()  # the log may have rolled since the last step
        self.reput.stop()  # never started as a thread: this drains (catch-up included)
        done = self.reput.reput_from >= self.state.get(Slot.LIMIT) and self.reput.indexed
        try:
            self.queues.flush(0)
            if self.index is not None:
                self.index.flush()
        except OSError as e:
            log.error("dispatcher process: flush at stop failed: %s", e)
            done = False
        self.state.set(Slot.LOGICS_MSG_TIMESTAMP, self.queues.logics_msg_timestamp)
        self.publish()
        return done


def _read_exact(fd: int, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError("parent closed the pipe")
        buf += chunk
    return buf


def _tell(fd: int, line: bytes) -> None:
    """Write ``line`` to the parent; if the parent is gone (its pipe closed early),
    end quietly, as a crash of the parent leaves us: no traceback on stderr."""
    try:
        os.write(fd, line)
    except BrokenPipeError:
        os._exit(0)


def main() -> int:
    """The child's entry point (see the module docstring)."""
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    # Ctrl-C in a terminal signals the whole process group, and a service manager may
    # SIGTERM it: the parent decides when this process stops (it drains us at close).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    cmd_fd = sys.stdin.fileno()
    out_fd = sys.stdout.fileno()
    try:
        n = int.from_bytes(_read_exact(cmd_fd, 4), "big")
        start: Start = pickle.loads(_read_exact(cmd_fd, n))
    except EOFError:
        return 0
    if start.cfg.dispatch_cpus:
        # Every thread, before ours start (they inherit the mask of the one starting
        # them): imports may already have started some (numpy's BLAS pool).
        try:
            affinity.pin_process(start.cfg.dispatch_cpus)
        except ConfigError as e:  # a cpuset that excludes them: run where we were started
            log.warning("%s; staying on %s", e, sorted(os.sched_getaffinity(0)))
    state = SharedState(start.cfg.root / FILE_NAME, create=False)
    worker = Worker(start, state)
    worker.flusher.start()
    _tell(out_fd, b"ready\n")
    while True:
        readable, _, _ = select.select([cmd_fd], [], [], worker.reput.interval)
        if readable:
            line = os.read(cmd_fd, 64)
            if not line:  # the parent is gone: stop as a crash would
                os._exit(0)
            if line.startswith(b"stop"):
                ok = worker.stop()
                _tell(out_fd, b"stopped 1\n" if ok else b"stopped 0\n")
                return 0
        worker.step()


if __name__ == "__main__":
    sys.exit(main())
