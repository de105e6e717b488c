"""LitePullConsumer: the application polls; the client pulls, balances and commits.

RocketMQ ``DefaultLitePullConsumer``::

    consumer = LitePullConsumer("group", transport)
    consumer.subscribe("TopicTest")        # or consumer.assign([mq, ...])
    consumer.start()
    for msg in consumer.messages():        # or batch = consumer.poll(timeout=1.0)
        handle(msg)

Pull loops fill each owned queue's process queue (flow control bounds it exactly as
for push consumers) and a cache of fetched batches; :meth:`poll` takes one batch.

**Commit contract (at-least-once).** Polled messages are *done* only when the next
:meth:`poll` starts (auto commit, the default), or at :meth:`commit_sync`. So a loop
that crashes while handling a batch sees that batch again after restart; an offset
never passes a message the application has not finished. Offsets reach the broker
every 5 s, at :meth:`commit_sync` and at :meth:`shutdown`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from mqstore.client.allocate import MessageQueue, Strategy
from mqstore.client.consumer_base import ConsumerBase, ServiceState
from mqstore.client.consumer_config import ConsumerConfig
from mqstore.client.listener import user_view
from mqstore.client.offset_store import ReadOffsetType
from mqstore.client.process_queue import ProcessQueue
from mqstore.client.pull_service import PullContext, PullMessageService, PullTask
from mqstore.client.rebalance import PullRequest, compute_pull_from_where
from mqstore.client.transport import ConsumeType, Transport
from mqstore.records import StoredMessage

_Batch = tuple[MessageQueue, ProcessQueue, list[StoredMessage]]


class LitePullConsumer(ConsumerBase):
    """A lite pull consumer: ``subscribe`` (group rebalance) or ``assign`` (fixed
    queues, no group membership). ``poll`` and ``commit_sync`` are meant for one
    application thread; the rest is thread-safe."""

    consume_type = ConsumeType.CONSUME_ACTIVELY

    def __init__(
        self,
        group: str,
        transports: Transport | list[Transport],
        config: ConsumerConfig | None = None,
        *,
        auto_commit: bool = True,
        strategy: Strategy | None = None,
        offset_dir: Path | None = None,
    ) -> None:
        super().__init__(group, transports, config, strategy=strategy, offset_dir=offset_dir)
        self.auto_commit = auto_commit
        self._assigned: list[MessageQueue] | None = None
        self._cache: queue.Queue[_Batch] = queue.Queue()
        self._pqs: dict[MessageQueue, ProcessQueue] = {}
        self._lock = threading.Lock()
        self._polled: list[_Batch] = []  # returned by poll, not yet done

    # -- setup -------------------------------------------------------------------------

    def assign(self, queues: Sequence[MessageQueue]) -> None:
        """Consume exactly ``queues`` (before :meth:`start`); no rebalance."""
        if self.state is not ServiceState.CREATE_JUST:
            raise RuntimeError("assign() before start()")
        self._assigned = sorted(queues)
        for mq in self._assigned:
            self.subscriptions.setdefault(mq.topic, "*")

    def start(self) -> None:
        if self.state is not ServiceState.CREATE_JUST:
            raise RuntimeError(f"consumer {self.group} already started")
        if not self.subscriptions:
            raise RuntimeError("subscribe() or assign() before start()")
        self._ctx = PullContext(
            self.group,
            self.config,
            self.brokers,
            self.offset_store,
            self.subscriptions,
            self,
            self.stopped,
            False,
            on_offset_illegal=self._on_offset_illegal,
            relocate_offset=self._relocate,
        )
        self._pull_service = PullMessageService(f"{self.group}-pull", self._ctx)
        self._pull_service.start()
        rebalance = self._new_rebalance(self, push=False)
        if self._assigned is None:
            self._start_services(rebalance)
            return
        self.rebalance = rebalance
        self.offset_store.load()
        self.scheduler.start()
        self.scheduler.every(
            self.config.persist_offset_interval_ms,
            self.config.persist_offset_interval_ms,
            self.persist_offsets,
        )
        self.state = ServiceState.RUNNING
        requests = []
        for mq in self._assigned:
            pq = ProcessQueue()
            requests.append(PullRequest(self.group, mq, pq, self._relocate(mq)))
        self.dispatch(requests)

    def owned(self) -> list[MessageQueue]:
        with self._lock:
            return sorted(mq for mq, pq in self._pqs.items() if not pq.dropped)

    def shutdown(self) -> None:
        """Commit what was polled, persist offsets, leave the group (idempotent)."""
        if self.state is not ServiceState.RUNNING:
            return
        self._mark_done()
        self._stop_rebalance()
        self._pull_service.stop()
        self.persist_offsets()
        if self._assigned is None:
            self._finish_shutdown()
        else:
            for pq in self._pqs.values():
                pq.dropped = True
            self.scheduler.stop()
            self.state = ServiceState.SHUTDOWN_ALREADY

    # -- polling ---------------------------------------------------------------------------

    def poll(self, timeout: float = 5.0) -> list[StoredMessage]:
        """The next fetched batch (``[]`` after ``timeout`` seconds).

        With auto commit, the previous poll's messages are committed first.
        """
        if self.auto_commit:
            self._mark_done()
        try:
            while True:
                mq, pq, msgs = self._cache.get(timeout=timeout)
                if not pq.dropped:
                    break
        except queue.Empty:
            return []
        self._polled.append((mq, pq, msgs))
        return [user_view(m) for m in msgs]

    def messages(self, poll_timeout: float = 1.0) -> Iterator[StoredMessage]:
        """Every message, one at a time, until :meth:`shutdown` (auto commit applies
        per polled batch)."""
        while not self.stopped.is_set():
            yield from self.poll(poll_timeout)

    def commit_sync(self) -> None:
        """Commit everything polled so far and persist it to the broker now."""
        self._mark_done()
        self.persist_offsets()

    def committed(self, mq: MessageQueue) -> int | None:
        """The offset the broker (or file) holds for ``mq``."""
        return self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Consume ``mq`` from ``offset`` next: fetched messages are discarded.

        Raises:
            ValueError: ``mq`` is not owned now.
        """
        with self._lock:
            old = self._pqs.get(mq)
        if old is None or old.dropped:
            raise ValueError(f"{mq} is not assigned to this consumer")
        old.dropped = True
        self.offset_store.update_offset(mq, offset, increase_only=False)
        self.dispatch([PullRequest(self.group, mq, ProcessQueue(), offset)])

    def _mark_done(self) -> None:
        for mq, pq, msgs in self._polled:
            offset = pq.remove_messages(msgs)
            if offset is not None and not pq.dropped:
                self.offset_store.update_offset(mq, offset, increase_only=True)
        self._polled.clear()

    # -- pull loop and rebalance hooks ------------------------------------------------------

    def submit(
        self, msgs: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue, dispatch: bool
    ) -> None:
        del dispatch
        self._cache.put((mq, pq, msgs))

    def dispatch(self, requests: list[PullRequest]) -> None:
        if self.stopped.is_set():
            return
        for req in requests:
            with self._lock:
                self._pqs[req.mq] = req.pq
            self._pull_service.execute_now(PullTask(req))

    def remove_unnecessary_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        with self._lock:
            current = self._pqs.pop(mq, None)
        if current is not None:  # after a seek, the rebalance holds an older pq
            current.dropped = True
        self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)

    def lock(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        return True

    def _on_offset_illegal(self, mq: MessageQueue) -> None:
        if self._assigned is None and self.rebalance is not None:
            self.rebalance.remove_process_queue(mq)
            self.rebalance_now()

    def _relocate(self, mq: MessageQueue) -> int:
        ts = self.rebalance.consume_timestamp_ms if self.rebalance is not None else 0
        return compute_pull_from_where(mq, self.config, self.offset_store, self.brokers, ts)
