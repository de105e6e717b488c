"""The batch half of the write API: ``put_messages``, and :class:`PutResult`.

A mixin, as ``mqstore.put`` is for single puts: :class:`~mqstore.put.PutAPI` inherits
:class:`BatchPutMixin` and provides what it uses (the CommitLog, the flusher, the
caches, and the single-put steps ``_prepare`` / ``_unavailable``). Contract: a batch
is stored contiguously, in one segment, under one lock, with one flush wait; it is
validated whole first, so either every message is stored or none is and every result
carries the refusal. Two paths, writing the same bytes (``tests/test_put_fast_path.py``):

* the fast path, when every message is common (see ``PutAPI._frame_common``): framed
  in one loop (:meth:`BatchPutMixin._frame_common_batch`) and packed in place by
  ``CommitLog.append_v1_batch``;
* the general path for any other batch, or when the fast path declines (a roll is
  due, a field is out of range): each message through ``PutAPI._prepare``, then
  ``CommitLog.append_batch``.

:class:`PutResult` is defined here rather than in ``mqstore.put`` because both modules
build it and ``mqstore.put`` imports this one (the reverse would be circular);
``mqstore.put`` re-exports it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import itemgetter
from typing import NamedTuple

from mqstore.commitlog import format as fmt
from mqstore.commitlog.commitlog import CommitLog, EncodedMessage, RollFailed, V1Record
from mqstore.commitlog.flush import AsyncFlusher, GroupCommitter
from mqstore.config import StoreConfig
from mqstore.ha import service as ha_service
from mqstore.logics import Logics
from mqstore.message import Message, new_uniq_key, new_uniq_keys, standard_properties_string
from mqstore.schedule import redirect
from mqstore.status import PutStatus


class PutResult(NamedTuple):
    """Outcome of one put. ``status.stored`` tells whether the bytes are in the log.

    Immutable; a NamedTuple rather than a frozen dataclass because it is built on
    every put and a NamedTuple is several times cheaper to construct.
    """

    status: PutStatus
    physical_offset: int = -1
    queue_offset: int = -1
    msg_id: str = ""
    size: int = 0
    store_timestamp: int = 0
    uniq_key: str = ""
    error: str | None = None


# tuple.__new__ straight away: skips the generated __new__ (a Python frame per put).
_tuple_new = tuple.__new__
_TOTAL = itemgetter(9)  # a V1Record's TOTALSIZE

_Framed = tuple[list[V1Record], list[str]]
"""(records for ``CommitLog.append_v1_batch``, their UNIQ_KEYs)."""
_TopicFramer = tuple[Callable[[int, bytes], tuple[bytes, int]], str]
"""(``RecordEncoder.v1_framer`` of a topic, queue key prefix ``"<topic>-"``)."""


class BatchPutMixin:
    """put_messages (mixed into PutAPI, hence MessageStore)."""

    cfg: StoreConfig
    commitlog: CommitLog
    flusher: GroupCommitter | AsyncFlusher
    logics: Logics
    _refuse_puts: bool
    _fast_puts: bool
    _fast_body_limit: int
    _max_record: int
    _host_hex: str
    _born_cache: dict[tuple[str, int], bytes]
    _topic_bytes: dict[str, bytes]
    _next_uniq: Callable[[], str]
    _replica_wait: ha_service.ReplicaWait | None
    # The single-put steps, provided by PutAPI.
    _prepare: Callable[[Message], tuple[EncodedMessage, str] | PutResult]
    _unavailable: Callable[[], PutResult | None]

    def put_messages(self, msgs: Sequence[Message]) -> list[PutResult]:
        """Store a batch contiguously (never split across segments): one lock, one flush wait.

        Every message is validated first; if any is refused, nothing is stored and
        every result carries that status.

        Raises:
            IllegalTopicError, IllegalMessageError, StoreClosedError: as put_message.
        """
        if not msgs:
            return []
        if not self._refuse_puts and self._fast_puts:
            done = self._put_common_batch(msgs)
            if done is not None:
                return done
        return self._put_general_batch(msgs)

    def _frame_common_batch(self, msgs: Sequence[Message]) -> _Framed | None:
        """:meth:`_frame_common` of every message of a batch (None if any is not common).

        The same conditions and bytes, in one loop: the per-store lookups are
        hoisted, each topic is framed by a ``RecordEncoder.v1_framer`` made once per
        batch, and the UNIQ_KEYs come from one call (``python -m
        mqstore.tools.bench.putpath`` measures it).
        """
        next_uniq = self._next_uniq
        # The default generator makes the batch's ids in one call; a replaced one
        # (tests make ids deterministic) is asked once per message.
        uniqs = new_uniq_keys(len(msgs)) if next_uniq is new_uniq_key else None
        return self._frame_each(msgs, uniqs)

    def _frame_each(self, msgs: Sequence[Message], uniqs: list[str] | None) -> _Framed | None:
        """The loop of :meth:`_frame_common_batch` (``uniqs`` None: ask ``_next_uniq``)."""
        born_of = self._born_cache
        body_limit = self._fast_body_limit
        max_record = self._max_record
        next_uniq = self._next_uniq
        crc32, max_props, ipv4 = zlib.crc32, fmt.MAX_PROPERTIES_LENGTH, fmt.IPV4_HOST_LEN
        framers: dict[str, _TopicFramer] = {}
        records: list[V1Record] = []
        made: list[str] = []
        for i, msg in enumerate(msgs):
            topic = msg.topic
            body = msg.body
            n = len(body) if type(body) is bytes else 0
            qid = msg.queue_id
            born = born_of.get(msg.born_host)
            if (
                born is None
                or len(born) != ipv4
                or not 0 < n < body_limit
                or qid < 0
                or msg.sys_flag
                or msg.properties
                or msg.delay_level > 0
                or not msg.wait_store_msg_ok
            ):
                return None
            framer = framers.get(topic)
            if framer is None:
                framer = self._topic_framer(framers, topic)  # once per topic and batch
                if framer is None:
                    return None
            keys = msg.keys
            if keys is not None and type(keys) is not str:
                keys = keys[0] if len(keys) == 1 and keys[0] else " ".join(k for k in keys if k)
            uniq = next_uniq() if uniqs is None else uniqs[i]
            props = standard_properties_string(uniq, msg.tags, keys).encode()
            if len(props) > max_props:
                return None
            tail, total = framer[0](n, props)
            if total > max_record:
                return None
            records.append(
                (framer[1] + str(qid), qid, msg.flag, msg.born_timestamp, born,
                 msg.reconsume_times, body, crc32(body) & 0x7FFFFFFF, tail, total)
            )  # fmt: skip
            if uniqs is None:
                made.append(uniq)
        return records, made if uniqs is None else uniqs

    def _topic_framer(self, framers: dict[str, _TopicFramer], topic: str) -> _TopicFramer | None:
        """The framer of ``topic``, made and kept in ``framers`` (one batch's cache);
        None when the topic is unknown or its records cannot be framed as v1."""
        topic_bytes = self._topic_bytes.get(topic)
        frame = None if topic_bytes is None else self.commitlog.encoder.v1_framer(topic_bytes)
        if frame is None:
            return None
        framer = framers[topic] = (frame, topic + "-")
        return framer

    def _put_common_batch(self, msgs: Sequence[Message]) -> list[PutResult] | None:
        """put_messages of common messages (see :meth:`_frame_common`) framed in one pass
        and packed in place under one lock (~half the cost per message); None: take
        the general path (any other message in the batch, or a roll is due)."""
        framed = self._frame_common_batch(msgs)
        if framed is None:
            return None
        records, uniqs = framed
        try:
            at = self.commitlog.append_v1_batch(records)
        except struct.error:  # a field out of its range: the general path says which
            return None
        if at is None:
            return None
        physs, qoffs, ts = at
        status = self.flusher.wait_for(physs[-1] + records[-1][9])
        # The results built by C loops (map/zip), no Python frame per message: the
        # msg ids by the host prefix's "%016X" format, the field tuples by zip
        # (cheaper per message than a comprehension; same values).
        ids = map((self._host_hex + "%016X").__mod__, physs)
        fields = zip(repeat(status), physs, qoffs, ids, map(_TOTAL, records), repeat(ts), uniqs,
                     repeat(None))  # fmt: skip
        return list(map(_tuple_new, repeat(PutResult), fields))

    def _put_general_batch(self, msgs: Sequence[Message]) -> list[PutResult]:
        """put_messages of any batch (validation, properties, delay, compression)."""
        bad = self._unavailable()
        if bad is not None:
            return [bad] * len(msgs)
        encs: list[EncodedMessage] = []
        uniqs: list[str] = []
        levels = self.logics.delay_levels
        for m in msgs:
            prepared = self._prepare(redirect(m, levels) if m.delay_level > 0 else m)
            if isinstance(prepared, PutResult):
                return [prepared] * len(msgs)
            encs.append(prepared[0])
            uniqs.append(prepared[1])
        total = sum(e.total for e in encs)
        if total + fmt.END_FILE_MIN_BLANK_LENGTH > self.cfg.commitlog_file_size:
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
        if self._replica_wait is not None and status is PutStatus.PUT_OK and wait:
            status = self._replica_wait(ar.next_offset)
        host = self.commitlog.store_host_hex
        ts = ar.store_timestamp
        return [
            _tuple_new(PutResult, (status, p, q, f"{host}{p:016X}", e.total, ts, u, None))
            for p, q, u, e in zip(ar.physical_offsets, ar.queue_offsets, uniqs, encs, strict=True)
        ]


__all__ = ["BatchPutMixin", "PutResult"]
