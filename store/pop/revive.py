"""Revive: un-acknowledged messages become visible again after their invisible time.

RocketMQ's ``PopReviveService`` consumes the revive topic: it pairs each checkpoint
with the acks written for it and, once a checkpoint's revive time (pop time +
invisible time) has passed, copies every message still unacknowledged to the POP
retry topic ``%RETRY%<group>_<topic>`` with its reconsume times one higher, where the
group pops it again. Here:

- :func:`replay` rebuilds the in-flight table after a restart: it reads the revive
  queues from the saved revive offsets, registers every checkpoint and applies every
  ack that follows it (an ack whose checkpoint is older than the revive offset was
  already settled and is ignored). A record not written by the broker (a client send
  an older broker accepted, ``mqstore.system_topics`` Rule 2) is skipped and logged:
  a forged checkpoint would copy any topic into the forger's retry topic, a forged ack
  drop another group's message;
- :class:`Reviver` does the copies for the checkpoints :class:`InFlight` reports due. A
  message whose delivery attempt (reconsume times + 1) has reached the group's
  maximum goes to ``%DLQ%<group>`` instead and is not delivered again. A copy the
  store refuses keeps the checkpoint in flight and is retried a second later. The
  offsets copied are then acknowledged in the revive queue (a settling ack), because
  the saved revive offset can lie before a revived checkpoint's record (see
  :meth:`Reviver._settle`) and the replay must not revive it twice;
- :class:`ReviveThread` runs the reviver and saves the POP state on one thread, so a
  checkpoint being revived is never behind a saved revive offset before its copies
  are flushed.

A bad checkpoint (one that cannot be parsed or replayed, or whose revive raises, e.g.
a group whose retry topic is illegal) is skipped and counted (``Reviver.failures``,
logged once per kind) rather than ending the revive thread, which would stop every
later checkpoint from coming back. A failed round or save of the thread is counted
and retried next round (``ReviveThread.failures``).

A crash after a copy is written but before its settling ack is flushed revives that
checkpoint again: a duplicate, never a loss (at least once).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from mqstore.errors import CorruptRecordError
from mqstore.failures import FailureCounter
from mqstore.pop.inflight import InFlight, Pending
from mqstore.pop.records import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    REVIVE_GROUP,
    AckMsg,
    PopCheckPoint,
    dlq_topic,
    normal_topic,
    pop_retry_topic,
)
from mqstore.pop.state import QueueKey
from mqstore.pop.writer import RecordWriter
from mqstore.service import ServiceThread
from mqstore.status import GetStatus
from mqstore.system_topics import broker_written_revive_record

if TYPE_CHECKING:
    from mqstore.consumequeue.results import StoredMessage
    from mqstore.store_view import StoreView

log = logging.getLogger(__name__)

RETRY_LATER_MS = 1000
REVIVE_TICK_MS = 50
"""The revive thread's longest sleep: a checkpoint is revived at most this late."""


def replay(
    store: StoreView,
    topic: str,
    revive_qid: int,
    from_offset: int,
    inflight: InFlight,
    pop_offsets: dict[QueueKey, int],
) -> int:
    """Re-register the checkpoints of one revive queue from ``from_offset`` on and
    apply their acks; raise ``pop_offsets`` past every checkpointed message (those are
    the revive service's now, not the queue's). Returns how many records were read."""
    offset, seen = from_offset, 0
    while True:
        r = store.get_message(REVIVE_GROUP, topic, revive_qid, offset, 32)
        if r.status is GetStatus.OFFSET_TOO_SMALL:
            offset = r.next_begin_offset
            continue
        if not r.messages:
            return seen
        for m in r.messages:
            seen += 1
            _replay_one(m, revive_qid, inflight, pop_offsets)
        offset = r.next_begin_offset


def _replay_one(
    m: StoredMessage, revive_qid: int, inflight: InFlight, pop_offsets: dict[QueueKey, int]
) -> None:
    tag = m.tags
    if not broker_written_revive_record(m.properties, m.born_host, m.store_host):
        log.warning("revive queue %d offset %d: skipping a %s record not written by the "
                    "broker (born at %s:%d)", revive_qid, m.queue_offset, tag,
                    *m.born_host)  # fmt: skip
        return
    try:
        if tag == CK_TAG:
            ck = PopCheckPoint.from_json(m.body)
            inflight.add(Pending(ck, revive_qid, m.queue_offset))
            key = (ck.topic, ck.group, ck.queue_id)
            pop_offsets[key] = max(pop_offsets.get(key, 0), ck.offsets[-1] + 1)
        elif tag in (ACK_TAG, BATCH_ACK_TAG):
            ack = AckMsg.from_json(m.body)
            inflight.ack(ack.key, list(ack.ack_offsets))
    except (CorruptRecordError, ValueError, IndexError):  # e.g. a checkpoint of no offsets
        log.warning("revive queue %d offset %d: unreadable %s record", revive_qid,
                    m.queue_offset, tag)  # fmt: skip


