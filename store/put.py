"""The store's writer: ``put_message`` and ``put_messages``, and :class:`PutResult`.

:class:`PutWriter` is what :class:`~mqstore.message_store.MessageStore` delegates
its puts to. It frames messages with its :class:`~mqstore.put_frame.MessageFramer`,
appends them to the CommitLog, waits for the flusher (and, on a SYNC_MASTER, a
slave), and builds the results. Two paths, writing the same bytes
(``tests/test_put_fast_path.py``):

* the fast path, for the common message (``mqstore.put_frame``): framed once and
  packed in place into the mapping by ``CommitLog.append_v1`` / ``append_v1_batch``;
* the general path for everything else (validation, property order, delay
  redirect, compression), and whenever the fast path declines (a roll is due, a
  size limit is hit, a field is out of range).

A batch is stored contiguously, in one segment, under one lock, with one flush
wait; it is validated whole first, so either every message is stored or none is
and every result carries the refusal.

Puts are thread-safe (the CommitLog's put lock orders them). Whether puts are
accepted at all is the lifecycle's :class:`~mqstore._lifecycle.StoreState`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from itertools import repeat
from operator import itemgetter
from typing import NamedTuple

from mqstore._lifecycle import StoreState
from mqstore.commitlog import format as fmt
from mqstore.commitlog.commitlog import V1_TOTAL, CommitLog, EncodedMessage, RollFailed
from mqstore.commitlog.flush import AsyncFlusher, GroupCommitter
from mqstore.ha.service import ReplicaWait
from mqstore.message import Message, hex4_table
from mqstore.put_frame import MAX_RECORD_SLACK, MessageFramer, Refusal
from mqstore.schedule import DelayLevels, redirect
from mqstore.status import PutStatus
from mqstore.timer.transform import TimerRules, TimerVerdict

_PUT_OK = PutStatus.PUT_OK


class PutResult(NamedTuple):
    """Outcome of one put. ``status.stored`` tells whether the bytes are in the log.

    Immutable; a NamedTuple rather than a frozen dataclass because it is built on
    every put and constructs several times faster.
    """

    status: PutStatus
    physical_offset: int = -1
    queue_offset: int = -1
    msg_id: str = ""
    size: int = 0
    store_timestamp: int = 0
    uniq_key: str = ""
    error: str | None = None


# tuple.__new__ straight away: skips the generated __new__ of a NamedTuple.
_tuple_new = tuple.__new__
_TOTAL = itemgetter(V1_TOTAL)


def _refused(r: Refusal) -> PutResult:
    return PutResult(r.status, error=r.error)


@dataclass(eq=False)
class PutWriter:
    """put_message and put_messages over one open store's CommitLog and flusher."""

    framer: MessageFramer
    """Frames messages (and owns the caches and the UNIQ_KEY generator)."""
    commitlog: CommitLog
    """Where records go."""
    flusher: GroupCommitter | AsyncFlusher
    """What PUT_OK waits for (see ``mqstore.commitlog.flush``)."""
    state: StoreState
    """The lifecycle's open/refusal state (read only)."""
    _: KW_ONLY
    delay_levels: DelayLevels
    """The schedule's levels (a delayed message is redirected)."""
    replica_wait: ReplicaWait | None
    """A SYNC_MASTER's wait for a slave's ack; None otherwise (and then only the fast
    path is taken for common messages)."""
    timer: TimerRules | None = None
    """Timer messages (``mqstore.timer.transform``): None leaves them as they are."""

    def __post_init__(self) -> None:
        self._fast = self.replica_wait is None  # a replica must ack (SYNC_MASTER): general path
        self._waits = self.flusher.waits  # ASYNC_FLUSH acks at once: no wait_for call
        self._host_hex = self.commitlog.store_host_hex
        # Offset message ids (store host, offset as 16 hex digits): the offset's high
        # 48 bits formatted once per 64 KiB of log, the low 16 bits from a table.
        self._hex4 = hex4_table()
        self._id_high: tuple[int, str] = (-1, "")
        """(offset >> 16, the id's digits up to it) of the latest id."""
        self._segment_size = self.commitlog.file_size

    def _unavailable(self) -> PutResult | None:
        reason = self.state.refusal()
        return None if reason is None else PutResult(PutStatus.SERVICE_NOT_AVAILABLE, error=reason)

    # ------------------------------------------------------------------ one

    def put_message(self, msg: Message) -> PutResult:
        """Store one message; under SYNC_FLUSH wait for its group commit.

        Returns a status for expected failures (MESSAGE_ILLEGAL,
        PROPERTIES_SIZE_EXCEEDED, CREATE_MAPPED_FILE_FAILED, FLUSH_DISK_TIMEOUT,
        SERVICE_NOT_AVAILABLE when poisoned or a slave).

        Raises:
            IllegalTopicError: the topic name is not allowed.
            IllegalMessageError: empty/non-bytes body, negative queue id, bad property.
            StoreClosedError: after close().
        """
        if self._fast and not self.state.refusing:
            framed = self.framer.common(msg)
            if framed is not None:
                record, uniq = framed
                at = self.commitlog.append_v1(record)
                if at is not None:  # else the segment is full: the general path rolls
                    phys, qoff, ts = at
                    total = record[V1_TOTAL]
                    status = self.flusher.wait_for(phys + total) if self._waits else _PUT_OK
                    high, head = self._id_high
                    if phys >> 16 != high:
                        head = self._id_head(phys)
                    msg_id = head + self._hex4[phys & 0xFFFF]
                    return _tuple_new(
                        PutResult, (status, phys, qoff, msg_id, total, ts, uniq, None)
                    )
        return self.put_general(msg)

    def _id_head(self, phys: int) -> str:
        """The digits of ``phys``'s offset message id up to its low 16 bits (kept)."""
        high = phys >> 16
        head = f"{self._host_hex}{high:012X}"
        self._id_high = (high, head)
        return head

    def _msg_ids(self, physs: list[int]) -> list[str]:
        """The offset message ids of a batch's (increasing) physical offsets."""
        hex4 = self._hex4
        high, head = self._id_high
        if physs[0] >> 16 == high == physs[-1] >> 16:  # the usual: all in the same 64 KiB
            return [head + hex4[phys & 0xFFFF] for phys in physs]
        ids: list[str] = []
        for phys in physs:
            if phys >> 16 != high:
                high = phys >> 16
                head = self._id_head(phys)
            ids.append(head + hex4[phys & 0xFFFF])
        return ids

    def put_general(self, msg: Message) -> PutResult:
        """put_message of any message by the general path (validation, properties,
        delay, compression)."""
        if self.state.refusing:
            bad = self._unavailable()
            if bad is not None:
                return bad
        if msg.properties and self.timer is not None:  # rmq_sys_wheel_timer (store.timer)
            timed = self.timer.apply(msg)
            if isinstance(timed, TimerVerdict):
                return PutResult(PutStatus(timed.value), error=self.timer.remark(timed))
            msg = timed
        if msg.delay_level > 0:  # stored in SCHEDULE_TOPIC_XXXX until due (store.schedule)
            msg = redirect(msg, self.delay_levels)
        prepared = self.framer.prepare(msg)
        if isinstance(prepared, Refusal):
            return _refused(prepared)
        enc, uniq = prepared
        try:
            phys, size, qoff = self.commitlog.append(enc)
        except RollFailed as e:
            return PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, error=str(e))
        status = self.flusher.wait_for(phys + size) if msg.wait_store_msg_ok else _PUT_OK
        if self.replica_wait is not None and status is _PUT_OK and msg.wait_store_msg_ok:
            status = self.replica_wait(phys + size)  # SYNC_MASTER: flush, then a slave
        return _tuple_new(
            PutResult,
            (
                status,
                phys,
                qoff,
                f"{self._host_hex}{phys:016X}",
                size,
                self.commitlog.last_store_timestamp,
                uniq,
                None,
            ),
        )

    # ---------------------------------------------------------------- batch

    def put_messages(self, msgs: Sequence[Message]) -> list[PutResult]:
        """Store a batch contiguously (never split across segments): one lock, one flush wait.

        Every message is validated first; if any is refused, nothing is stored and
        every result carries that status.

        Raises:
            IllegalTopicError, IllegalMessageError, StoreClosedError: as put_message.
        """
        if not msgs:
            return []
        if self._fast and not self.state.refusing:
            done = self._put_common_batch(msgs)
            if done is not None:
                return done
        return self.put_general_batch(msgs)

    def _put_common_batch(self, msgs: Sequence[Message]) -> list[PutResult] | None:
        """put_messages of common messages framed in one pass and packed in place under
        one lock; None: take the general path (any other message in the batch, a
        number out of its field, or a roll is due)."""
        framed = self.framer.common_batch(msgs)
        if framed is None:
            return None
        records, uniqs = framed
        at = self.commitlog.append_v1_batch(records)
        if at is None:
            return None
        physs, qoffs, ts = at
        status = (
            self.flusher.wait_for(physs[-1] + records[-1][V1_TOTAL]) if self._waits else _PUT_OK
        )
        # The results built by C loops (map/zip), no Python frame per message.
        ids = self._msg_ids(physs)
        fields = zip(repeat(status), physs, qoffs, ids, map(_TOTAL, records), repeat(ts), uniqs,
                     repeat(None))  # fmt: skip
        return list(map(_tuple_new, repeat(PutResult), fields))

    def put_general_batch(self, msgs: Sequence[Message]) -> list[PutResult]:
        """put_messages of any batch by the general path."""
        bad = self._unavailable()
        if bad is not None:
            return [bad] * len(msgs)
        encs: list[EncodedMessage] = []
        uniqs: list[str] = []
        levels = self.delay_levels
        prepare = self.framer.prepare
        for m in msgs:
            prepared = prepare(redirect(m, levels) if m.delay_level > 0 else m)
            if isinstance(prepared, Refusal):
                return [_refused(prepared)] * len(msgs)
            encs.append(prepared[0])
            uniqs.append(prepared[1])
        total = sum(e.total for e in encs)
        if total + fmt.END_FILE_MIN_BLANK_LENGTH > self._segment_size:
            return [
                PutResult(
                    PutStatus.MESSAGE_ILLEGAL,
                    error=f"batch of {total} bytes cannot fit one segment",
                )
            ] * len(msgs)
        try:
            ar = self.commitlog.append_batch(encs)
        except RollFailed as e:
            return [PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, error=str(e))] * len(msgs)
        wait = any(m.wait_store_msg_ok for m in msgs)
        status = self.flusher.wait_for(ar.next_offset) if wait else PutStatus.PUT_OK
        if self.replica_wait is not None and status is PutStatus.PUT_OK and wait:
            status = self.replica_wait(ar.next_offset)
        host = self._host_hex
        ts = ar.store_timestamp
        return [
            _tuple_new(PutResult, (status, p, q, f"{host}{p:016X}", e.total, ts, u, None))
            for p, q, u, e in zip(ar.physical_offsets, ar.queue_offsets, uniqs, encs, strict=True)
        ]


__all__ = ["MAX_RECORD_SLACK", "PutResult", "PutWriter"]
