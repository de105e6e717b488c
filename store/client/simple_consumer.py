"""SimpleConsumer: RocketMQ 5.x message-level consumption, embedded or over TCP.

The consumer receives messages, which stay hidden from the group's other consumers
for an invisible duration, and acknowledges each one; whatever is not acknowledged in
time is received again (by any consumer of the group) with its delivery attempt one
higher, and after the group's maximum goes to ``%DLQ%<group>``. Consumers of one group
share every queue: no rebalancing. Delivery is at least once.

Embedded, a few lines::

    with MessageStore.open(cfg) as store, PopService(store) as pop:
        store.put_message(Message(topic="orders", body=b"hello"))
        consumer = SimpleConsumer("group", {"orders": "*"}, EmbeddedPop(pop))
        for m in consumer.receive(16, invisible_duration=30):
            consumer.ack(m)

Over TCP, give a ``mqstore.client.pop_remote.RemotePop`` instead of ``EmbeddedPop``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Protocol

from mqstore.errors import InvalidReceiptHandleError
from mqstore.pop.service import AckStatus, PoppedMessage, PopService

ReceivedMessage = PoppedMessage
"""A received message: the value a pop hands out. Its ``receipt_handle`` (and deadline)
is replaced by :meth:`SimpleConsumer.change_invisible_duration`; the rest does not change."""


class PopTransport(Protocol):
    """What a SimpleConsumer needs from a broker: POP, ACK, CHANGE_INVISIBLE_TIME."""

    def pop(
        self, group: str, topic: str, max_count: int, invisible_ms: int, *,
        subscription: str, fifo: bool, wait_ms: int,
    ) -> list[ReceivedMessage]: ...  # fmt: skip

    def ack(self, group: str, topic: str, handle: str) -> bool: ...

    def batch_ack(self, group: str, topic: str, handles: Sequence[str]) -> list[bool]: ...

    def change_invisible(
        self, group: str, topic: str, handle: str, invisible_ms: int
    ) -> str | None: ...


class EmbeddedPop:
    """A :class:`PopTransport` over a :class:`~mqstore.pop.PopService` in this process."""

    def __init__(self, service: PopService) -> None:
        self.service = service

    def pop(
        self, group: str, topic: str, max_count: int, invisible_ms: int, *,
        subscription: str, fifo: bool, wait_ms: int,
    ) -> list[ReceivedMessage]:  # fmt: skip
        r = self.service.pop(
            group, topic, max_count, invisible_ms, subscription=subscription, fifo=fifo,
            wait_ms=wait_ms,
        )  # fmt: skip
        return list(r.messages)

    def ack(self, group: str, topic: str, handle: str) -> bool:
        return self.service.ack(group, topic, handle) is AckStatus.OK

    def batch_ack(self, group: str, topic: str, handles: Sequence[str]) -> list[bool]:
        return [s is AckStatus.OK for s in self.service.batch_ack(group, topic, handles)]

    def change_invisible(
        self, group: str, topic: str, handle: str, invisible_ms: int
    ) -> str | None:
        r = self.service.change_invisible_time(group, topic, handle, invisible_ms)
        return r.receipt_handle if r.status is AckStatus.OK else None


class SimpleConsumer:
    """Receive / ack / change invisible duration for one consumer group.

    ``subscriptions`` maps topic to a tag expression (``"*"``, ``"A || B"``). ``fifo``
    receives in order per queue (a queue's next messages wait until the earlier ones
    are acknowledged or their invisible time is over). ``await_duration`` (seconds)
    is how long :meth:`receive` waits for a message when none is there (long polling).
    Thread-safe as far as its transport is.
    """

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, str],
        transport: PopTransport,
        *,
        fifo: bool = False,
        await_duration: float = 0.0,
    ) -> None:
        if not subscriptions:
            raise ValueError("a SimpleConsumer needs at least one subscription")
        self.group = group
        self.subscriptions = dict(subscriptions)
        self.transport = transport
        self.fifo = fifo
        self.await_duration = await_duration
        self._turn = itertools.cycle(sorted(self.subscriptions))

    def receive(
        self, max_messages: int = 16, invisible_duration: float = 30.0
    ) -> list[ReceivedMessage]:
        """Up to ``max_messages`` messages (at most 32), hidden from the group's other
        consumers for ``invisible_duration`` seconds; [] if none came within
        ``await_duration``. Topics are tried in turn, the wait spent on the last."""
        invisible_ms = max(1, int(invisible_duration * 1000))
        n = len(self.subscriptions)
        for i in range(n):
            topic = next(self._turn)
            wait = int(self.await_duration * 1000) if i == n - 1 else 0
            got = self.transport.pop(
                self.group, topic, max_messages, invisible_ms,
                subscription=self.subscriptions[topic], fifo=self.fifo, wait_ms=wait,
            )  # fmt: skip
            if got:
                return got
        return []

    def ack(self, message: ReceivedMessage) -> None:
        """Acknowledge ``message``: it is not delivered again.

        Raises:
            InvalidReceiptHandleError: the message is no longer held by this receipt (its
                invisible time ran out and it was made visible again, or it was
                acknowledged already).
        """
        if not self.transport.ack(self.group, message.topic, message.receipt_handle):
            raise InvalidReceiptHandleError(
                f"message {message.msg_id}: receipt handle expired or already acknowledged"
            )

    def ack_all(self, messages: Sequence[ReceivedMessage]) -> None:
        """Acknowledge ``messages`` with one request per topic (one ack record per
        received batch in the store, not one per message). Every message still held is
        acknowledged even when some are not.

        Raises:
            InvalidReceiptHandleError: some messages were no longer held by their
                receipts (the error names them); the others are acknowledged.
        """
        by_topic: dict[str, list[ReceivedMessage]] = {}
        for m in messages:
            by_topic.setdefault(m.topic, []).append(m)
        stale: list[str] = []
        for topic, ms in by_topic.items():
            done = self.transport.batch_ack(self.group, topic, [m.receipt_handle for m in ms])
            stale += [m.msg_id for m, ok in zip(ms, done, strict=True) if not ok]
        if stale:
            raise InvalidReceiptHandleError(
                f"messages {', '.join(stale)}: receipt handles expired or already acknowledged"
            )

    def change_invisible_duration(self, message: ReceivedMessage, duration: float) -> None:
        """Hide ``message`` for ``duration`` seconds from now; its receipt handle is
        replaced by the new one.

        Raises:
            InvalidReceiptHandleError: as for :meth:`ack`.
        """
        new = self.transport.change_invisible(
            self.group, message.topic, message.receipt_handle, max(1, int(duration * 1000))
        )
        if new is None:
            raise InvalidReceiptHandleError(
                f"message {message.msg_id}: receipt handle expired or already acknowledged"
            )
        message.renew(new)
