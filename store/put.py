"""The write half of :class:`~mqstore.message_store.MessageStore`'s public API.

A mixin, as ``mqstore.pull`` is for reads: :class:`MessageStore` inherits
``put_message`` / ``put_messages`` and provides the components they use (the
CommitLog, the flusher, the caches below). Two paths:

* the fast path, for the common message (known topic, IPv4 born host, body under
  the compression threshold, no user properties, no delay, SYSFLAG 0, waits for
  the store): framed once (:meth:`PutAPI._frame_common`) and packed in place into
  the mapping by ``CommitLog.append_v1`` / ``append_v1_batch``; ~60% of the general
  path's cost per put, ~half per message of a batch (the batch path,
  ``put_messages``, is in ``mqstore.put_batch``);
* the general path for everything else (validation, Java HashMap property order,
  delay redirect, compression), and whenever the fast path declines (a roll is
  due, a size limit is hit). Both write the same bytes (``tests/test_put_fast_path.py``).

Puts are thread-safe (the CommitLog's put lock orders them).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path

from mqstore.commitlog import format as fmt
from mqstore.commitlog.commitlog import CommitLog, EncodedMessage, RollFailed, V1Record
from mqstore.commitlog.flush import AsyncFlusher, GroupCommitter
from mqstore.compression import COMPRESSED_FLAG, CompressionType, compress
from mqstore.config import BrokerRole, StoreConfig
from mqstore.errors import IllegalMessageError, StoreClosedError
from mqstore.ha import service as ha_service
from mqstore.logics import Logics
from mqstore.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    hashmap_bucket,
    host_bytes,
    java_hashmap_order,
    new_uniq_key,
    properties_to_string,
    standard_properties_string,
    validate_topic,
)
from mqstore.put_batch import BatchPutMixin, PutResult, _tuple_new
from mqstore.schedule import redirect
from mqstore.status import PutStatus

MAX_RECORD_SLACK = 64 * 1024
_PUT_OK = PutStatus.PUT_OK

_INT32 = range(-(1 << 31), 1 << 31)
_INT64 = range(-(1 << 63), 1 << 63)


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
    ):
        if value not in width:
            raise IllegalMessageError(f"{name} {value} does not fit its record field")


def _body_bytes(body: object) -> bytes:
    """The bytes of a body given as a bytearray or memoryview.

    Raises:
        IllegalMessageError: a body of any other type.
    """
    if not isinstance(body, bytearray | memoryview):
        raise IllegalMessageError(f"body must be bytes, got {type(body).__name__}")
    return bytes(body)


class PutAPI(BatchPutMixin):
    """put_message and put_messages (mixed into MessageStore; the batch path is
    :class:`~mqstore.put_batch.BatchPutMixin`)."""

    cfg: StoreConfig
    root: Path
    commitlog: CommitLog
    flusher: GroupCommitter | AsyncFlusher
    logics: Logics
    _closed: bool
    _poison: BaseException | None
    _disk_full: str | None
    _refuse_puts: bool
    _fast_puts: bool
    _fast_body_limit: int
    _max_record: int
    _host_hex: str
    _compress_type: CompressionType
    _born_cache: dict[tuple[str, int], bytes]
    _topic_bytes: dict[str, bytes]
    _next_uniq: Callable[[], str]
    _frame: Callable[[int, int, bytes, bytes], tuple[bytes, int, int]]
    _replica_wait: ha_service.ReplicaWait | None

    def _unavailable(self) -> PutResult | None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")
        if self._poison is not None:
            return PutResult(
                PutStatus.SERVICE_NOT_AVAILABLE,
                error=f"store poisoned by a failed flush ({self._poison}); reopen it to recover",
            )
        if self.cfg.broker_role is BrokerRole.SLAVE:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, error="a SLAVE store refuses writes")
        full = self._disk_full
        if full is not None:  # RocketMQ: SERVICE_NOT_AVAILABLE while the DISK_FULL flag is up
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, error=full)
        return None

    def _properties(self, msg: Message) -> tuple[bytes, str]:
        """Properties bytes in Java HashMap(128) order (as a 5.x broker writes them)."""
        props = msg.properties
        if not props and msg.delay_level <= 0 and msg.wait_store_msg_ok:
            raw_keys = msg.keys
            keys = (
                raw_keys
                if isinstance(raw_keys, str) or raw_keys is None
                else " ".join(k for k in raw_keys if k)
            )
            uniq = self._next_uniq()
            return standard_properties_string(uniq, msg.tags, keys).encode("utf-8"), uniq
        items: dict[str, str] = dict(props) if props else {}
        if props:
            for k, v in props.items():
                if not k or "\x01" in k or "\x02" in k or "\x01" in v or "\x02" in v:
                    raise IllegalMessageError(
                        f"property {k!r}: names/values must be non-empty and free of \\x01/\\x02"
                    )
        if msg.tags:
            items[PROPERTY_TAGS] = msg.tags
        if msg.keys:
            items[PROPERTY_KEYS] = " ".join(msg.key_list())
        if msg.delay_level > 0:
            items[PROPERTY_DELAY_TIME_LEVEL] = str(msg.delay_level)
        if not msg.wait_store_msg_ok:
            items[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        uniq = items.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or ""
        if not uniq:
            uniq = new_uniq_key()
            items[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
        if len(items) <= 96:
            order = sorted(items, key=hashmap_bucket)
            text = "".join([f"{k}\x01{items[k]}\x02" for k in order])
        else:
            text = properties_to_string(java_hashmap_order(items.items()))
        return text.encode("utf-8"), uniq

    def _prepare(self, msg: Message) -> tuple[EncodedMessage, str] | PutResult:
        """The general path's (record, UNIQ_KEY) of ``msg``, or the refusal's PutResult."""
        cfg = self.cfg
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
            return PutResult(
                PutStatus.MESSAGE_ILLEGAL,
                error=f"body of {n} bytes exceeds max_message_size {cfg.max_message_size}",
            )
        sys_flag = msg.sys_flag & ~(fmt.BORNHOST_V6_FLAG | fmt.STOREHOST_V6_FLAG)
        if n >= cfg.compress_msg_body_over and not sys_flag & COMPRESSED_FLAG:
            body = compress(body, self._compress_type, cfg.compress_level)
            sys_flag |= COMPRESSED_FLAG | self._compress_type.flag
        props_bytes, uniq = self._properties(msg)
        if len(props_bytes) > fmt.MAX_PROPERTIES_LENGTH:
            return PutResult(
                PutStatus.PROPERTIES_SIZE_EXCEEDED,
                error=f"properties of {len(props_bytes)} bytes exceed {fmt.MAX_PROPERTIES_LENGTH}",
            )
        born = self._born_cache.get(msg.born_host)
        if born is None:
            born = self._born_cache[msg.born_host] = host_bytes(msg.born_host)
        if len(born) == fmt.IPV6_HOST_LEN:
            sys_flag |= fmt.BORNHOST_V6_FLAG
        tail, version, total = self._frame(sys_flag, len(body), topic_bytes, props_bytes)
        if total > self._max_record:
            return PutResult(
                PutStatus.MESSAGE_ILLEGAL,
                error=f"record of {total} bytes exceeds the limit {self._max_record}",
            )
        born_ts = msg.born_timestamp  # None: the CommitLog stamps the store time
        enc = _tuple_new(EncodedMessage, (
            f"{topic}-{msg.queue_id}", msg.queue_id, msg.flag, sys_flag, born_ts, born,
            msg.reconsume_times, 0, body, zlib.crc32(body) & 0x7FFFFFFF, tail, version, total,
        ))  # fmt: skip
        return enc, uniq

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
        if not self._refuse_puts and self._fast_puts:
            framed = self._frame_common(msg)
            if framed is not None:
                record, uniq = framed
                try:
                    at = self.commitlog.append_v1(*record)
                except struct.error:  # a field out of its range: the general path says which
                    at = None
                if at is not None:  # else the segment is full: the general path rolls
                    phys, qoff, ts = at
                    total = record[9]
                    status = self.flusher.wait_for(phys + total)
                    return _tuple_new(
                        PutResult,
                        (status, phys, qoff, f"{self._host_hex}{phys:016X}", total, ts, uniq, None),
                    )
        return self._put_general(msg)

    def _frame_common(self, msg: Message) -> tuple[V1Record, str] | None:
        """(record for ``CommitLog.append_v1``, UNIQ_KEY) of a common message, else None.

        The common message (most of them): known topic and IPv4 born host, body bytes
        under the compression threshold, no user properties, no delay, SYSFLAG 0,
        waits for the store. Framed here and packed in place by the CommitLog: the
        same bytes as the general path (``tests/test_put_fast_path.py``).
        """
        topic_bytes = self._topic_bytes.get(msg.topic)
        born = self._born_cache.get(msg.born_host)
        body = msg.body
        n = len(body) if type(body) is bytes else 0
        qid = msg.queue_id
        if (
            topic_bytes is None
            or born is None
            or len(born) != fmt.IPV4_HOST_LEN
            or not 0 < n < self._fast_body_limit
            or qid < 0
            or msg.sys_flag
            or msg.properties
            or msg.delay_level > 0
            or not msg.wait_store_msg_ok
        ):
            return None
        keys = msg.keys
        if keys is not None and type(keys) is not str:
            keys = keys[0] if len(keys) == 1 and keys[0] else " ".join(k for k in keys if k)
        uniq = self._next_uniq()
        props = standard_properties_string(uniq, msg.tags, keys).encode()
        if len(props) > fmt.MAX_PROPERTIES_LENGTH:
            return None
        tail, version, total = self._frame(0, n, topic_bytes, props)
        if version != 1 or total > self._max_record:
            return None
        crc = zlib.crc32(body) & 0x7FFFFFFF
        record = (f"{msg.topic}-{qid}", qid, msg.flag, msg.born_timestamp, born,
                  msg.reconsume_times, body, crc, tail, total)  # fmt: skip
        return record, uniq

    def _put_general(self, msg: Message) -> PutResult:
        """put_message of any message (validation, properties, delay, compression)."""
        if self._refuse_puts:
            bad = self._unavailable()
            if bad is not None:
                return bad
        if msg.delay_level > 0:  # stored in SCHEDULE_TOPIC_XXXX until due (store.schedule)
            msg = redirect(msg, self.logics.delay_levels)
        prepared = self._prepare(msg)
        if type(prepared) is PutResult:
            return prepared
        enc, uniq = prepared  # type: ignore[misc]
        try:
            phys, size, qoff = self.commitlog.append(enc)
        except RollFailed as e:
            return PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, error=str(e))
        status = self.flusher.wait_for(phys + size) if msg.wait_store_msg_ok else _PUT_OK
        if self._replica_wait is not None and status is _PUT_OK and msg.wait_store_msg_ok:
            status = self._replica_wait(phys + size)  # SYNC_MASTER: flush, then a slave
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


__all__ = ["MAX_RECORD_SLACK", "PutAPI", "PutResult"]
