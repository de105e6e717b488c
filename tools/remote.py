"""``mqstore send`` and ``mqstore consume --broker/--namesrv``: messages to and from a
running broker over RocketMQ's remoting protocol, with mqstore's own client
(:class:`~mqstore.client.remote.RemoteTransport`), as ``mqadmin sendMessage`` and
``consumeMessage`` do for RocketMQ users (docs/admin.md §11).

The address is where routes come from: a name server (``mqstore namesrv`` or
RocketMQ's), or an ``mqstore broker``, which answers route requests itself. A RocketMQ
broker does not: reach it through its name server.

Sending goes through :class:`~mqstore.client.producer.Producer` (round-robin over the
topic's writable queues, or one ``queue_id``); a topic the broker does not have yet is
created by the first send where the broker allows auto-creation, as for any client.

Reading pulls each readable queue from a queue offset with PULL_MESSAGE, the
subscription carried in the request (so no consumer needs to be registered) and no
offset committed: nothing the broker keeps changes, as with ``consumeMessage``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from mqstore.remoting.values import MessageQueue, PullQuery, PullStatus

if TYPE_CHECKING:
    from mqstore.client.remote import RemoteTransport
    from mqstore.client.transport import SendResult
    from mqstore.message import Message
    from mqstore.records import StoredMessage

CLI_GROUP = "mqstore_cli"
"""The producer group of sends and the consumer group named in pulls (nothing is
registered or committed under it)."""
PULL_BATCH = 32
"""Messages asked for per pull (RocketMQ's default ``pullBatchSize``)."""


def connect(addr: str, timeout_s: float = 3.0) -> RemoteTransport:
    """A transport that finds brokers through ``addr`` (``host:port``)."""
    from mqstore.client.remote import RemoteTransport

    return RemoteTransport(addr, timeout_s=timeout_s)


def send(
    transport: RemoteTransport, messages: list[Message], queue_id: int | None = None
) -> Iterator[SendResult]:
    """Send ``messages`` one by one, yielding each broker answer.

    ``queue_id``: put every message into that queue (it must exist on the broker, or
    the topic must be new); None: round-robin over the topic's queues.

    Raises:
        BrokerError: the broker refused a message. TransportError: no answer.
        IllegalMessageError / IllegalTopicError: a message that cannot be sent.
    """
    from mqstore.client.producer import Producer

    with Producer(CLI_GROUP, transport, retries=0) as producer:
        for msg in messages:
            queue = None
            if queue_id is not None:
                broker = next(
                    (q.broker_name for q in producer.queues(msg.topic) if q.queue_id == queue_id),
                    transport.broker_name,
                )
                queue = MessageQueue(msg.topic, broker, queue_id)
            yield producer.send(msg, queue=queue)


def queues(transport: RemoteTransport, topic: str, queue_id: int | None) -> list[MessageQueue]:
    """The topic's readable queues (only those numbered ``queue_id`` when given), in
    RocketMQ's order; ``[]`` for a topic the name server does not know."""
    found = transport.topic_queues(topic)
    return [q for q in found if queue_id is None or q.queue_id == queue_id]


def pull(
    transport: RemoteTransport, queue: MessageQueue, offset: int, expression: str, limit: int
) -> Iterator[StoredMessage]:
    """Up to ``limit`` messages of ``queue`` matching ``expression`` from queue offset
    ``offset`` on, oldest first; stops at the queue's end. An offset below the queue's
    first (its files were deleted) starts at the first.

    Raises:
        BrokerError: the broker refused the pull. TransportError: no answer.
    """
    shown = 0
    while shown < limit:
        reply = transport.pull(
            PullQuery(CLI_GROUP, queue, offset, min(PULL_BATCH, limit - shown), expression)
        )
        if reply.status is PullStatus.FOUND:
            for m in reply.messages[: limit - shown]:
                yield m
                shown += 1
        elif reply.status is PullStatus.NO_NEW_MSG:
            return
        elif reply.status is PullStatus.OFFSET_ILLEGAL and offset >= reply.min_offset:
            return  # past the end
        if reply.next_begin_offset <= offset:
            return  # no progress: nothing more to read
        offset = reply.next_begin_offset
