"""Index catch-up after a crash: the index of a stretch of the log, built after ``open``.

:class:`IndexCatchUp` is stepped by the reput thread (``mqstore.consumequeue.dispatch``).
"""

from __future__ import annotations

from typing import Protocol

from mqstore.commitlog.cursor import step
from mqstore.commitlog.segments import Segments
from mqstore.consumequeue.dispatch_batch import BatchDispatcher, DispatchTarget


class IndexTarget(DispatchTarget, Protocol):
    """What a catch-up needs of the dispatcher (``mqstore.consumequeue.dispatch``):
    its batch target, deferring and resuming its indexing, and indexing one record."""

    def defer_indexing(self) -> None: ...

    def resume_indexing(self) -> None: ...

    def index_fields(
        self, topic: str, phys: int, store_ts: int, sys_flag: int, props: str
    ) -> None: ...


class IndexCatchUp:
    """Builds the index of a stretch of the log after the fact, then hands indexing
    back to the dispatcher (an :class:`IndexTarget`).

    Why: after a crash every record from the recovery start is re-dispatched, and
    the index is most of a dispatch (two or more keys hashed and chained per
    message). Doing it inside ``open`` made open() several times slower than the CRC
    scan it needs. Instead ``open`` rebuilds the consume queues (pulls and queue offsets
    need them) and this object indexes [``position``, dispatched end) from the
    reput thread, a chunk per round. Meanwhile new records get their units at once
    and are indexed by the catch-up too, so index entries are still added in log
    order (the index's skip rule relies on it). When the catch-up reaches the
    dispatched end, indexing returns to the dispatcher (``resume_indexing``).

    Readers see a consistent view: ``query_by_key`` and ``wait_dispatched`` wait
    for the catch-up. A crash during the catch-up loses nothing: the next open
    starts its catch-up at the last indexed message (the index skips what it has).

    Runs of plain records are indexed in bulk (:class:`BatchDispatcher`, the same
    bytes); a batch that fails is indexed again record by record, which raises, or
    not, exactly as it would have alone.

    Not thread-safe: only the reput thread (or the thread draining it) steps it.
    """

    def __init__(self, segments: Segments, dispatcher: IndexTarget, position: int) -> None:
        self._segments = segments
        self._dispatcher = dispatcher
        self.position = position
        self.done = False
        self.batch: BatchDispatcher | None = BatchDispatcher(dispatcher)
        """Indexes runs of plain records in bulk (None: record by record)."""
        dispatcher.defer_indexing()

    def step(self, upto: int, max_records: int) -> bool:
        """Index up to ``max_records`` records below ``upto`` (the dispatched end);
        True when caught up (indexing is then the dispatcher's again).

        Raises:
            OSError: an index file could not be created (retried next step).
        """
        segs = self._segments
        index_fields = self._dispatcher.index_fields
        batch = self.batch
        n = 0
        while n < max_records and self.position < upto:
            pos = self.position
            if pos < segs.min_offset:  # expired meanwhile: nothing left to index there
                self.position = segs.min_offset
                continue
            mf = segs.find(pos)
            if mf is None:
                break
            base = mf.file_from_offset
            rel = pos - base
            end = min(mf.wrote_position, upto - base)
            if rel >= end:
                break
            try:
                view = mf.view
                single_until = rel  # record by record below this position
                # Damage is skipped as reput skipped it (it logged the [BUG]).
                while rel < end and n < max_records:
                    if batch and rel >= single_until and end - rel >= batch.min_bytes:
                        b = batch.read(view, rel, end, max_records - n, keys=True)
                        if isinstance(b, int):
                            single_until = b
                        else:
                            try:
                                stopped = batch.index(b)
                            except Exception:  # again record by record: the same failure
                                single_until = rel + b.length
                            else:
                                if stopped is not None:  # where index_fields would raise
                                    self.position = base + stopped
                                    assert batch.stopped_by is not None
                                    raise batch.stopped_by
                                n += b.count
                                rel += b.length
                                self.position = base + rel
                                continue
                    item, rel = step(view, rel, end, mf)
                    if type(item) is tuple:  # a record's DispatchFields
                        topic, _qid, _qoff, phys, _size, sys_flag, store_ts, props = item
                        index_fields(topic, phys, store_ts, sys_flag, props)
                        n += 1
                    self.position = base + rel
            except ValueError:  # the file was deleted while we read it: next step
                break
        return self._settle(upto)

    def _settle(self, upto: int) -> bool:
        """Done once ``position`` reaches ``upto``: indexing goes back to the dispatcher."""
        if self.position >= upto:
            self.done = True
            self._dispatcher.resume_indexing()
        return self.done
