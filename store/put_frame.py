"""Framing messages into CommitLog records, outside the put lock: the one framer.

:meth:`MessageFramer.frame` turns a :class:`~mqstore.message.Message` into the
:data:`~mqstore.commitlog.commitlog.Frame` that ``CommitLog.append`` writes, or a
:class:`Refusal`; :meth:`MessageFramer.frame_batch` frames a batch (all or none).

One pipeline with its caches inside: each topic's :class:`_TopicFrame` (validated
once; its topic field, MAGICCODE, fixed record size and queue keys) and each born
host's bytes. The common message (a V5 property format, IPv4 born host, body under
the compression threshold, no user properties, no delay, SYSFLAG 0, the default
numbers and no prepared transaction offset, waits for the store) is framed from
those caches alone; any other goes on to the steps it needs (validation,
compression, Java HashMap property order, the delay redirect). Both write the bytes
RocketMQ writes (``tests/store/test_put_frame.py``). The framer owns the UNIQ_KEY generator
(:attr:`~MessageFramer.next_uniq`, replaceable by tests for deterministic ids).
Safe from any thread: the caches only ever gain equal values.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mqstore.commitlog import format as fmt
from mqstore.commitlog.commitlog import Frame
from mqstore.commitlog.dispatch_rule import takes_queue_offset
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
from mqstore.schedule import DelayLevels, redirect
from mqstore.status import PutStatus

MAX_RECORD_SLACK = 64 * 1024
"""How far a record may exceed ``max_message_size`` (its header, topic, properties)."""

_INT32 = range(-(1 << 31), 1 << 31)
_INT64 = range(-(1 << 63), 1 << 63)
_IPV4_HOST_LEN = fmt.IPV4_HOST_LEN
_MAX_PROPERTIES = fmt.MAX_PROPERTIES_LENGTH
_V6_BITS = fmt.BORNHOST_V6_FLAG | fmt.STOREHOST_V6_FLAG


@dataclass(frozen=True, slots=True)
class Refusal:
    """A message the store refuses with a status (not an exception)."""

    status: PutStatus
    error: str


class _TopicFrame:
    """What framing needs of one (validated) topic, made once: its topic field (the
    length field and the UTF-8 name), its MAGICCODE, the fixed part of a record's
    TOTALSIZE with an IPv4 born host (everything but body and properties) and its
    queue keys (``"<topic>-<queueId>"``, as
    :func:`~mqstore.commitlog.commitlog.queue_key` builds them). Shared by threads:
    ``keys`` only gains equal values."""

    __slots__ = ("base", "head", "keys", "magic", "prefix")

    def __init__(self, topic: str, header_length: int) -> None:
        self.head, self.magic = fmt.topic_field(topic.encode("utf-8"))
        self.base = header_length + len(self.head) + 2
        self.prefix = topic + "-"
        self.keys: dict[int, str] = {}
        """Queue id -> queue key, filled by :meth:`key`."""

    def key(self, queue_id: int) -> str:
        """The queue key of ``queue_id`` (an int: the caller checked), kept for next time."""
        k = self.keys[queue_id] = self.prefix + str(queue_id)
        return k


_NO_TOPIC = _TopicFrame("", 0)
"""A placeholder before a batch's first lookup."""
_UNSEEN: object = object()
"""No message's topic or host (not even None, which the lookup refuses)."""


