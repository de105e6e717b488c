"""Producer: RocketMQ's ``DefaultMQProducer`` send path over any :class:`Transport`.

The same object works against ``mqstore broker`` over TCP
(:class:`~mqstore.client.remote.RemoteTransport`) and against an embedded broker in the
same process (``mqstore.broker.inprocess.InProcessTransport``)::

    with Producer("pg", RemoteTransport("127.0.0.1:10911")) as producer:
        producer.send(Message("orders", b"...", tags="TagA", keys=["o-1"]))

What a send does, as the Java producer does it:

1. **Validate** the message (topic name, non-empty body, properties).
2. **Stamp** ``UNIQ_KEY`` (RocketMQ's client message id layout, on a copy: the
   caller's message is not modified) and, when the body is at least
   ``compress_over`` bytes (``compressMsgBodyOverHowmuch``, 4 KiB), compress it and
   set the sysflag bits as the Java client does (``tryToCompressMessage``): the
   compressed bit and the codec's type bits, so ZLIB is ``0x301``, LZ4 ``0x101``,
   ZSTD ``0x201`` (``MessageSysFlag``, ``CompressionType``). Batches are never
   compressed (neither are they in Java).
3. **Pick a queue**: an explicit ``queue``; else ``selector(queues, msg, arg)`` for
   ordered messages (:func:`select_by_hash` keeps one key on one queue); else
   round-robin over the topic's queues. A topic that does not exist yet gets
   ``TBW102``'s stand-in of 4 queues, and the broker auto-creates it on send.
4. **Send** and map the response (``SendResult.status``); a :class:`TransportError`
   is retried ``retries`` times on the next queue of another broker when the route has
   one, in round-robin mode (never with an explicit queue or a selector: that would
   break ordering), a :class:`BrokerError` is raised at once.

With ``send_latency_fault_enable`` (off by default, as in RocketMQ 4.x) round-robin
skips brokers inside their latency penalty window (:mod:`mqstore.client.fault`): a
broker that failed is skipped for 600 s, a slow one for 30-600 s by its latency.
Over a :class:`~mqstore.client.remote.RemoteTransport` given a name server, a topic's
queues span every broker of its route.

Thread-safe: many threads may share one producer.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mqstore.client.allocate import MessageQueue
from mqstore.client.fault import FaultStrategy
from mqstore.client.transport import BrokerError, SendResult, Transport, TransportError
from mqstore.client.wire import DEFAULT_TOPIC_QUEUE_NUMS, with_uniq_key
from mqstore.compression import COMPRESSED_FLAG, CompressionType, compress
from mqstore.errors import IllegalMessageError
from mqstore.message import Message, java_string_hash

MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
"""``(queues, message, arg) -> queue``: RocketMQ ``MessageQueueSelector.select``."""

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
"""``MixAll.RETRY_GROUP_TOPIC_PREFIX``: retry topics take no batches."""

ROUTE_TTL_S = 30.0
"""How long a topic's queue list is reused (``pollNameServerInterval``)."""


def java_hash(arg: object) -> int:
    """Java ``hashCode`` of a str/int argument (Integer or Long), else Python's hash."""
    if isinstance(arg, str):
        return java_string_hash(arg)
    if isinstance(arg, int) and not isinstance(arg, bool):
        if -(2**31) <= arg < 2**31:
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    return hash(arg)


