"""The broker's side of transactional messages: half puts, END_TRANSACTION, check-back.

The records are :mod:`mqstore.transaction`'s; this module decides when to write them
(docs/transactions.md).

Rules
-----
Rule 1 (half). A single send whose properties say ``TRAN_MSG=true`` is stored as a half
message (``SendMessageProcessor``: not when it is a redelivery with a delay level). The
answer names the real topic's queue id, the half record's queue offset and offset
message id: the producer's END_TRANSACTION quotes those two.

Rule 2 (end). END_TRANSACTION (37) with COMMIT or ROLLBACK looks the half record up by
``commitLogOffset`` and refuses, with RocketMQ's remarks, a header whose producer group,
``tranStateTableOffset`` or ``commitLogOffset`` does not match it
(:func:`mqstore.transaction.end_mismatch`). COMMIT puts the final message and, once it
is stored, the op record; ROLLBACK puts the op record only. UNKNOWN changes nothing.
A slave answers SLAVE_NOT_AVAILABLE.

Rule 3 (check-back). Every ``transaction_check_interval_ms`` (RocketMQ's
``transactionCheckInterval``, 60 s in 4.9.8, 30 s in 5.3.3), for each half queue the
service reads the op records from the ``CID_RMQ_SYS_TRANS`` group's op offset, then the
half records from its half offset, in order (``TransactionalMessageServiceImpl.check``):

* a record an op names is done;
* one checked ``transaction_check_max`` times (15) goes to ``TRANS_CHECK_MAX_TIME_TOPIC``;
* one older than ``file_reserved_time_hours`` is skipped;
* one stored after this round began, or younger than ``transaction_timeout_ms`` (6 s),
  ends the round (later ones are younger still);
* one with ``CHECK_IMMUNITY_TIME_IN_SECONDS`` still inside that time is re-put once with
  ``TRAN_PREPARED_QUEUE_OFFSET`` = its queue offset, and a copy whose original an op
  names is done;
* any other is re-put with ``TRANSACTION_CHECK_TIMES`` + 1 and the copy is checked:
  CHECK_TRANSACTION_STATE (39, oneway) to one live producer of its ``PGROUP`` (from
  HEART_BEAT), header ``commitLogOffset`` / ``tranStateTableOffset`` / ``offsetMsgId``
  of the copy, ``msgId`` = ``transactionId`` = its UNIQ_KEY, body the copy encoded as a
  record with its real topic and queue (``Broker2Client.checkProducerTransactionState``).
  With no producer online the copy waits for the next round.

The group's offsets then move past what is done (consumer offsets of
``CID_RMQ_SYS_TRANS``, persisted with the others), so after a crash the check reads
again from the last persisted offsets: the op records are in the CommitLog, so no
decided message is decided again, and an undecided one is checked again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from mqstore.broker.connections import ConnectionTable
from mqstore.broker.offsets import ConsumerOffsetManager
from mqstore.broker.sending import PUT_STATUS_CODES, Reply
from mqstore.broker.topics import TopicConfigManager
from mqstore.commitlog import format as fmt
from mqstore.failures import FailureCounter
from mqstore.message import Message
from mqstore.property_format import PropertyFormat
from mqstore.put import PutResult
from mqstore.remoting.codes import RequestCode, ResponseCode
from mqstore.service import ServiceThread
from mqstore.status import GetStatus
from mqstore.store_view import StoreView
from mqstore.transaction import (
    CHECK_GROUP,
    CHECK_MAX_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    PROPERTY_CHECK_TIMES,
    PROPERTY_PREPARED_QUEUE_OFFSET,
    REMOVE_TAG,
    EndTransaction,
    TransactionState,
    check_times,
    discarded,
    end_mismatch,
    final_message,
    immunity_ms,
    op_message,
    parse_op_body,
    real_queue,
    renewed_half,
)

log = logging.getLogger(__name__)

MAX_PROCESS_TIME_MS: Final = 60_000
"""How long one queue's check round may run (``MAX_PROCESS_TIME_LIMIT``)."""
OP_READ_LIMIT: Final = 100_000
"""The most op records one round reads per queue (a bound on memory, not RocketMQ's)."""


@runtime_checkable
class OnewayChannel(Protocol):
    """A client channel the broker can push a oneway request on."""

    def send_oneway(self, code: int, ext: dict[str, str], body: bytes) -> None:
        """Push the request (must not raise for a closed connection)."""
        ...


@dataclass(frozen=True, slots=True)
class CheckSettings:
    """RocketMQ's ``BrokerConfig`` transaction settings (its defaults)."""

    transaction_timeout_ms: int = 6_000
    transaction_check_interval_ms: int = 60_000
    transaction_check_max: int = 15


