"""The client's view of one broker: the contract between clients and brokers.

Producers and consumers talk to a broker only through :class:`Transport`. Two
implementations exist and behave the same way:

- ``mqstore.broker.inprocess.InProcessTransport`` calls a ``mqstore.broker.core.BrokerCore``
  directly (embedded mode: no sockets, several consumers in one process);
- ``mqstore.client.remote.RemoteTransport`` speaks RocketMQ's remoting protocol over TCP
  to ``mqstore broker`` (or to any RocketMQ 4.x broker for the codes it supports).

Both map broker answers to the same result types (``mqstore.remoting.values``,
re-exported here), so consumer code is
transport-agnostic. Every call may raise :class:`BrokerError` (a broker answered with an
error code) or :class:`TransportError` (connection lost, timeout); nothing returns a
sentinel.

Long polling: :meth:`Transport.pull` blocks the calling thread for at most
``suspend_ms`` when the queue has nothing new, and returns as soon as a matching message
arrives (RocketMQ ``PullRequestHoldService``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from mqstore.message import Message
from mqstore.remoting.errors import BrokerError, TransportError
from mqstore.remoting.values import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumerIdsChanged,
    ConsumeType,
    GroupListeners,
    Heartbeat,
    MessageModel,
    MessageQueue,
    PullQuery,
    PullReply,
    PullStatus,
    SendBack,
    SendResult,
    SendStatus,
    SubscriptionData,
)

PullCallback = Callable[[PullReply | None, BrokerError | TransportError | None], None]
"""Completion of :meth:`Transport.pull_async`: ``(reply, None)`` or ``(None, error)``,
called once, on a transport thread: it must be quick and must not call the broker."""


class Cancellable(Protocol):
    """An outstanding async request."""

    def cancel(self) -> bool:
        """Stop waiting for it (its callback will not be called); False if it already
        completed."""
        ...


__all__ = [
    "BrokerError",
    "Cancellable",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "ConsumerIdsChanged",
    "GroupListeners",
    "Heartbeat",
    "MessageModel",
    "MessageQueue",
    "PullCallback",
    "PullQuery",
    "PullReply",
    "PullStatus",
    "SendBack",
    "SendResult",
    "SendStatus",
    "SubscriptionData",
    "Transport",
    "TransportError",
]


class Transport(Protocol):
    """Everything a producer or consumer asks of a broker."""

    @property
    def broker_name(self) -> str:
        """The broker's name in routes and ``MessageQueue``s (default ``broker-a``)."""
        ...

    def topic_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, sorted; ``[]`` if the topic does not exist."""
        ...

    def send(
        self, producer_group: str, queue: MessageQueue, messages: Sequence[Message]
    ) -> SendResult:
        """SEND_MESSAGE_V2 for one message, SEND_BATCH_MESSAGE for several (same
        queue). The topic is auto-created as RocketMQ allows. Raises BrokerError for
        MESSAGE_ILLEGAL, SERVICE_NOT_AVAILABLE, etc."""
        ...

    def pull(self, query: PullQuery) -> PullReply:
        """PULL_MESSAGE: ``query.commit_offset`` piggy-backs the group's offset, and with
        ``query.suspend_ms`` > 0 the broker holds the pull until a message arrives or
        the time runs out."""
        ...

    def pull_async(self, query: PullQuery, callback: PullCallback) -> Cancellable:
        """PULL_MESSAGE as :meth:`pull`, without holding the calling thread: the reply
        goes to ``callback``. Lets one thread keep every owned queue's long poll
        outstanding (RocketMQ ``PullMessageService``). The caller owns the timeout.

        Raises:
            TransportError: the request could not be sent (no callback then).
        """
        ...

    def query_offset(self, group: str, queue: MessageQueue) -> int | None:
        """QUERY_CONSUMER_OFFSET; ``None`` for QUERY_NOT_FOUND (22)."""
        ...

    def update_offset(self, group: str, queue: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET (oneway-like: errors are raised, not returned)."""
        ...

    def max_offset(self, queue: MessageQueue) -> int:
        """GET_MAX_OFFSET."""
        ...

    def min_offset(self, queue: MessageQueue) -> int:
        """GET_MIN_OFFSET."""
        ...

    def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP."""
        ...

    def heartbeat(self, hb: Heartbeat) -> None:
        """HEART_BEAT: registers (or refreshes) the client and its groups; a group's
        membership change makes the broker notify every member."""
        ...

    def unregister(self, client_id: str, group: str) -> None:
        """UNREGISTER_CLIENT for one consumer group: the group rebalances at once."""
        ...

    def consumer_ids(self, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the live client ids of the group (unsorted)."""
        ...

    def lock_batch(
        self, group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: the subset now locked by this client (60 s broker lease)."""
        ...

    def unlock_batch(self, group: str, client_id: str, queues: Sequence[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ."""
        ...

    def send_back(self, request: SendBack) -> None:
        """CONSUMER_SEND_MSG_BACK: retry the message later through ``%RETRY%group``
        (delay level 3 + reconsume times when 0), or to ``%DLQ%group`` past the
        maximum."""
        ...

    group_listeners: GroupListeners
    """The NOTIFY_CONSUMER_IDS_CHANGED listeners of the consumers sharing it."""

    def set_consumer_ids_changed(self, handler: ConsumerIdsChanged | None) -> None:
        """Install the NOTIFY_CONSUMER_IDS_CHANGED handler for every group (one per
        transport)."""
        ...

    def close(self) -> None:
        """Release sockets/threads; the broker is not stopped."""
        ...
