"""The client's view of one broker: the contract between clients and brokers.

Producers and consumers talk to a broker only through :class:`Transport`. Two
implementations exist and behave the same way:

- ``mqstore.client.inprocess.InProcessTransport`` calls a ``mqstore.broker.core.BrokerCore``
  directly (embedded mode: no sockets, several consumers in one process);
- ``mqstore.client.remote.RemoteTransport`` speaks RocketMQ's remoting protocol over TCP
  to ``mqstore broker`` (or to any RocketMQ 4.x broker for the codes it supports).

Both map broker answers to the same result types defined here, so consumer code is
transport-agnostic. Every call may raise :class:`BrokerError` (a broker answered with an
error code) or :class:`TransportError` (connection lost, timeout); nothing returns a
sentinel.

Long polling: :meth:`Transport.pull` blocks the calling thread for at most
``suspend_ms`` when the queue has nothing new, and returns as soon as a matching message
arrives (RocketMQ ``PullRequestHoldService``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mqstore.client.allocate import MessageQueue
from mqstore.consumequeue.results import StoredMessage
from mqstore.errors import StoreError
from mqstore.message import Message


class TransportError(StoreError):
    """The broker could not be reached or did not answer in time."""


class BrokerError(StoreError):
    """The broker answered with an error response code.

    ``code`` is RocketMQ's numeric response code (``mqstore.broker.codes``),
    ``remark`` the broker's text.
    """

    def __init__(self, code: int, remark: str = "") -> None:
        super().__init__(f"broker error {code}: {remark}")
        self.code = code
        self.remark = remark


class SendStatus(enum.Enum):
    """RocketMQ ``SendStatus``, mapped from the send response code."""

    SEND_OK = "SEND_OK"  # SUCCESS (0)
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # 10
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"  # 12
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"  # 11


@dataclass(frozen=True, slots=True)
class SendResult:
    """One send (single or batch). For a batch, ``msg_id``/``offset_msg_id`` hold the
    ids of every message, comma-joined as RocketMQ does, and ``queue_offset`` is the
    first message's queue offset."""

    status: SendStatus
    msg_id: str  # UNIQ_KEY (client-side id)
    offset_msg_id: str  # store host + physical offset
    queue: MessageQueue
    queue_offset: int


class PullStatus(enum.Enum):
    """RocketMQ client ``PullStatus`` (SUCCESS->FOUND, 19->NO_NEW_MSG,
    20->NO_MATCHED_MSG, 21->OFFSET_ILLEGAL)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True, slots=True)
class PullReply:
    """A pull's answer. ``messages`` are decoded, bodies decompressed, and already
    re-filtered by exact tag on the client side (tag hash codes collide)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: tuple[StoredMessage, ...] = ()
    suggest_which_broker_id: int = 0


class MessageModel(enum.Enum):
    """How a group shares a topic: CLUSTERING splits queues, BROADCASTING gives each
    consumer every queue."""

    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeType(enum.Enum):
    """RocketMQ ``ConsumeType`` as sent in heartbeats."""

    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"  # pull / lite pull
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push


class ConsumeFromWhere(enum.Enum):
    """Where a group with no stored offset starts (RocketMQ names)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """One topic subscription as carried in a heartbeat (``"*"`` or ``"A || B"``)."""

    topic: str
    expression: str = "*"


@dataclass(frozen=True, slots=True)
class ConsumerData:
    """One consumer group's part of a heartbeat (RocketMQ ``ConsumerData``)."""

    group: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscriptions: tuple[SubscriptionData, ...] = ()


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """RocketMQ ``HeartbeatData``: who this client is and which groups it serves."""

    client_id: str
    consumers: tuple[ConsumerData, ...] = ()
    producer_groups: tuple[str, ...] = field(default=())


ConsumerIdsChanged = Callable[[str], None]
"""Broker-to-client push (NOTIFY_CONSUMER_IDS_CHANGED): called with the group name,
from a transport thread; the handler must only wake the rebalance service."""


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

    def pull(
        self,
        group: str,
        queue: MessageQueue,
        offset: int,
        max_count: int,
        expression: str = "*",
        *,
        commit_offset: int | None = None,
        suspend_ms: int = 0,
    ) -> PullReply:
        """PULL_MESSAGE. ``commit_offset`` piggy-backs the group's offset (sysflag
        0x1). With ``suspend_ms`` > 0 the broker holds the pull until a message
        arrives or the time runs out (sysflag 0x2)."""
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

    def send_back(
        self,
        group: str,
        msg: StoredMessage,
        delay_level: int = 0,
        max_reconsume_times: int = 16,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: retry ``msg`` later through ``%RETRY%group`` (delay
        level 3 + reconsume times when 0), or to ``%DLQ%group`` past the maximum."""
        ...

    def set_consumer_ids_changed(self, handler: ConsumerIdsChanged | None) -> None:
        """Install the NOTIFY_CONSUMER_IDS_CHANGED handler (one per transport)."""
        ...

    def close(self) -> None:
        """Release sockets/threads; the broker is not stopped."""
        ...
