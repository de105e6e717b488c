"""The parent's view of the dispatcher child (``mqstore.consumequeue.process``).

:class:`Watcher` keeps the shared page and the parent's readers in step with the
child, one :meth:`~Watcher.tick` per :data:`POLL` seconds on the process's watcher
thread: it publishes the dispatch limit and the CommitLog's first offset, announces
newly dispatched records to arrival listeners (waking waiters on :attr:`progress`),
and copies the child's checkpoint timestamps. Supervising the child (restart after
a death) is the owner's, :class:`~mqstore.consumequeue.process.DispatchProcess`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from mqstore.checkpoint import Checkpoint
from mqstore.commitlog.cursor import Damage, step
from mqstore.commitlog.segments import Segments
from mqstore.consumequeue.dispatch import Dispatcher
from mqstore.consumequeue.shared import SharedState, Slot

log = logging.getLogger(__name__)

POLL = 0.001
"""The watcher's period (RocketMQ's reput thread polls every millisecond too)."""


@dataclass(eq=False)
class Watcher:
    """Publishes limits, announces arrivals and syncs the checkpoint for one child.

    Called from one thread at a time (the watcher thread, or the owner after it
    stopped); :attr:`progress` may be waited on from any thread.
    """

    state: SharedState
    segments: Segments
    checkpoint: Checkpoint
    dispatcher: Dispatcher
    _: KW_ONLY
    limit: Callable[[], int]
    """The offset the child may dispatch up to, published every round."""
    note_error: Callable[[BaseException], None]
    """Told of a failed checkpoint flush (which is logged too)."""
    progress: threading.Condition = field(default_factory=threading.Condition, init=False)
    """Notified whenever the child's published progress moved."""
    _announced: int = field(default=0, init=False)

    def start_at(self, dispatched: int) -> None:
        """Publish the starting state before the child runs: records before
        ``dispatched`` are dispatched (and count as announced), the limit and the
        first offset as :meth:`publish` has them, and the checkpoint's timestamps."""
        st, cp = self.state, self.checkpoint
        st.set(Slot.DISPATCHED, dispatched)
        st.set(Slot.LOGICS_MSG_TIMESTAMP, cp.logics_msg_timestamp)
        st.set(Slot.INDEX_MSG_TIMESTAMP, cp.index_msg_timestamp)
        self.publish()
        self._announced = dispatched

    def tick(self) -> None:
        """One round: publish, announce, sync the checkpoint."""
        self.publish()
        self.announce()
        self.sync_checkpoint()

    def publish(self) -> None:
        """Publish the dispatch limit and the CommitLog's first offset."""
        st = self.state
        st.set(Slot.LIMIT, self.limit())
        st.set(Slot.MIN_PHYSICAL, self.segments.min_offset)

    def announce(self) -> None:
        """Wake waiters and, for arrival listeners, announce newly dispatched records."""
        done = self.state.get(Slot.DISPATCHED)
        if done == self._announced:
            return
        start, self._announced = self._announced, done
        if self.dispatcher.listeners and done > start:
            self._announce_records(start, done)
        with self.progress:
            self.progress.notify_all()

    def _announce_records(self, start: int, end: int) -> None:
        """Announce every queued record in [start, end) (headers only)."""
        segs = self.segments
        arrival_of = self.dispatcher.arrival_of
        notify = self.dispatcher.notify
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
                    item, after = step(view, rel, stop, mf)
                    if type(item) is Damage:
                        return  # the child skipped it too (and logged it)
                    if type(item) is tuple:  # a record's DispatchFields
                        topic, qid, qoff, _phys, _size, sys_flag, store_ts, props = item
                        a = arrival_of(topic, qid, qoff, sys_flag, store_ts, props)
                        if a is not None:
                            notify(a)
                    rel = after
            except ValueError:  # the file was deleted under us
                return
            if base + rel <= pos:
                return
            pos = base + rel

    def sync_checkpoint(self) -> None:
        """Copy the child's queue and index timestamps into the checkpoint, flushing it
        when they changed; a failed flush goes to ``note_error`` and the log."""
        st, cp = self.state, self.checkpoint
        logics = st.get(Slot.LOGICS_MSG_TIMESTAMP)
        index = st.get(Slot.INDEX_MSG_TIMESTAMP)
        if logics != cp.logics_msg_timestamp or index != cp.index_msg_timestamp:
            cp.logics_msg_timestamp = logics
            cp.index_msg_timestamp = index
            try:
                cp.flush()
            except OSError as e:
                self.note_error(e)
                log.error("checkpoint flush failed: %s", e)
