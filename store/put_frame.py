"""Framing messages into CommitLog records, outside the put lock.

:class:`MessageFramer` turns a :class:`~mqstore.message.Message` into what the
CommitLog appends, two ways:

* :meth:`~MessageFramer.prepare`, the general path: every message (validation,
  Java HashMap property order, compression), giving an
  :class:`~mqstore.commitlog.commitlog.EncodedMessage` or a :class:`Refusal`;
* :meth:`~MessageFramer.common` and :meth:`~MessageFramer.common_batch`, the fast
  path: the common message only (a topic and born host the general path has seen,
  IPv4 born host, body under the compression threshold, no user properties, no
  delay, SYSFLAG 0, waits for the store), giving a
  :data:`~mqstore.commitlog.commitlog.V1Record` that ``CommitLog.append_v1`` packs
  in place; None for any other message.

Both write the same bytes (``tests/test_put_fast_path.py``). The framer owns the
caches the paths share (topic bytes, born host bytes, each topic's fast-path frame
and queue keys) and the UNIQ_KEY generator (:attr:`~MessageFramer.next_uniq`,
replaceable by tests for deterministic ids).
Safe from any thread: the caches only ever gain equal values.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mqstore.commitlog import format as fmt
from mqstore.commitlog.commitlog import EncodedMessage, V1Record
from mqstore.compression import COMPRESSED_FLAG, compress, parse_type
from mqstore.config import StoreConfig
from mqstore.errors import IllegalMessageError
from mqstore.message import (
    Message,
    host_bytes,
    new_uniq_key,
    new_uniq_keys,
    standard_properties_string,
    uniq_key_of,
    validate_topic,
)
from mqstore.property_format import PropertyFormat
from mqstore.status import PutStatus

MAX_RECORD_SLACK = 64 * 1024
"""How far a record may exceed ``max_message_size`` (its header, topic, properties)."""

_INT32 = range(-(1 << 31), 1 << 31)
_INT64 = range(-(1 << 63), 1 << 63)
# A common record's numbers are checked against their fields (Java ints, a long)
# before any byte is written: the record is packed in place, and a pack that failed
# halfway would leave part of a header past the write position. Only ints fit: a float
# within range would pass a comparison and fail the pack.


def _fits_fields(flag: int, reconsume: int, qid: int, born_ts: int | None) -> bool:
    """Whether a fast-path record's numbers fit their fields: ints (the annotations are
    what a Message promises, not what it holds) within a Java int or long. The fast
    paths test the usual message, all zero and no born timestamp, inline first."""
    return (
        flag.__class__ is int is reconsume.__class__ is qid.__class__
        and -0x80000000 <= flag < 0x80000000
        and -0x80000000 <= reconsume < 0x80000000
        and qid < 0x80000000
        and (
            born_ts is None
            or (born_ts.__class__ is int and -0x8000000000000000 <= born_ts < 0x8000000000000000)
        )
    )


# tuple.__new__ straight away: skips the generated __new__ of a NamedTuple.
_tuple_new = tuple.__new__
_IPV4_HOST_LEN = fmt.IPV4_HOST_LEN
_MAX_PROPERTIES = fmt.MAX_PROPERTIES_LENGTH

Framed = tuple[list[V1Record], list[str]]
"""(records for ``CommitLog.append_v1_batch``, their UNIQ_KEYs)."""


class _TopicFrame:
    """What the fast paths need of one topic: its ``RecordEncoder.v1_framer`` (the
    tail and TOTALSIZE of a record, from the layout) and its queue keys
    (``"<topic>-<queueId>"``, as :func:`~mqstore.commitlog.commitlog.queue_key`
    builds them), each made once. Shared by threads: ``keys`` only gains equal values.
    """

    __slots__ = ("frame", "keys", "prefix")

    def __init__(self, topic: str, frame: Callable[[int, bytes], tuple[bytes, int]]) -> None:
        self.frame = frame
        self.prefix = topic + "-"
        self.keys: dict[int, str] = {}
        """Queue id -> queue key, filled by :meth:`key`."""

    def key(self, queue_id: int) -> str:
        """The queue key of ``queue_id`` (an int: the caller checked), kept for next time."""
        k = self.keys[queue_id] = self.prefix + str(queue_id)
        return k


@dataclass(frozen=True, slots=True)
class Refusal:
    """A message the store refuses with a status (not an exception)."""

    status: PutStatus
    error: str


def _check_int_fields(msg: Message) -> None:
    """The record's fixed-width fields must hold the message's numbers.

    Raises:
        IllegalMessageError: a number outside its field (a Java int or long).
    """
    for name, value, width in (
        ("queue_id", msg.queue_id, _INT32),
        ("flag", msg.flag, _INT32),
        ("reconsume_times", msg.reconsume_times, _INT32),
        ("sys_flag", msg.sys_flag, _INT32),
        ("born_timestamp", msg.born_timestamp or 0, _INT64),
        ("prepared_transaction_offset", msg.prepared_transaction_offset, _INT64),
    ):
        if not isinstance(value, int) or value not in width:
            raise IllegalMessageError(f"{name} {value!r} does not fit its record field")


def _body_bytes(body: object) -> bytes:
    """The bytes of a body given as a bytearray or memoryview.

    Raises:
        IllegalMessageError: a body of any other type.
    """
    if not isinstance(body, bytearray | memoryview):
        raise IllegalMessageError(f"body must be bytes, got {type(body).__name__}")
    return bytes(body)


class MessageFramer:
    """Messages to records for one store (its config and its CommitLog's encoder)."""

    def __init__(self, cfg: StoreConfig, encoder: fmt.RecordEncoder) -> None:
        self._cfg = cfg
        self._encoder = encoder
        self._frame = encoder.frame
        self._compress_type = parse_type(cfg.compress_type)
        self._born_cache: dict[tuple[str, int], bytes] = {}
        self._topic_bytes: dict[str, bytes] = {}
        self._fast_topics: dict[str, _TopicFrame] = {}
        """The fast paths' topics."""
        self.next_uniq: Callable[[], str] = new_uniq_key
        """The UNIQ_KEY generator of the common properties (tests make ids deterministic)."""
        self.max_record = min(
            cfg.max_message_size + MAX_RECORD_SLACK,
            cfg.commitlog_file_size - fmt.END_FILE_MIN_BLANK_LENGTH,
        )
        """The largest record the store writes."""
        # Bodies the fast path takes: under the compression threshold and the size limit.
        self._fast_body_limit = min(cfg.compress_msg_body_over, cfg.max_message_size + 1)
        self._format = PropertyFormat.parse(cfg.property_format)
        if self._format is not PropertyFormat.V5:  # the fast paths write 5.x's string:
            self._fast_body_limit = 0  # they take no body, every put is general

    # ------------------------------------------------------------ general path

    def properties(self, msg: Message) -> tuple[bytes, str]:
        """Properties bytes as the store's broker version writes them
        (:class:`~mqstore.property_format.PropertyFormat`; 5.x: Java HashMap(128)
        order), and the message's UNIQ_KEY.

        Raises:
            IllegalMessageError: an empty property name, or one with \\x01/\\x02.
        """
        raw = msg.stored_properties
        if raw is not None:  # verbatim (mqstore.broker.as_stored)
            return raw.encode("utf-8"), uniq_key_of(raw) or ""
        if (
            self._format is PropertyFormat.V5
            and not msg.properties
            and msg.delay_level <= 0
            and msg.wait_store_msg_ok
        ):  # the common properties: the fast paths' string and UNIQ_KEY generator
            uniq = self.next_uniq()
            return standard_properties_string(uniq, msg.tags, msg.keys).encode("utf-8"), uniq
        return self._format.properties_of(msg)

    def prepare(self, msg: Message) -> tuple[EncodedMessage, str] | Refusal:
        """The general path's (record, UNIQ_KEY) of ``msg``, or the refusal.

        Raises:
            IllegalTopicError: the topic name is not allowed.
            IllegalMessageError: empty/non-bytes body, negative queue id, a number
                outside its field, bad property.
        """
        cfg = self._cfg
        topic = msg.topic
        topic_bytes = self._topic_bytes.get(topic)
        if topic_bytes is None:  # first sight of this topic: validate it once
            validate_topic(topic)
            topic_bytes = self._topic_bytes[topic] = topic.encode("utf-8")
        body = msg.body
        if type(body) is not bytes:
            body = _body_bytes(body)
        n = len(body)
        if n == 0:
            raise IllegalMessageError("body must not be empty")
        if msg.queue_id < 0:
            raise IllegalMessageError(f"queue_id must be >= 0, got {msg.queue_id}")
        _check_int_fields(msg)
        if n > cfg.max_message_size:
            return Refusal(
                PutStatus.MESSAGE_ILLEGAL,
                f"body of {n} bytes exceeds max_message_size {cfg.max_message_size}",
            )
        sys_flag = msg.sys_flag & ~(fmt.BORNHOST_V6_FLAG | fmt.STOREHOST_V6_FLAG)
        if n >= cfg.compress_msg_body_over and not sys_flag & COMPRESSED_FLAG:
            body = compress(body, self._compress_type, cfg.compress_level)
            sys_flag |= COMPRESSED_FLAG | self._compress_type.flag
        props_bytes, uniq = self.properties(msg)
        if len(props_bytes) > fmt.MAX_PROPERTIES_LENGTH:
            return Refusal(
                PutStatus.PROPERTIES_SIZE_EXCEEDED,
                f"properties of {len(props_bytes)} bytes exceed {fmt.MAX_PROPERTIES_LENGTH}",
            )
        born = self._born_cache.get(msg.born_host)
        if born is None:
            born = self._born_cache[msg.born_host] = host_bytes(msg.born_host)
        if len(born) == fmt.IPV6_HOST_LEN:
            sys_flag |= fmt.BORNHOST_V6_FLAG
        tail, version, total = self._frame(sys_flag, len(body), topic_bytes, props_bytes)
        if total > self.max_record:
            return Refusal(
                PutStatus.MESSAGE_ILLEGAL,
                f"record of {total} bytes exceeds the limit {self.max_record}",
            )
        born_ts = msg.born_timestamp  # None: the CommitLog stamps the store time
        enc = _tuple_new(EncodedMessage, (
            f"{topic}-{msg.queue_id}", msg.queue_id, msg.flag, sys_flag, born_ts, born,
            msg.reconsume_times, msg.prepared_transaction_offset, body,
            zlib.crc32(body) & 0x7FFFFFFF, tail, version, total,
        ))  # fmt: skip
        return enc, uniq

    # --------------------------------------------------------------- fast path

    def common(self, msg: Message) -> tuple[V1Record, str] | None:
        """(record for ``CommitLog.append_v1``, UNIQ_KEY) of a common message, else None."""
        topic = msg.topic
        tf = self._fast_topics.get(topic)
        born = self._born_cache.get(msg.born_host)
        body = msg.body
        n = len(body) if type(body) is bytes else 0
        qid = msg.queue_id
        if (
            (tf is None and (tf := self._fast_topic(topic)) is None)
            or born is None
            or len(born) != _IPV4_HOST_LEN
            or not 0 < n < self._fast_body_limit
            or qid < 0
            or msg.sys_flag
            or msg.properties
            or msg.delay_level > 0
            or not msg.wait_store_msg_ok
        ):
            return None
        uniq = self.next_uniq()
        props = standard_properties_string(uniq, msg.tags, msg.keys).encode()
        if len(props) > _MAX_PROPERTIES:
            return None
        tail, total = tf.frame(n, props)
        if total > self.max_record:
            return None
        flag, reconsume, born_ts = msg.flag, msg.reconsume_times, msg.born_timestamp
        if not (  # the usual message inline; else the general path says which field is wrong
            flag == 0 == reconsume
            and born_ts is None
            and flag.__class__ is int is reconsume.__class__ is qid.__class__
            and qid < 0x80000000
        ) and not _fits_fields(flag, reconsume, qid, born_ts):
            return None
        record = (tf.keys.get(qid) or tf.key(qid), qid, flag, born_ts, born, reconsume, body,
                  zlib.crc32(body) & 0x7FFFFFFF, tail, total)  # fmt: skip
        return record, uniq

    def _fast_topic(self, topic: str) -> _TopicFrame | None:
        """The fast paths' :class:`_TopicFrame` of ``topic``, made on its first fast put
        after the general path validated it; None while the general path has not seen
        it, or when its records cannot be framed as v1."""
        topic_bytes = self._topic_bytes.get(topic)
        frame = None if topic_bytes is None else self._encoder.v1_framer(topic_bytes)
        if frame is None:
            return None
        tf = self._fast_topics[topic] = _TopicFrame(topic, frame)
        return tf

    def common_batch(self, msgs: Sequence[Message]) -> Framed | None:
        """:meth:`common` of every message of a batch (None if any is not common).

        The same conditions and bytes, in one loop: the per-store lookups are
        hoisted (each topic's :class:`_TopicFrame`, the born host), and the batch's
        UNIQ_KEYs are made first: by one call when the generator is the default, else
        by asking the replaced one (tests make ids deterministic) once per message.
        """
        next_uniq = self.next_uniq
        if next_uniq is new_uniq_key:
            uniqs = new_uniq_keys(len(msgs))
        else:
            uniqs = [next_uniq() for _ in msgs]
        return self._frame_each(msgs, uniqs)

    def _frame_each(self, msgs: Sequence[Message], uniqs: list[str]) -> Framed | None:
        """The loop of :meth:`common_batch`: ``uniqs`` are the messages' UNIQ_KEYs."""
        born_of = self._born_cache
        topics = self._fast_topics
        body_limit = self._fast_body_limit
        max_record = self.max_record
        crc32 = zlib.crc32
        records: list[V1Record] = []
        # A batch is usually one topic from one host: the last lookups are kept.
        last_topic = last_host = None
        tf: _TopicFrame | None = None
        born: bytes | None = None
        for msg, uniq in zip(msgs, uniqs, strict=True):
            topic = msg.topic
            if topic is not last_topic:
                tf = topics.get(topic) or self._fast_topic(topic)
                last_topic = topic
            host = msg.born_host
            if host is not last_host:
                born = born_of.get(host)
                if born is not None and len(born) != _IPV4_HOST_LEN:
                    born = None
                last_host = host
            body = msg.body
            n = len(body) if type(body) is bytes else 0
            qid = msg.queue_id
            if (
                tf is None
                or born is None  # a host the general path has not seen, or IPv6
                or not 0 < n < body_limit
                or qid < 0
                or msg.sys_flag
                or msg.properties
                or msg.delay_level > 0
                or not msg.wait_store_msg_ok
            ):
                return None
            props = standard_properties_string(uniq, msg.tags, msg.keys).encode()
            if len(props) > _MAX_PROPERTIES:
                return None
            tail, total = tf.frame(n, props)
            if total > max_record:
                return None
            flag, reconsume, born_ts = msg.flag, msg.reconsume_times, msg.born_timestamp
            if not (  # the numbers' fields, as in common()
                flag == 0 == reconsume
                and born_ts is None
                and flag.__class__ is int is reconsume.__class__ is qid.__class__
                and qid < 0x80000000
            ) and not _fits_fields(flag, reconsume, qid, born_ts):
                return None
            records.append(
                (tf.keys.get(qid) or tf.key(qid), qid, flag, born_ts, born, reconsume, body,
                 crc32(body) & 0x7FFFFFFF, tail, total)
            )  # fmt: skip
        return records, uniqs


__all__ = ["MAX_RECORD_SLACK", "Framed", "MessageFramer", "Refusal"]