@dataclasses.dataclass(eq=False)
class Reviver:
    """Copies the unacknowledged messages of due checkpoints (see the module docstring)."""

    store: StoreView
    inflight: InFlight
    writer: RecordWriter
    """Writes the copies and the settling acks."""
    max_attempts: Callable[[str], int]
    """A group's most delivery attempts; a message at it goes to the dead-letter queue."""
    clock: Callable[[], float] = time.time
    revived: int = dataclasses.field(default=0, init=False)
    """Messages copied to a retry topic so far."""
    dead: int = dataclasses.field(default=0, init=False)
    """Messages sent to a dead-letter queue so far."""
    failures: FailureCounter = dataclasses.field(
        default_factory=lambda: FailureCounter(log, "pop-revive"), init=False
    )
    """Checkpoints dropped because their revive raised (kind ``checkpoint``)."""

    def revive_due(self) -> int:
        """Revive every checkpoint due now; return how many messages were copied."""
        now = int(self.clock() * 1000)
        n = 0
        for p in self.inflight.take_due(now):
            try:
                n += self._revive(p)
            except Exception as e:  # this checkpoint's own fault: skip it, revive the rest
                ck = p.ck
                self.failures.record("checkpoint", e, (ck.topic, ck.group, ck.queue_id))
        return n

    def _revive(self, p: Pending) -> int:
        ck = p.ck
        n = 0
        settled: list[int] = []
        for i, offset in enumerate(p.unacked):
            m = self.read(ck.topic, ck.queue_id, offset)
            if m is None:
                settled.append(offset)
                continue  # removed by retention: nothing left to deliver
            normal = normal_topic(ck.topic, ck.group)
            dead = m.reconsume_times + 1 >= self.max_attempts(ck.group)
            target = dlq_topic(ck.group) if dead else pop_retry_topic(normal, ck.group)
            r = self.writer.put_copy(m, target, normal, ck.pop_time)
            if not r.status.stored:
                rest = p.unacked[i:]
                log.warning("revive of %s offset %d refused (%s): retrying", ck.topic, offset,
                            r.status.name)  # fmt: skip
                self._settle(p, settled)
                self._retry_later(p, rest)
                return n
            settled.append(offset)
            n += 1
            if dead:
                self.dead += 1
            else:
                self.revived += 1
        self._settle(p, settled)
        return n

    def _settle(self, p: Pending, offsets: list[int]) -> None:
        """Write an ack of the ``offsets`` of ``p`` just revived, so that a replay does
        not revive them a second time.

        The saved revive offset stops at the oldest checkpoint still pending, while
        checkpoints are revived in revive-time order: a checkpoint with a shorter
        invisible time (e.g. written by a change of invisible time) is revived while an
        older one in the same revive queue keeps the saved offset before its record.
        Without this ack, the replay after a restart registers it again and copies its
        messages to the retry topic again. The ack follows the copies in the CommitLog,
        so a flush that keeps the ack keeps the copies; if it is lost in a crash, the
        replay revives them again (a duplicate, as the module docstring allows)."""
        if not offsets:
            return
        ck = p.ck
        ack = AckMsg(ck.topic, ck.group, ck.queue_id, ck.start_offset, ck.pop_time,
                     ck.broker_name, tuple(offsets))  # fmt: skip
        r = self.writer.put_ack(ack, p.revive_qid, ck.revive_time)
        if not r.status.stored:
            log.warning("revive of %s: settling ack refused (%s); a restart may revive "
                        "it again", ck.topic, r.status.name)  # fmt: skip

    def _retry_later(self, p: Pending, rest: list[int]) -> None:
        ck = dataclasses.replace(p.ck, invisible_time=p.ck.invisible_time + RETRY_LATER_MS)
        acked = {o for o in ck.offsets if o not in rest}
        self.inflight.add(Pending(ck, p.revive_qid, p.ck_offset, acked))

    def read(self, topic: str, queue_id: int, offset: int) -> StoredMessage | None:
        """The message at ``offset`` of (``topic``, ``queue_id``), read as the revive
        group, or None when it is gone (expired, or the queue dropped)."""
        r = self.store.get_message(REVIVE_GROUP, topic, queue_id, offset, 1)
        if r.messages and r.messages[0].queue_offset == offset:
            return r.messages[0]
        return None


@dataclasses.dataclass(eq=False)
class ReviveThread(ServiceThread):
    """Runs ``revive`` when a checkpoint is due and ``persist`` every ``persist_ms``."""

    name = "pop-revive"

    revive: Callable[[], int]
    next_due: Callable[[], int | None]
    """The next checkpoint's revive time (epoch ms), None when nothing is in flight."""
    persist: Callable[[], None]
    persist_ms: int
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        super().__init__(0.01)
        self._last_persist = self.clock()
        self.failures = FailureCounter(log, self.name)
        """Failed rounds by kind (``revive``, ``persist``); each is retried next round."""

    def run_once(self) -> None:
        try:
            self.revive()
        except Exception as e:
            self.failures.record("revive", e)
        now = self.clock()
        if (now - self._last_persist) * 1000 >= self.persist_ms:
            self._last_persist = now
            try:
                self.persist()
            except Exception as e:
                self.failures.record("persist", e)
        due = self.next_due()
        wait = 0.05 if due is None else due / 1000 - self.clock()
        self.interval = min(max(wait, 0.002), REVIVE_TICK_MS / 1000)
