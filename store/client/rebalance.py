"""RebalanceImpl: which queues this consumer owns, and the process queues for them.

RocketMQ ``RebalanceImpl`` + ``RebalancePushImpl`` (docs/client.md §1, §4). One run,
:meth:`RebalanceImpl.do_rebalance`, for every subscribed topic:

1. CLUSTERING: ``mq_all`` = the topic's queues sorted, ``cid_all`` = the group's live
   client ids sorted, mine = ``strategy(group, me, mq_all, cid_all)`` (a pure function
   from :mod:`mqstore.client.allocate`, so every member computes the same disjoint split).
   BROADCASTING: mine = every queue.
2. Queues held but no longer mine are **dropped**: ``pq.dropped`` stops their pull and
   consume threads, then the hooks persist the offset (and unlock, orderly) before the
   process queue is forgotten, so the next owner starts where this one stopped.
3. New queues get a process queue and a pull request at ``compute_pull_from_where``.
   Orderly consumers lock a queue on the broker first and skip it if that fails.

Rule: a queue is never in two members' tables *after* both have rebalanced over the
same membership; between their runs it may be (duplicates around a rebalance are
RocketMQ's at-least-once, not a bug). The allocation raising ``ValueError`` (no queues,
no consumers yet) keeps the current assignment, as RocketMQ does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from mqstore.client.allocate import MessageQueue, Strategy, sort_cids
from mqstore.client.brokers import Brokers
from mqstore.client.consumer_config import PULL_MAX_IDLE_TIME_MS, ConsumerConfig, is_retry_topic
from mqstore.client.offset_store import OffsetStore, ReadOffsetType
from mqstore.client.process_queue import ProcessQueue
from mqstore.client.transport import BrokerError, ConsumeFromWhere, MessageModel, TransportError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PullRequest:
    """Start pulling ``mq`` into ``pq`` from ``next_offset`` (RocketMQ ``PullRequest``)."""

    group: str
    mq: MessageQueue
    pq: ProcessQueue
    next_offset: int


class RebalanceHooks(Protocol):
    """What the consumer kind (push concurrent, push orderly, lite pull) does."""

    def remove_unnecessary_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """``pq`` was just dropped: persist its offset (orderly: unlock the queue)."""
        ...

    def lock(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Orderly only: lock ``mq`` on the broker before taking it."""
        ...

    def dispatch(self, requests: list[PullRequest]) -> None:
        """Start pulling for newly owned queues."""
        ...


def compute_pull_from_where(
    mq: MessageQueue,
    config: ConsumerConfig,
    offset_store: OffsetStore,
    brokers: Brokers,
    consume_timestamp_ms: int,
) -> int:
    """Where a newly owned queue starts (the table of docs/client.md §4).

    A stored offset wins. Without one: LAST_OFFSET -> the broker's max offset (0 for a
    retry topic: retries are never old), FIRST_OFFSET -> 0, TIMESTAMP -> the offset
    searched by ``consume_timestamp_ms`` (the max offset for a retry topic).

    Raises:
        TransportError, BrokerError: the broker could not tell (RocketMQ's -1: skip
        the queue this round, the next rebalance retries).
    """
    last = offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
    if last is not None and last >= 0:
        return last
    where = config.consume_from_where
    transport = brokers.for_queue(mq)
    if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
        return 0
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
        if is_retry_topic(mq.topic):
            return transport.max_offset(mq)
        return transport.search_offset(mq, consume_timestamp_ms)
    return 0 if is_retry_topic(mq.topic) else transport.max_offset(mq)


