"""The store's writer: ``put_message`` and ``put_messages``, and :class:`PutResult`.

:class:`PutWriter` is what :class:`~mqstore.message_store.MessageStore` delegates
its puts to. One way through for every message: the framer
(:meth:`~mqstore.put_frame.MessageFramer.frame`) makes its
:class:`~mqstore.commitlog.commitlog.Frame` or refuses it, ``CommitLog.append``
writes the frames (a single put is a batch of one), then the writer waits for the
flusher (and, on a SYNC_MASTER, a slave) and builds the results.

A batch is stored contiguously, in one segment, under one lock, with one flush
wait; it is framed whole first, so either every message is stored or none is and
every result carries the refusal.

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
from mqstore.commitlog.commitlog import FRAME_TOTAL, FRAME_UNIQ, CommitLog, RollFailed
from mqstore.commitlog.flush import AsyncFlusher, GroupCommitter
from mqstore.ha.service import ReplicaWait
from mqstore.message import Message, hex4_table
from mqstore.put_frame import MAX_RECORD_SLACK, MessageFramer, Refusal
from mqstore.status import PutStatus
from mqstore.timer.transform import TIMER_REQUESTS, TimerRules, TimerVerdict

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
_TOTAL = itemgetter(FRAME_TOTAL)
_UNIQ = itemgetter(FRAME_UNIQ)


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
    replica_wait: ReplicaWait | None
    """A SYNC_MASTER's wait for a slave's ack; None otherwise."""
    timer: TimerRules | None = None
    """Timer messages (``mqstore.timer.transform``): None leaves them as they are."""

    def __post_init__(self) -> None:
        # ASYNC_FLUSH without a replica acks at once: no wait_for call
        self._waits = self.flusher.waits or self.replica_wait is not None
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

    def _acked(self, end: int, wait: bool) -> PutStatus:
        """The status of records written up to log offset ``end``: PUT_OK at once when
        the put does not wait (``wait`` false), else what the flusher (PUT_OK at once
        under ASYNC_FLUSH) and then a SYNC_MASTER's slave say."""
        status = self.flusher.wait_for(end) if wait else _PUT_OK
        if self.replica_wait is not None and status is _PUT_OK and wait:
            status = self.replica_wait(end)  # SYNC_MASTER: flush, then a slave
        return status

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
        if self.state.refusing:
            bad = self._unavailable()
            if bad is not None:
                return bad
        props = msg.properties  # a timer message goes to rmq_sys_wheel_timer (store.timer)
        if props and self.timer is not None and not TIMER_REQUESTS.isdisjoint(props):
            timed = self.timer.apply(msg)
            if isinstance(timed, TimerVerdict):
                return PutResult(PutStatus(timed.value), error=self.timer.remark(timed))
            msg = timed
        frames = self.framer.frame_batch((msg,))
        if isinstance(frames, Refusal):
            return _refused(frames)
        try:
            physs, qoffs, ts = self.commitlog.append(frames)
        except RollFailed as e:
            return PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, error=str(e))
        phys = physs[0]
        frame = frames[0]
        total = frame[12]  # FRAME_TOTAL and (below) FRAME_UNIQ: literals, no global lookups
        status = self._acked(phys + total, msg.wait_store_msg_ok) if self._waits else _PUT_OK
        high, head = self._id_high
        if phys >> 16 != high:
            head = self._id_head(phys)
        msg_id = head + self._hex4[phys & 0xFFFF]
        return _tuple_new(PutResult, (status, phys, qoffs[0], msg_id, total, ts, frame[13], None))

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

    # ---------------------------------------------------------------- batch

    def put_messages(self, msgs: Sequence[Message]) -> list[PutResult]:
        """Store a batch contiguously (never split across segments): one lock, one flush wait.

        Every message is framed first; if any is refused, nothing is stored and
        every result carries that status.

        Raises:
            IllegalTopicError, IllegalMessageError, StoreClosedError: as put_message.
        """
        if not msgs:
            return []
        n = len(msgs)
        if self.state.refusing:
            bad = self._unavailable()
            if bad is not None:
                return [bad] * n
        frames = self.framer.frame_batch(msgs)
        if isinstance(frames, Refusal):
            return [_refused(frames)] * n
        totals = list(map(_TOTAL, frames))
        need = sum(totals)
        if need + fmt.END_FILE_MIN_BLANK_LENGTH > self._segment_size:
            error = f"batch of {need} bytes cannot fit one segment"
            return [PutResult(PutStatus.MESSAGE_ILLEGAL, error=error)] * n
        try:
            physs, qoffs, ts = self.commitlog.append(frames)
        except RollFailed as e:
            return [PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, error=str(e))] * n
        status = (
            self._acked(physs[-1] + totals[-1], any(m.wait_store_msg_ok for m in msgs))
            if self._waits
            else _PUT_OK
        )
        # The results built by C loops (map/zip), no Python frame per message.
        fields = zip(repeat(status), physs, qoffs, self._msg_ids(physs), totals, repeat(ts),
                     map(_UNIQ, frames), repeat(None))  # fmt: skip
        return list(map(_tuple_new, repeat(PutResult), fields))


__all__ = ["MAX_RECORD_SLACK", "PutResult", "PutWriter"]
