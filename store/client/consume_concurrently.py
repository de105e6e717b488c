"""ConsumeMessageConcurrentlyService: a thread pool consuming batches in any order.

RocketMQ ``ConsumeMessageConcurrentlyService`` (docs/client.md §2.3). Held messages are
cut into batches of ``consume_message_batch_max_size`` and run on a pool of
``consume_thread_max`` threads. After a batch:

- CONSUME_SUCCESS acks up to ``context.ack_index``; RECONSUME_LATER (or a raise, or
  ``None``) acks nothing.
- CLUSTERING: every unacked message is sent back (CONSUMER_SEND_MSG_BACK) with the
  context's delay level, so it returns through ``%RETRY%<group>`` (the broker moves it
  to ``%DLQ%<group>`` after ``max_reconsume_times``). A message whose send-back failed
  stays held and is consumed again locally after 5 s.
  BROADCASTING: unacked messages are dropped (logged), as in RocketMQ.
- The messages no longer held leave the process queue and the returned commit offset
  (smallest still held) goes to the offset store, increase-only: a fast batch cannot
  move the offset past a slow one.

A batch whose queue was dropped meanwhile is not acked: the new owner consumes it
again (at-least-once).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from mqstore.client.allocate import MessageQueue
from mqstore.client.brokers import Brokers
from mqstore.client.consumer_config import ConsumerConfig
from mqstore.client.listener import (
    ConcurrentListener,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    user_view,
)
from mqstore.client.offset_store import OffsetStore
from mqstore.client.process_queue import ProcessQueue
from mqstore.client.scheduler import Scheduler
from mqstore.client.transport import BrokerError, MessageModel, SendBack, TransportError
from mqstore.records import StoredMessage

log = logging.getLogger(__name__)


class ConsumeMessageConcurrentlyService:
    """Runs the listener on a pool; commits offsets as batches finish. Thread-safe.

    Nothing to start: the pool creates its threads on demand.
    """

    def __init__(
        self,
        group: str,
        config: ConsumerConfig,
        listener: ConcurrentListener,
        brokers: Brokers,
        offset_store: OffsetStore,
        scheduler: Scheduler,
    ) -> None:
        self._group = group
        self._config = config
        self._listener = listener
        self._brokers = brokers
        self._offsets = offset_store
        self._scheduler = scheduler
        self._pool = ThreadPoolExecutor(config.consume_thread_max, thread_name_prefix=group)
        self.sent_back = 0
        self.send_back_failed = 0

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=True)

    def submit(
        self, msgs: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue, dispatch: bool
    ) -> None:
        """Consume ``msgs`` (held by ``pq``) in batches; ``dispatch`` is for orderly."""
        n = max(1, self._config.consume_message_batch_max_size)
        for i in range(0, len(msgs), n):
            batch = msgs[i : i + n]
            try:
                self._pool.submit(self._consume, batch, pq, mq)
            except RuntimeError:  # pool shut down: the batch stays unacked
                return

    def _consume(self, msgs: Sequence[StoredMessage], pq: ProcessQueue, mq: MessageQueue) -> None:
        if pq.dropped:
            return
        ctx = ConsumeConcurrentlyContext(mq)
        status: ConsumeConcurrentlyStatus | None
        try:
            status = self._listener([user_view(m) for m in msgs], ctx)
        except Exception:
            log.exception("%s listener raised on %s", self._group, mq)
            status = None
        if pq.dropped:
            return
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            ack = min(ctx.ack_index, len(msgs) - 1)
        else:
            ack = -1
        failed = list(msgs[ack + 1 :])
        back_failed: list[StoredMessage] = []
        if failed and self._config.message_model is MessageModel.CLUSTERING:
            for m in failed:
                if not self._send_back(m, mq, ctx.delay_level_when_next_consume):
                    back_failed.append(m)
        elif failed:
            log.warning("%s broadcasting: dropping %d failed messages", self._group, len(failed))
        if back_failed:
            done_offsets = {m.queue_offset for m in back_failed}
            done = [m for m in msgs if m.queue_offset not in done_offsets]
        else:
            done = list(msgs)
        offset = pq.remove_messages(done)
        if offset is not None and not pq.dropped:
            self._offsets.update_offset(mq, offset, increase_only=True)
        if back_failed:
            again = [m._replace(reconsume_times=m.reconsume_times + 1) for m in back_failed]
            self._scheduler.schedule(
                self._config.send_back_failed_retry_ms,
                lambda: self.submit(again, pq, mq, True),
            )

    def _send_back(self, m: StoredMessage, mq: MessageQueue, delay_level: int) -> bool:
        """Send ``m`` back to the broker of the queue it came from; False on failure."""
        try:
            request = SendBack(self._group, m, delay_level, self._config.max_reconsume_times)
            self._brokers.for_queue(mq).send_back(request)
        except (TransportError, BrokerError) as e:
            self.send_back_failed += 1
            log.warning("%s send back of %s failed: %s", self._group, m.msg_id, e)
            return False
        self.sent_back += 1
        return True