class RebalanceImpl:
    """The process-queue table of one consumer and the run that updates it.

    Thread-safe: :meth:`do_rebalance` runs on the rebalance thread; pull threads read
    the table through :meth:`process_queue` and may :meth:`remove_process_queue`.
    """

    def __init__(
        self,
        group: str,
        client_id: str,
        config: ConsumerConfig,
        strategy: Strategy,
        brokers: Brokers,
        offset_store: OffsetStore,
        subscriptions: Mapping[str, str],
        hooks: RebalanceHooks,
        *,
        orderly: bool = False,
        push: bool = True,
    ) -> None:
        self.group = group
        self.client_id = client_id
        self._config = config
        self._strategy = strategy
        self._brokers = brokers
        self._offsets = offset_store
        self._subs = subscriptions
        self._hooks = hooks
        self._orderly = orderly
        self._push = push
        self._lock = threading.RLock()
        self._table: dict[MessageQueue, ProcessQueue] = {}
        self.consume_timestamp_ms = config.consume_timestamp_ms or (
            time.time_ns() // 1_000_000 - 30 * 60 * 1000
        )
        self.on_changed: Callable[[str, list[MessageQueue]], None] | None = None
        self.runs = 0
        self.balanced = True  # False when an orderly lock failed: re-run soon
        self._routes: dict[str, frozenset[MessageQueue]] = {}  # as the last run saw them

    def process_queue_table(self) -> dict[MessageQueue, ProcessQueue]:
        """A snapshot copy of the table."""
        with self._lock:
            return dict(self._table)

    def owned(self) -> list[MessageQueue]:
        """The queues owned now, sorted."""
        with self._lock:
            return sorted(self._table)

    def process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        with self._lock:
            return self._table.get(mq)

    def remove_process_queue(self, mq: MessageQueue) -> None:
        """Drop ``mq`` (offset illegal, shutdown): persist, forget (orderly: unlock)."""
        with self._lock:
            pq = self._table.pop(mq, None)
        if pq is not None:
            pq.dropped = True
            self._hooks.remove_unnecessary_queue(mq, pq)

    def drop_all(self) -> None:
        """Shutdown: drop every queue (each persisted and, orderly, unlocked)."""
        for mq in self.owned():
            self.remove_process_queue(mq)

    def do_rebalance(self) -> bool:
        """One rebalance over every subscribed topic; True if the assignment changed."""
        self.runs += 1
        self.balanced = True
        changed = False
        for topic in list(self._subs):
            try:
                changed |= self._rebalance_topic(topic)
            except (TransportError, BrokerError) as e:
                self.balanced = False
                log.warning("%s rebalance of %s failed: %s", self.client_id, topic, e)
        with self._lock:
            stale = [mq for mq in self._table if mq.topic not in self._subs]
        for mq in stale:
            self.remove_process_queue(mq)
        return changed or bool(stale)

    def route_changed(self) -> bool:
        """Re-read every subscribed topic's queues (the route poll); True if a set
        differs from what the last rebalance saw, so the caller wakes the rebalance.

        A topic the rebalance has not seen counts as having no queues, so a topic
        created after start (a retry topic after the first send-back) is picked up.
        Raises nothing: a topic whose route cannot be read is skipped until next poll.
        """
        changed = False
        for topic in list(self._subs):
            try:
                now = frozenset(self._brokers.topic_queues(topic))
            except (TransportError, BrokerError) as e:
                log.debug("%s route poll of %s failed: %s", self.client_id, topic, e)
                continue
            with self._lock:
                seen = self._routes.get(topic, frozenset())
            if now != seen:
                log.info(
                    "%s: queues of %s changed (%d -> %d), rebalancing",
                    self.client_id,
                    topic,
                    len(seen),
                    len(now),
                )
                changed = True
        return changed

    def _rebalance_topic(self, topic: str) -> bool:
        mq_all = self._brokers.topic_queues(topic)
        with self._lock:
            self._routes[topic] = frozenset(mq_all)
        if self._config.message_model is MessageModel.BROADCASTING:
            mine = set(mq_all)
        else:
            if not mq_all:
                return False
            cid_all = sort_cids(set(self._brokers.consumer_ids(self.group, mq_all[0])))
            if not cid_all:
                return False
            try:
                mine = set(self._strategy(self.group, self.client_id, mq_all, cid_all))
            except ValueError as e:
                log.warning("%s allocate %s: %s", self.client_id, topic, e)
                return False
        changed = self._update_table(topic, mine)
        if changed and self.on_changed is not None:
            self.on_changed(topic, sorted(mine))
        return changed

    def _update_table(self, topic: str, mine: set[MessageQueue]) -> bool:
        changed = False
        with self._lock:
            held = {mq: pq for mq, pq in self._table.items() if mq.topic == topic}
        for mq, pq in held.items():
            idle = self._push and pq.is_pull_expired(PULL_MAX_IDLE_TIME_MS)
            if mq not in mine or idle:
                self.remove_process_queue(mq)
                changed = True
        requests: list[PullRequest] = []
        for mq in sorted(mine - held.keys()):
            pq = ProcessQueue()
            if self._orderly and not self._hooks.lock(mq, pq):
                self.balanced = False
                continue
            self._offsets.remove_offset(mq)
            try:
                offset = compute_pull_from_where(
                    mq, self._config, self._offsets, self._brokers, self.consume_timestamp_ms
                )
            except (TransportError, BrokerError) as e:
                log.warning("%s compute offset of %s failed: %s", self.client_id, mq, e)
                continue
            with self._lock:
                self._table[mq] = pq
            requests.append(PullRequest(self.group, mq, pq, offset))
            changed = True
        if requests:
            self._hooks.dispatch(requests)
        return changed