@dataclass
class _QueueScan:
    """What one round knows about one half queue's op records."""

    removed: set[int] = field(default_factory=set)
    """Half queue offsets some op record names."""
    ops: list[tuple[int, list[int]]] = field(default_factory=list)
    """(op queue offset, the half offsets it names), in op queue order."""
    op_end: int = 0


class TransactionService:
    """Half puts, END_TRANSACTION and the check-back round over one store."""

    def __init__(
        self,
        store: StoreView,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        producers: ConnectionTable,
        settings: CheckSettings,
        broker_name: str,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.producers = producers
        self.settings = settings
        self.broker_name = broker_name
        self.format = PropertyFormat.parse(store.cfg.property_format)
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.checks_sent = 0
        self.discarded = 0

    # ----------------------------------------------------------------- Rule 2

    def end(
        self,
        header: EndTransaction,
        *,
        slave: bool = False,
        publish_refusal: Callable[[str], str | None] | None = None,
    ) -> Reply:
        """END_TRANSACTION (Rule 2). ``publish_refusal(topic)`` (ACL) tells why the sender
        may not publish to the half record's real topic: then NO_PERMISSION."""
        if slave:
            return Reply(ResponseCode.SLAVE_NOT_AVAILABLE)
        if header.state is TransactionState.UNKNOWN:
            return Reply(ResponseCode.SUCCESS)
        rec = self.store.look_message_by_offset(header.commit_log_offset)
        if rec is None or rec.topic != HALF_TOPIC:
            return Reply(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        target = real_queue(rec)
        refusal = publish_refusal(target[0]) if publish_refusal and target else None
        if refusal is not None:
            return Reply(ResponseCode.NO_PERMISSION, refusal)
        mismatch = end_mismatch(
            rec, header.producer_group, header.tran_state_table_offset, header.commit_log_offset
        )
        if mismatch is not None:
            return Reply(ResponseCode.SYSTEM_ERROR, mismatch)
        if header.state is TransactionState.COMMIT:
            msg = final_message(rec)
            if msg is None:
                return Reply(ResponseCode.SYSTEM_ERROR, "the half message names no real topic")
            result = self._put(msg)
            if not result.status.stored:
                code = PUT_STATUS_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
                return Reply(code, result.error)
        self._put_op(rec)
        return Reply(ResponseCode.SUCCESS)

    def _put(self, msg: Message) -> PutResult:
        return self.store.put_message(msg)

    def _put_op(self, rec: fmt.MessageRecord) -> None:
        self.topics.create_system(OP_TOPIC, 1)
        op = op_message(rec.queue_id, rec.queue_offset, self.store.cfg.store_host, self.format,
                        self._clock())  # fmt: skip
        result = self._put(op)
        if not result.status.stored:  # the half stays open: check-back decides it again
            log.warning("transactions: op record for half offset %d not stored: %s",
                        rec.queue_offset, result.status)  # fmt: skip

    # ----------------------------------------------------------------- Rule 3

    def check(self) -> int:
        """One check-back round over every half queue; returns the checks sent."""
        config = self.topics.get(HALF_TOPIC)
        if config is None:
            return 0
        start = self._clock()
        return sum(self._check_queue(q, start) for q in range(config.read_queue_nums))

    def _offset(self, topic: str, queue_id: int) -> int:
        low = self.store.min_offset_in_queue(topic, queue_id)
        committed = self.offsets.query(CHECK_GROUP, topic, queue_id)
        return low if committed is None or committed < low else committed

    def _read_ops(self, queue_id: int) -> _QueueScan:
        scan = _QueueScan()
        offset = self._offset(OP_TOPIC, queue_id)
        scan.op_end = offset
        while len(scan.ops) < OP_READ_LIMIT:
            g = self.store.get_message(CHECK_GROUP, OP_TOPIC, queue_id, offset, 32, "*")
            if g.status is not GetStatus.FOUND or not g.messages:
                break
            for m in g.messages:
                named = parse_op_body(m.body) if m.tags == REMOVE_TAG else []
                scan.ops.append((m.queue_offset, named))
                scan.removed.update(named)
            offset = g.next_begin_offset
        scan.op_end = offset
        return scan

    def _half_at(self, queue_id: int, offset: int) -> tuple[fmt.MessageRecord | None, int]:
        """The half record at ``offset`` and the offset after it (past a gap)."""
        g = self.store.get_message(CHECK_GROUP, HALF_TOPIC, queue_id, offset, 1, "*")
        if g.status is GetStatus.FOUND and g.messages:
            m = g.messages[0]
            return self.store.look_message_by_offset(m.physical_offset), m.queue_offset + 1
        return None, max(g.next_begin_offset, offset + 1)

    def _check_queue(self, queue_id: int, start: int) -> int:
        s = self.settings
        scan = self._read_ops(queue_id)
        half_offset = i = self._offset(HALF_TOPIC, queue_id)
        high = self.store.max_offset_in_queue(HALF_TOPIC, queue_id)
        reserved_ms = self.store.cfg.file_reserved_time_hours * 3_600_000
        sent = 0
        while i < high:
            now = self._clock()
            if now - start > MAX_PROCESS_TIME_MS:
                break
            if i in scan.removed:
                i += 1
                continue
            rec, after = self._half_at(queue_id, i)
            if rec is None:
                i = after
                continue
            if check_times(rec) >= s.transaction_check_max:
                if not self._discard(rec):
                    break
                i = after
                continue
            if now - rec.born_timestamp > reserved_ms:  # needSkip
                i = after
                continue
            if rec.store_timestamp >= start:
                break
            age = now - rec.born_timestamp
            immunity, explicit = immunity_ms(rec, s.transaction_timeout_ms)
            if explicit and age < immunity:
                if self._immune(rec, scan.removed):
                    i = after
                    continue
            elif not explicit and 0 <= age < immunity:
                break
            if not (age > immunity or age <= -1):
                break
            times = {PROPERTY_CHECK_TIMES: str(check_times(rec) + 1)}
            copy = renewed_half(rec, self.format, **times)
            result = self._put(copy)
            if not result.status.stored:
                break
            if self._send_check(copy, result, rec):
                sent += 1
            i = after
        if i != half_offset:
            self.offsets.commit(CHECK_GROUP, HALF_TOPIC, queue_id, i)
        op_done = scan.op_end
        for op_offset, named in scan.ops:
            if any(o >= i for o in named):
                op_done = op_offset
                break
        if scan.ops and op_done != self._offset(OP_TOPIC, queue_id):
            self.offsets.commit(CHECK_GROUP, OP_TOPIC, queue_id, op_done)
        self.checks_sent += sent
        return sent

    def _immune(self, rec: fmt.MessageRecord, removed: set[int]) -> bool:
        """``checkPrepareQueueOffset``: whether ``rec`` is done for this round."""
        prepared = rec.properties.get(PROPERTY_PREPARED_QUEUE_OFFSET)
        if prepared is None:
            extra = {PROPERTY_PREPARED_QUEUE_OFFSET: str(rec.queue_offset)}
            return self._put(renewed_half(rec, self.format, **extra)).status.stored
        if not prepared.isdigit():
            return False
        if int(prepared) in removed:
            return True
        return self._put(renewed_half(rec, self.format)).status.stored

    def _discard(self, rec: fmt.MessageRecord) -> bool:
        self.topics.create_system(CHECK_MAX_TOPIC, 1)
        stored = self._put(discarded(rec, self.format)).status.stored
        if stored:
            self.discarded += 1
            log.info("transactions: half offset %d checked %d times, moved to %s",
                     rec.queue_offset, check_times(rec), CHECK_MAX_TOPIC)  # fmt: skip
        return stored

    def _send_check(self, copy: Message, result: PutResult, original: fmt.MessageRecord) -> bool:
        group = original.properties.get("PGROUP", "")
        target = real_queue(original)
        channels = [c.channel for c in self.producers.producers(group)]
        live = [c for c in channels if isinstance(c, OnewayChannel)]
        if target is None or not live:
            return False
        uniq = original.uniq_key or ""
        record = fmt.make_record(
            topic=target[0],
            body=copy.body,
            properties_string=copy.stored_properties or "",
            queue_id=target[1],
            flag=copy.flag,
            queue_offset=result.queue_offset,
            physical_offset=result.physical_offset,
            sys_flag=copy.sys_flag,
            born_timestamp=original.born_timestamp,
            born_host=original.born_host,
            store_timestamp=result.store_timestamp,
            store_host=self.store.cfg.store_host,
            reconsume_times=original.reconsume_times,
        )
        ext = {
            "tranStateTableOffset": str(result.queue_offset),
            "commitLogOffset": str(result.physical_offset),
            "msgId": uniq,
            "transactionId": uniq,
            "offsetMsgId": result.msg_id,
            "brokerName": self.broker_name,
        }
        live[0].send_oneway(RequestCode.CHECK_TRANSACTION_STATE, ext, fmt.encode(record))
        return True


class TransactionCheckService(ServiceThread):
    """Runs :meth:`TransactionService.check` every check interval (Rule 3)."""

    name = "transaction-check"

    def __init__(self, service: TransactionService) -> None:
        super().__init__(service.settings.transaction_check_interval_ms / 1000.0)
        self.service = service
        self.failures = FailureCounter(log, self.name)

    def run_once(self) -> None:
        try:
            self.service.check()
        except Exception as e:  # the next round reads again from the group's offsets
            self.failures.record("checking half messages", e)
