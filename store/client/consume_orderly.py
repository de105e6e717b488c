"""ConsumeMessageOrderlyService: one thread per queue at a time, in offset order.

RocketMQ ``ConsumeMessageOrderlyService`` (docs/client.md §2.4). Ordering holds across
the group because a queue is consumed only by the member holding its **broker lock**:

- the rebalance locks a queue before taking it (:meth:`lock`); every
  ``lock_interval_ms`` (20 s) :meth:`lock_all` renews the locks of every owned queue
  (the broker lease is 60 s), so a long-running member keeps its queues;
- a process queue is consumed only while ``locked`` and the last successful lock is at
  most ``lock_max_live_ms`` (30 s) old, so a member cut off from the broker stops
  before its lease ends; once the lease lapses another member may take the queue;
- inside the process, ``pq.consume_lock`` admits one consume thread per queue; the
  batch is taken in offset order and committed (offset = last + 1) only on SUCCESS.
  SUSPEND_CURRENT_QUEUE_A_MOMENT puts the batch back and retries it after the suspend
  time (10..30000 ms), so nothing behind it overtakes it.

Dropping a queue (:meth:`remove_unnecessary_queue`) waits up to 1 s for the running
batch, persists the offset, then unlocks it on the broker, so the next owner starts
after the last committed batch; if the batch is still running the unlock is delayed
20 s (RocketMQ 4.9) and the next owner waits for the lease.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from mqstore.client.allocate import MessageQueue
from mqstore.client.brokers import Brokers
from mqstore.client.consumer_config import (
    MAX_TIME_CONSUME_CONTINUOUSLY_MS,
    ConsumerConfig,
)
from mqstore.client.listener import (
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    OrderlyListener,
    user_view,
)
from mqstore.client.offset_store import OffsetStore
from mqstore.client.process_queue import ProcessQueue, now_ms
from mqstore.client.scheduler import Scheduler
from mqstore.client.transport import BrokerError, MessageModel, TransportError
from mqstore.records import StoredMessage

log = logging.getLogger(__name__)

UNLOCK_DELAY_MS = 20_000


class ConsumeMessageOrderlyService:
    """Orderly consumption of the queues in ``table()``; thread-safe."""

    def __init__(
        self,
        group: str,
        client_id: str,
        config: ConsumerConfig,
        listener: OrderlyListener,
        brokers: Brokers,
        offset_store: OffsetStore,
        scheduler: Scheduler,
        table: Callable[[], dict[MessageQueue, ProcessQueue]],
    ) -> None:
        self._group = group
        self._cid = client_id
        self._config = config
        self._listener = listener
        self._brokers = brokers
        self._offsets = offset_store
        self._scheduler = scheduler
        self._table = table
        self._pool = ThreadPoolExecutor(config.consume_thread_max, thread_name_prefix=group)
        self._stopped = False

    @property
    def _clustering(self) -> bool:
        return self._config.message_model is MessageModel.CLUSTERING

    def start(self) -> None:
        """Schedule :meth:`lock_all` (clustering): first after 1 s, then every
        ``lock_interval_ms``. A shorter interval also shortens the first delay, so the
        first renewal never comes later than the interval promises."""
        if self._clustering:
            interval = self._config.lock_interval_ms
            self._scheduler.every(min(1000, interval), interval, self.lock_all)

    def shutdown(self, wait: bool = True) -> None:
        self._stopped = True
        self._pool.shutdown(wait=wait, cancel_futures=True)

    # -- broker locks --------------------------------------------------------------

    def lock(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Lock ``mq`` on the broker for this client; marks ``pq`` locked on success."""
        if not self._clustering:
            pq.locked = True
            return True
        try:
            got = self._brokers.for_queue(mq).lock_batch(self._group, self._cid, [mq])
        except (TransportError, BrokerError) as e:
            log.warning("%s lock %s failed: %s", self._cid, mq, e)
            return False
        if mq in got:
            pq.locked = True
            pq.last_lock_timestamp = now_ms()
            return True
        return False

    def lock_all(self) -> None:
        """Renew every owned queue's lock, per broker; a refused queue is unlocked
        locally (its consumption pauses until a later lock succeeds)."""
        by_broker: dict[str, dict[MessageQueue, ProcessQueue]] = {}
        for mq, pq in self._table().items():
            by_broker.setdefault(mq.broker_name, {})[mq] = pq
        for mqs in by_broker.values():
            first = next(iter(mqs))
            try:
                got = self._brokers.for_queue(first).lock_batch(self._group, self._cid, list(mqs))
            except (TransportError, BrokerError) as e:
                log.warning("%s lock_all failed: %s", self._cid, e)
                continue
            stamp = now_ms()
            for mq, pq in mqs.items():
                pq.locked = mq in got
                if pq.locked:
                    pq.last_lock_timestamp = stamp

    def unlock(self, mq: MessageQueue) -> None:
        """Release ``mq`` on the broker (errors logged: the lease expires anyway)."""
        try:
            self._brokers.for_queue(mq).unlock_batch(self._group, self._cid, [mq])
        except (TransportError, BrokerError) as e:
            log.warning("%s unlock %s failed: %s", self._cid, mq, e)

    def remove_unnecessary_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """A dropped queue: wait for its batch, persist the offset, then unlock."""
        if not self._clustering:
            self._offsets.persist(mq)
            self._offsets.remove_offset(mq)
            return
        if pq.consume_lock.acquire(timeout=1.0):
            try:
                self._offsets.persist(mq)
                self._offsets.remove_offset(mq)
                pq.locked = False
            finally:
                pq.consume_lock.release()
            self.unlock(mq)
        else:
            self._scheduler.schedule(UNLOCK_DELAY_MS, lambda: self.unlock(mq))

    # -- consumption -------------------------------------------------------------------

    def submit(
        self, msgs: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue, dispatch: bool
    ) -> None:
        """Start a consume request for ``pq`` if the put said none is running."""
        del msgs
        if dispatch:
            self._submit_later(pq, mq, 0)

    def _submit_later(self, pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        if self._stopped:
            return

        def go() -> None:
            with contextlib.suppress(RuntimeError):  # pool shut down
                self._pool.submit(self._run, pq, mq)

        if delay_ms <= 0:
            go()
        else:
            self._scheduler.schedule(delay_ms, go)

    def _may_consume(self, pq: ProcessQueue) -> bool:
        if not self._clustering:
            return True
        return pq.locked and not pq.is_lock_expired(self._config.lock_max_live_ms)

    def _run(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        """One consume request: batches in order until empty, suspended or unlocked."""
        if pq.dropped:
            return
        with pq.consume_lock:
            begin = time.monotonic()
            while not pq.dropped and not self._stopped:
                if not self._may_consume(pq):
                    self._submit_later(pq, mq, 100)
                    return
                if (time.monotonic() - begin) * 1000 > MAX_TIME_CONSUME_CONTINUOUSLY_MS:
                    self._submit_later(pq, mq, 10)
                    return
                msgs = pq.take_messages(max(1, self._config.consume_message_batch_max_size))
                if not msgs:
                    return  # take_messages cleared pq.consuming
                if not self._consume_batch(pq, mq, msgs):
                    return

    def _consume_batch(self, pq: ProcessQueue, mq: MessageQueue, msgs: list[StoredMessage]) -> bool:
        """Run the listener on one taken batch; False when the request must end."""
        ctx = ConsumeOrderlyContext(mq)
        status: ConsumeOrderlyStatus | None
        try:
            status = self._listener([user_view(m) for m in msgs], ctx)
        except Exception:
            log.exception("%s orderly listener raised on %s", self._group, mq)
            status = None
        if status is ConsumeOrderlyStatus.SUCCESS and (pq.locked or not self._clustering):
            # Committed even if the queue was dropped meanwhile: the broker lock is
            # still ours (it is released only after the drop persisted the offset,
            # under consume_lock), so the next owner starts after this batch instead
            # of replaying it (RocketMQ skips this update and replays). Not a promise
            # of exactly-once: a pull already in flight when the queue was dropped
            # may still piggy-back an older commit offset to the broker, and the next
            # owner then replays from there, in order (RocketMQ's orderly contract).
            commit = pq.commit()
            if commit is not None:
                self._offsets.update_offset(mq, commit, increase_only=False)
            return not pq.dropped
        if pq.dropped:
            return False
        pq.make_message_to_consume_again(msgs)
        wait = ctx.suspend_current_queue_time_millis
        if wait < 0:
            wait = self._config.suspend_current_queue_time_ms
        self._submit_later(pq, mq, min(30_000, max(10, wait)))
        return False
