"""The value types both sides of the wire share: queues, heartbeats, statuses, results.

Producers and consumers (``mqstore.client``) and the broker (``mqstore.broker``) speak
about the same things: a :class:`MessageQueue`, a client's :class:`Heartbeat` with its
:class:`ConsumerData`, a send's :class:`SendResult`, a pull's :class:`PullQuery` and
:class:`PullReply`. They live here, below both, so neither side imports the other.
Every enum value is RocketMQ's name for it (it travels in JSON bodies as that name).
"""

from __future__ import annotations

import enum
import itertools
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Final

from mqstore.records import StoredMessage
from mqstore.remoting.codes import ResponseCode

_INT_MIN: Final = -(2**31)
_INT_MAX: Final = 2**31 - 1


def java_string_key(s: str) -> bytes:
    """Sort key giving Java ``String.compareTo`` order (UTF-16 code units, then length).

    Python orders by code point, Java by UTF-16 unit: a non-BMP character (surrogates
    D800-DFFF) sorts *before* U+E000..U+FFFF in Java, after them in Python. Big-endian
    UTF-16 bytes compare exactly like the unit sequence; ``surrogatepass`` keeps lone
    surrogates (legal in Java strings) comparable.

    >>> sorted(["\\uffff", "\\U0001F600"]) == ["\\uffff", "\\U0001F600"]
    True
    >>> sorted(["\\uffff", "\\U0001F600"], key=java_string_key) == ["\\U0001F600", "\\uffff"]
    True
    """
    return s.encode("utf-16-be", "surrogatepass")


@total_ordering
@dataclass(frozen=True, slots=True)
class MessageQueue:
    """One queue of a topic on one broker; ordered like RocketMQ ``MessageQueue``.

    Order: topic, then broker name (both by Java ``String.compareTo``), then queue id.
    Java compares ids as ``this.queueId - o.queueId``, which overflows for ids of
    opposite signs 2**31 apart; we compare as integers, which is identical whenever
    Java's comparator is a total order (in particular for the non-negative ids brokers
    hand out).

    Raises:
        ValueError: ``queue_id`` outside Java's ``int`` range.
    """

    topic: str
    broker_name: str
    queue_id: int

    def __post_init__(self) -> None:
        if not _INT_MIN <= self.queue_id <= _INT_MAX:
            raise ValueError(f"queue_id {self.queue_id} outside the Java int range")

    def __str__(self) -> str:
        """``MessageQueue.toString()``: also the consistent-hash key of the queue."""
        return (
            f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, "
            f"queueId={self.queue_id}]"
        )

    def sort_key(self) -> tuple[bytes, bytes, int]:
        """The key ``sort_queues`` sorts by; equal keys mean equal queues."""
        return (java_string_key(self.topic), java_string_key(self.broker_name), self.queue_id)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, MessageQueue):
            return NotImplemented
        return self.sort_key() < other.sort_key()


def sort_queues(queues: Iterable[MessageQueue]) -> list[MessageQueue]:
    """``Collections.sort(mqAll)``: a new list in RocketMQ ``MessageQueue`` order."""
    return sorted(queues, key=MessageQueue.sort_key)


# RocketMQ ``PermName``: the bits of a topic's ``perm``, in a broker's topic config and in
# a route's QueueData. INHERIT marks a template (TBW102) that auto-created topics copy.
PERM_INHERIT: Final = 0x1
PERM_WRITE: Final = 0x2
PERM_READ: Final = 0x4
PERM_RW: Final = PERM_READ | PERM_WRITE
PERM_ALL: Final = PERM_INHERIT | PERM_WRITE | PERM_READ
"""Every permission bit RocketMQ defines."""


@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker's queues of one topic in a route (``TopicRouteData.queueDatas``).

    ``perm`` holds ``PermName`` bits (:data:`PERM_READ`, :data:`PERM_WRITE`). ``topic_sys_flag``
    is what the broker registered; a client reading a route leaves it 0, since it
    uses only the counts and ``perm``.
    """

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


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


@dataclass(frozen=True, slots=True)
class PullQuery:
    """One PULL_MESSAGE as a client asks it (RocketMQ ``PullMessageRequestHeader``)."""

    group: str
    queue: MessageQueue
    offset: int
    """The queue offset to read from."""
    max_count: int = 32
    expression: str = "*"
    """The tags subscribed: ``"*"`` or ``"A || B"``; a SQL92 expression with
    ``expression_type`` SQL92."""
    expression_type: str = "TAG"
    """RocketMQ ``ExpressionType``: ``"TAG"`` or ``"SQL92"``."""
    commit_offset: int | None = None
    """The group's offset to commit with the pull (sysflag 0x1); None: nothing to commit."""
    suspend_ms: int = 0
    """With more than 0 the broker holds the pull until a message arrives or the time
    runs out (sysflag 0x2, ``suspendTimeoutMillis``)."""


@dataclass(frozen=True, slots=True)
class SendBack:
    """One CONSUMER_SEND_MSG_BACK: ``msg`` failed in ``group`` and goes back for retry
    (RocketMQ ``ConsumerSendMsgBackRequestHeader``)."""

    group: str
    msg: StoredMessage
    delay_level: int = 0
    """0: the broker picks level 3 + reconsume times; below 0: straight to the DLQ."""
    max_reconsume_times: int = 16
    """Past this many reconsumes the message goes to ``%DLQ%group``."""


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
    """One topic subscription as carried in a heartbeat (``"*"`` or ``"A || B"``, or a
    SQL92 expression with ``expression_type`` SQL92)."""

    topic: str
    expression: str = "*"
    expression_type: str = "TAG"


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


class GroupListeners:
    """The NOTIFY_CONSUMER_IDS_CHANGED listeners of one transport: the consumers sharing
    it each listen for their own group, and one handler (``catch_all``) hears every
    group. Owned by the transport, so its table lives and dies with it. Thread-safe:
    consumers come and go while a transport thread notifies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[int, tuple[str, Callable[[], None]]] = {}
        self._tokens = itertools.count()
        self.catch_all: ConsumerIdsChanged | None = None

    def add(self, group: str, on_change: Callable[[], None]) -> int:
        """Call ``on_change`` when ``group`` changes; returns a token for :meth:`remove`."""
        with self._lock:
            token = next(self._tokens)
            self._listeners[token] = (group, on_change)
        return token

    def remove(self, token: int) -> None:
        """Stop the listener of ``token`` (an unknown token is ignored)."""
        with self._lock:
            self._listeners.pop(token, None)

    def __call__(self, group: str) -> None:
        """``group`` changed: call its listeners, then the catch-all handler."""
        with self._lock:
            targets = [cb for g, cb in self._listeners.values() if g == group]
        for cb in targets:
            cb()
        handler = self.catch_all
        if handler is not None:
            handler(group)


SEND_STATUS: Final[Mapping[int, SendStatus]] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
"""Send response code -> status (the codes that mean "stored"); both transports map
through this, and any other code is a ``BrokerError``."""
PULL_STATUS: Final[Mapping[int, PullStatus]] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
"""Pull response code -> status (the client's ``PullAPIWrapper`` mapping); any other
code is a ``BrokerError``."""