def select_by_hash(queues: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
    """RocketMQ ``SelectMessageQueueByHash``: ``|hashCode(arg) % n|``, Java semantics."""
    return queues[abs(java_hash(arg)) % len(queues)]


class Producer:
    """Sends messages to the topic queues a transport offers.

    Args:
        group: producer group name.
        transport: where messages go.
        compress_over: compress bodies of at least this many bytes.
        compression: codec for compressed bodies.
        retries: extra attempts on another queue after a TransportError (round-robin
            sends only; ``retryTimesWhenSendFailed``).
        send_latency_fault_enable: skip brokers in their latency penalty window
            (``sendLatencyFaultEnable``; :attr:`faults`).
    """

    def __init__(
        self,
        group: str,
        transport: Transport,
        *,
        compress_over: int = 4096,
        compression: CompressionType = CompressionType.ZLIB,
        compress_level: int = 5,
        retries: int = 2,
        send_latency_fault_enable: bool = False,
    ) -> None:
        self.group = group
        self.transport = transport
        self.compress_over = compress_over
        self.compression = compression
        self.compress_level = compress_level
        self.retries = retries
        self.faults = FaultStrategy(send_latency_fault_enable)
        """Queue choice and the brokers' latency records (:mod:`mqstore.client.fault`)."""
        self._routes: dict[str, tuple[float, list[MessageQueue]]] = {}
        self._counters: dict[str, Iterator[int]] = {}
        self._lock = threading.Lock()
        self._running = False

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> Producer:
        """Allow sends. Returns ``self``."""
        self._running = True
        return self

    def shutdown(self) -> None:
        """Refuse further sends. The transport is the caller's and stays open."""
        self._running = False

    def __enter__(self) -> Producer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ----------------------------------------------------------------- queues

    def queues(self, topic: str) -> list[MessageQueue]:
        """The topic's queues (cached for :data:`ROUTE_TTL_S`); a 4-queue stand-in for
        a topic the broker does not know yet (it is created by the first send)."""
        now = time.monotonic()
        with self._lock:
            cached = self._routes.get(topic)
        if cached is not None and now - cached[0] < ROUTE_TTL_S:
            return cached[1]
        queues = self.transport.topic_queues(topic)
        if not queues:
            name = self.transport.broker_name
            return [MessageQueue(topic, name, i) for i in range(DEFAULT_TOPIC_QUEUE_NUMS)]
        with self._lock:
            self._routes[topic] = (now, queues)
        return queues

    def _next_index(self, topic: str) -> int:
        with self._lock:
            counter = self._counters.get(topic)
            if counter is None:  # a random start, as ThreadLocalIndex: producers spread
                counter = self._counters[topic] = itertools.count(random.randrange(1 << 16))
        return next(counter)

    # ----------------------------------------------------------------- sending

    def _prepare(self, msg: Message, *, compress_body: bool) -> Message:
        msg.validate()
        msg = with_uniq_key(msg)
        body = bytes(msg.body)
        if compress_body and len(body) >= self.compress_over and not msg.sys_flag & COMPRESSED_FLAG:
            packed = compress(body, self.compression, self.compress_level)
            flag = COMPRESSED_FLAG | self.compression.flag
            msg = dataclasses.replace(msg, body=packed, sys_flag=msg.sys_flag | flag)
        return msg

    def _check_running(self) -> None:
        if not self._running:
            raise RuntimeError(f"producer {self.group!r} is not started")

    def send(
        self,
        msg: Message,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
    ) -> SendResult:
        """Send one message and wait for the broker's answer.

        Raises:
            IllegalMessageError / IllegalTopicError: the message is invalid.
            BrokerError: the broker refused it. TransportError: after the retries.
            RuntimeError: the producer is not started.
        """
        self._check_running()
        return self._send([self._prepare(msg, compress_body=True)], queue, selector, arg)

    def send_batch(
        self,
        msgs: Sequence[Message],
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
    ) -> SendResult:
        """Send several messages of one topic to one queue in one request.

        Raises:
            IllegalMessageError: empty batch, mixed topics, a delayed message, a
                retry topic, or messages that disagree on ``wait_store_msg_ok``
                (RocketMQ's ``MessageBatch.generateFromList`` rules); otherwise as
                :meth:`send`.
        """
        self._check_running()
        if not msgs:
            raise IllegalMessageError("a batch needs at least one message")
        topics = {m.topic for m in msgs}
        if len(topics) != 1:
            raise IllegalMessageError(f"a batch must have one topic, got {sorted(topics)}")
        if any(m.delay_level > 0 for m in msgs):
            raise IllegalMessageError("delayed messages cannot be batched")
        if msgs[0].topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise IllegalMessageError("retry topics cannot be batched")
        if len({m.wait_store_msg_ok for m in msgs}) != 1:
            raise IllegalMessageError("the messages of a batch must agree on wait_store_msg_ok")
        prepared = [self._prepare(m, compress_body=False) for m in msgs]
        return self._send(prepared, queue, selector, arg)

    def _send(
        self,
        msgs: list[Message],
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: object,
    ) -> SendResult:
        topic = msgs[0].topic
        if queue is not None or selector is not None:
            if queue is None:
                assert selector is not None
                queue = selector(self.queues(topic), msgs[0], arg)
            return self.transport.send(self.group, queue, msgs)
        error: TransportError | None = None
        last_failed: str | None = None
        for _ in range(self.retries + 1):
            queues = self.queues(topic)
            mq = self.faults.select(queues, self._next_index(topic), last_failed)
            start = time.monotonic()
            try:
                result = self.transport.send(self.group, mq, msgs)
            except (TransportError, BrokerError) as e:
                self.faults.update(mq.broker_name, 0.0, failed=True)
                if isinstance(e, BrokerError):
                    raise
                error, last_failed = e, mq.broker_name
                continue
            self.faults.update(mq.broker_name, (time.monotonic() - start) * 1000, failed=False)
            return result
        assert error is not None
        raise error