def _check_int_fields(msg: Message) -> None:
    """The record's fixed-width fields must hold the message's numbers: ints (the
    annotations are what a Message promises, not what it holds; a float within range
    would pass a comparison and fail the pack) within a Java int or long.

    Raises:
        IllegalMessageError: a number outside its field.
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
    """Messages to frames for one store (its config, store host and delay levels)."""

    def __init__(self, cfg: StoreConfig, store_host: bytes, delay_levels: DelayLevels) -> None:
        self._cfg = cfg
        self._delay_levels = delay_levels
        self._compress_type = parse_type(cfg.compress_type)
        self._headers = {
            n: fmt.header_length(n, len(store_host)) for n in (_IPV4_HOST_LEN, fmt.IPV6_HOST_LEN)
        }
        self._header4 = self._headers[_IPV4_HOST_LEN]
        self._hosts: dict[tuple[str, int], bytes] = {}
        self._topics: dict[str, _TopicFrame] = {}
        self.next_uniq: Callable[[], str] = new_uniq_key
        """The UNIQ_KEY generator of the common properties (tests make ids deterministic)."""
        self.max_record = min(
            cfg.max_message_size + MAX_RECORD_SLACK,
            cfg.commitlog_file_size - fmt.END_FILE_MIN_BLANK_LENGTH,
        )
        """The largest record the store writes."""
        self._format = PropertyFormat.parse(cfg.property_format)
        # Bodies framed from the caches alone: under the compression threshold and
        # the size limit, and only when the properties are 5.x's string.
        self._plain_body_limit = min(cfg.compress_msg_body_over, cfg.max_message_size + 1)
        if self._format is not PropertyFormat.V5:
            self._plain_body_limit = 0

    def _topic(self, topic: str) -> _TopicFrame:
        """The :class:`_TopicFrame` of ``topic``, made (and the name validated) on its
        first message.

        Raises:
            IllegalTopicError: the topic name is not allowed.
        """
        validate_topic(topic)
        tf = self._topics[topic] = _TopicFrame(topic, self._header4)
        return tf

    def _host(self, host: tuple[str, int]) -> bytes:
        """The record bytes of born host ``host``, kept for next time."""
        born = self._hosts[host] = host_bytes(host)
        return born

    # ------------------------------------------------------------------ frame

    def frame(self, msg: Message) -> Frame | Refusal:
        """The frame of ``msg``, or the refusal: :meth:`frame_batch` of one.

        Raises:
            IllegalTopicError, IllegalMessageError: as :meth:`frame_batch`.
        """
        framed = self.frame_batch((msg,))
        return framed if isinstance(framed, Refusal) else framed[0]

    def frame_batch(self, msgs: Sequence[Message]) -> list[Frame] | Refusal:
        """The frames of ``msgs`` (a single put is a batch of one), or the first
        refusal: the one way messages become records.

        The batch's UNIQ_KEYs are made first (by one call when the generator is the
        default, else by asking the replaced one, which tests make deterministic, once
        per message), and each message's topic and born host are looked up in the
        caches only when they differ from the previous message's.

        Raises:
            IllegalTopicError: a topic name is not allowed.
            IllegalMessageError: empty/non-bytes body, negative queue id, a number
                outside its field, bad property.
        """
        if len(msgs) == 1:  # a single put: no loop, no batch lookups
            msg = msgs[0]
            uniq = self.next_uniq()
            tf = self._topics.get(msg.topic) or self._topic(msg.topic)
            born = self._hosts.get(msg.born_host) or self._host(msg.born_host)
            framed = self._plain(msg, uniq, tf, born)
            if framed is not None:
                return [framed]
            full = self._frame_any(msg, uniq)  # not common: the steps, which may refuse it
            return full if isinstance(full, Refusal) else [full]
        next_uniq = self.next_uniq
        if next_uniq is new_uniq_key:
            uniqs: Sequence[str] = new_uniq_keys(len(msgs))
        else:
            uniqs = [next_uniq() for _ in msgs]
        frames: list[Frame] = []
        add = frames.append
        plain = self._plain
        last_topic = last_host = _UNSEEN  # the first message looks both up
        tf = _NO_TOPIC
        born = b""
        for msg, uniq in zip(msgs, uniqs):  # noqa: B905  (the same length: made so above)
            if msg.topic is not last_topic:  # a batch is usually one topic from one host
                last_topic = msg.topic
                tf = self._topics.get(msg.topic) or self._topic(msg.topic)
            if msg.born_host is not last_host:
                last_host = msg.born_host
                born = self._hosts.get(msg.born_host) or self._host(msg.born_host)
            got = plain(msg, uniq, tf, born)
            if got is None:
                full = self._frame_any(msg, uniq)
                if isinstance(full, Refusal):
                    return full
                got = full
            add(got)
        return frames

    def _plain(self, msg: Message, uniq: str, tf: _TopicFrame, born: bytes) -> Frame | None:
        """The frame of a common message (``tf`` and ``born``: its topic's and born
        host's cached parts), from the caches alone; None for any other
        (:meth:`_frame_any` frames it)."""
        body = msg.body
        qid = msg.queue_id
        flag = msg.flag
        reconsume = msg.reconsume_times
        if not (
            flag.__class__ is int is reconsume.__class__ is qid.__class__
            and not (
                flag or reconsume or msg.sys_flag or msg.prepared_transaction_offset
                or msg.properties
            )
            and msg.born_timestamp is None
            and body.__class__ is bytes
            and 0 < len(body) < self._plain_body_limit
            and -1 < qid < 0x80000000
            and msg.delay_level <= 0
            and msg.wait_store_msg_ok
        ):  # fmt: skip
            return None
        props = standard_properties_string(uniq, msg.tags, msg.keys).encode()
        p_len = len(props)
        total = tf.base + len(body) + p_len
        if p_len > _MAX_PROPERTIES or total > self.max_record or len(born) != _IPV4_HOST_LEN:
            return None
        return (
            tf.keys.get(qid) or tf.key(qid), qid, 0, 0, None, born, 0, 0, body,
            zlib.crc32(body) & 0x7FFFFFFF, b"".join((tf.head, p_len.to_bytes(2, "big"), props)),
            tf.magic, total, uniq,
        )  # fmt: skip

    def _frame_any(self, msg: Message, uniq: str | None) -> Frame | Refusal:
        """The frame of any message (``uniq`` its UNIQ_KEY when the store makes its
        properties): the steps the common message skips."""
        tf = self._topics.get(msg.topic) or self._topic(msg.topic)  # validated first
        if msg.delay_level > 0:  # stored in SCHEDULE_TOPIC_XXXX until due (store.schedule)
            msg = redirect(msg, self._delay_levels)
            tf = self._topics.get(msg.topic) or self._topic(msg.topic)
        born = self._hosts.get(msg.born_host) or self._host(msg.born_host)
        cfg = self._cfg
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
        sys_flag = msg.sys_flag & ~_V6_BITS
        if n >= cfg.compress_msg_body_over and not sys_flag & COMPRESSED_FLAG:
            body = compress(body, self._compress_type, cfg.compress_level)
            sys_flag |= COMPRESSED_FLAG | self._compress_type.flag
        props, uniq = self.properties(msg, uniq)
        p_len = len(props)
        if p_len > _MAX_PROPERTIES:
            return Refusal(
                PutStatus.PROPERTIES_SIZE_EXCEEDED,
                f"properties of {p_len} bytes exceed {_MAX_PROPERTIES}",
            )
        if len(born) != _IPV4_HOST_LEN:
            sys_flag |= fmt.BORNHOST_V6_FLAG
        total = tf.base - self._header4 + self._headers[len(born)] + len(body) + p_len
        if total > self.max_record:
            return Refusal(
                PutStatus.MESSAGE_ILLEGAL,
                f"record of {total} bytes exceeds the limit {self.max_record}",
            )
        qid = msg.queue_id
        key = None  # PREPARED and ROLLBACK records take no queue offset
        if takes_queue_offset(sys_flag):
            key = tf.keys.get(qid) or tf.key(qid)
        return (
            key, qid, msg.flag, sys_flag, msg.born_timestamp, born, msg.reconsume_times,
            msg.prepared_transaction_offset, body, zlib.crc32(body) & 0x7FFFFFFF,
            b"".join((tf.head, p_len.to_bytes(2, "big"), props)), tf.magic, total, uniq,
        )  # fmt: skip

    def properties(self, msg: Message, uniq: str | None = None) -> tuple[bytes, str]:
        """Properties bytes as the store's broker version writes them
        (:class:`~mqstore.property_format.PropertyFormat`; 5.x: Java HashMap(128)
        order), and the message's UNIQ_KEY (``uniq`` when the store makes the
        properties and it is given).

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
        ):  # the common properties: the string and UNIQ_KEY generator of frame()
            if uniq is None:
                uniq = self.next_uniq()
            return standard_properties_string(uniq, msg.tags, msg.keys).encode("utf-8"), uniq
        return self._format.properties_of(msg)


__all__ = ["MAX_RECORD_SLACK", "MessageFramer", "Refusal"]
