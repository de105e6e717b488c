"""The POP bookkeeping records written to the revive topic, and their names.

RocketMQ 5.x keeps a POP consumer's in-flight state as ordinary messages in the
CommitLog, in the revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` (``PopAckConstants``):

- a **checkpoint** (tag ``ck``, body :class:`PopCheckPoint` as JSON) for each batch
  popped from one queue: which queue offsets were handed out, when, for how long;
- an **ack** (tag ``ack``, body :class:`AckMsg`) or **batch ack** (tag ``bAck``, the
  same with ``aol``, a list of offsets) for each acknowledgement.

The JSON field names are RocketMQ's (fastjson serialises the one/two-letter getters of
``PopCheckPoint``, ``AckMsg``, ``BatchAckMsg``): checkpoint ``so`` start offset, ``pt``
pop time (ms), ``it`` invisible time (ms), ``rt`` revive time (= pt + it), ``bm``
acked bit map, ``n`` number of messages, ``q`` queue id, ``t`` topic, ``c`` consumer
group, ``ro`` revive offset, ``d`` the messages' queue offsets as differences from
``so``, ``bn`` broker name; ack ``ao`` acked offset, ``so``, ``c``, ``t``, ``q``,
``pt``, ``bn``; batch ack ``aol`` instead of ``ao``.

An ack finds its checkpoint by the merge key (topic, group, queue id, start offset,
pop time, broker name): the receipt handle carries start offset and pop time
(``mqstore.pop.receipt``). Codecs only: no I/O here.

Worked example: two messages at queue offsets 7 and 9 of ``orders`` queue 1 popped by
group ``g`` at t=1000 for 30 s give
``{"so":7,"pt":1000,"it":30000,"rt":31000,"bm":0,"n":2,"q":1,"t":"orders","c":"g",
"ro":0,"d":[0,2],"bn":"broker-a"}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mqstore.errors import CorruptRecordError

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
SPLIT = "@"
POP_ORDER_REVIVE_QUEUE = 999
"""The revive queue id receipt handles of FIFO (orderly) pops carry (``KeyBuilder``)."""
ACK_TIME_INTERVAL_MS = 1000
"""A checkpoint is stamped deliverable this much before its revive time."""
MAX_BATCH = 32
"""Messages per checkpoint: the acked bit map is a 32-bit int."""

PROPERTY_START_DELIVER_TIME = "__STARTDELIVERTIME"
PROPERTY_POP_CK = "POP_CK"
PROPERTY_POP_CK_OFFSET = "POP_CK_OFFSET"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


def revive_topic(cluster: str) -> str:
    """``rmq_sys_REVIVE_LOG_<cluster>`` (``PopAckConstants.buildClusterReviveTopic``)."""
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic(topic: str, group: str) -> str:
    """``%RETRY%<group>_<topic>``: where POP redeliveries of ``topic`` go
    (``KeyBuilder.buildPopRetryTopic``, the V1 form)."""
    return f"{RETRY_PREFIX}{group}_{topic}"


def normal_topic(topic: str, group: str) -> str:
    """The topic a (possibly retry) topic redelivers (``KeyBuilder.parseNormalTopic``)."""
    prefix = f"{RETRY_PREFIX}{group}_"
    return topic[len(prefix) :] if topic.startswith(prefix) else topic


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``: where a message goes after the group's maximum of attempts."""
    return DLQ_PREFIX + group


CkKey = tuple[str, str, int, int, int, str]
"""Merge key of a checkpoint: (topic, group, queue id, start offset, pop time, broker)."""


def java_long(value: int) -> int:
    """``value`` as a Java ``long`` holds it: wrapped into [-2**63, 2**63).

    RocketMQ adds a pop time and an invisible time as longs, so a sum past 2**63 - 1
    wraps to a time long past and the message is revived at once (5.3.3 does so for an
    invisibleTime of 2**63 - 1). The sums here wrap the same way, so every number written
    into a record stays one a Java reader parses, and means what it means to RocketMQ.

    >>> java_long(2**63), java_long(-1)
    (-9223372036854775808, -1)
    """
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


@dataclass(frozen=True, slots=True)
class PopCheckPoint:
    """One popped batch of one queue (``org.apache.rocketmq.store.pop.PopCheckPoint``)."""

    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    diffs: tuple[int, ...]
    """The messages' queue offsets minus ``start_offset``, in pop order (``d``): a pop
    with a tag filter skips the offsets it filtered out, so a batch may have gaps."""
    broker_name: str
    revive_offset: int = 0
    """``ro``: carried as read; the service's own checkpoints leave it 0 (the record's
    revive-queue offset is kept by its in-flight entry, ``mqstore.pop.inflight``)."""
    bit_map: int = 0
    """``bm``: carried as read; the service's own checkpoints leave it 0 (acks are
    records of their own)."""

    @property
    def revive_time(self) -> int:
        """When the unacknowledged messages become visible again (ms; a Java sum,
        :func:`java_long`)."""
        return java_long(self.pop_time + self.invisible_time)

    @property
    def offsets(self) -> tuple[int, ...]:
        """The queue offsets of the batch, in pop order."""
        return tuple(self.start_offset + d for d in self.diffs)

    @property
    def key(self) -> CkKey:
        """The merge key an ack carries."""
        return merge_key(self)

    def to_json(self) -> bytes:
        """The revive-topic body."""
        return _dumps(
            {
                "so": self.start_offset, "pt": self.pop_time, "it": self.invisible_time,
                "rt": self.revive_time, "bm": self.bit_map, "n": len(self.diffs),
                "q": self.queue_id, "t": self.topic, "c": self.group,
                "ro": self.revive_offset, "d": list(self.diffs), "bn": self.broker_name,
            }
        )  # fmt: skip

    @classmethod
    def from_json(cls, body: bytes) -> PopCheckPoint:
        """Parse a checkpoint body; an old checkpoint without ``d`` covers ``n``
        consecutive offsets.

        Raises:
            CorruptRecordError: the body is not a checkpoint.
        """
        d = _loads(body, "checkpoint")
        try:
            diffs = tuple(int(x) for x in d["d"]) if d.get("d") else tuple(range(int(d["n"])))
            return cls(
                str(d["t"]), str(d["c"]), int(d["q"]), int(d["so"]), int(d["pt"]),
                int(d["it"]), diffs, str(d.get("bn", "")), int(d.get("ro", 0)),
                int(d.get("bm", 0)),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptRecordError(f"bad POP checkpoint {body[:200]!r}: {e}") from e


@dataclass(frozen=True, slots=True)
class AckMsg:
    """An acknowledgement of one (``ack``) or several (``bAck``) offsets of a batch."""

    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time: int
    broker_name: str
    ack_offsets: tuple[int, ...] = field(default=())

    @property
    def key(self) -> CkKey:
        """The merge key of the checkpoint acknowledged."""
        return merge_key(self)

    @property
    def tag(self) -> str:
        """``ack`` for one offset, ``bAck`` for several."""
        return ACK_TAG if len(self.ack_offsets) == 1 else BATCH_ACK_TAG

    def to_json(self) -> bytes:
        """The revive-topic body (``AckMsg`` or ``BatchAckMsg``)."""
        d: dict[str, Any] = {
            "so": self.start_offset, "c": self.group, "t": self.topic, "q": self.queue_id,
            "pt": self.pop_time, "bn": self.broker_name,
        }  # fmt: skip
        if len(self.ack_offsets) == 1:
            d["ao"] = self.ack_offsets[0]
        else:
            d["aol"] = list(self.ack_offsets)
        return _dumps(d)

    def unique_id(self) -> str:
        """The KEYS of the ack record (``genAckUniqueId``; ``genBatchAckUniqueId`` has
        the offset list as Java prints it and no broker name)."""
        if len(self.ack_offsets) == 1:
            parts: tuple[object, ...] = (
                self.topic,
                self.queue_id,
                self.ack_offsets[0],
                self.group,
                self.pop_time,
                self.broker_name,
                ACK_TAG,
            )
        else:
            listed = "[" + ", ".join(str(o) for o in self.ack_offsets) + "]"
            parts = (self.topic, self.queue_id, listed, self.group, self.pop_time, BATCH_ACK_TAG)
        return SPLIT.join(str(p) for p in parts)

    @classmethod
    def from_json(cls, body: bytes) -> AckMsg:
        """Parse an ``ack`` or ``bAck`` body.

        Raises:
            CorruptRecordError: the body is not an ack.
        """
        d = _loads(body, "ack")
        try:
            offsets = (int(d["ao"]),) if "ao" in d else tuple(int(x) for x in d["aol"])
            return cls(
                str(d["t"]), str(d["c"]), int(d["q"]), int(d["so"]), int(d["pt"]),
                str(d.get("bn", "")), offsets,
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptRecordError(f"bad POP ack {body[:200]!r}: {e}") from e


def ckey(topic: str, group: str, queue_id: int, start: int, pop_time: int, broker: str) -> CkKey:
    """The merge key (see :data:`CkKey`)."""
    return (topic, group, queue_id, start, pop_time, broker)


def merge_key(r: PopCheckPoint | AckMsg) -> CkKey:
    """The merge key of a checkpoint, or of the checkpoint an ack acknowledges."""
    return ckey(r.topic, r.group, r.queue_id, r.start_offset, r.pop_time, r.broker_name)


def ck_unique_id(ck: PopCheckPoint) -> str:
    """The KEYS of a checkpoint record (``PopMessageProcessor.genCkUniqueId``)."""
    parts = (ck.topic, ck.queue_id, ck.start_offset, ck.group, ck.pop_time, ck.broker_name,
             CK_TAG)  # fmt: skip
    return SPLIT.join(str(p) for p in parts)


def _dumps(d: dict[str, Any]) -> bytes:
    return json.dumps(d, separators=(",", ":")).encode()


def _loads(body: bytes, what: str) -> dict[str, Any]:
    try:
        d = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"bad POP {what} {body[:200]!r}: {e}") from e
    if not isinstance(d, dict):
        raise CorruptRecordError(f"bad POP {what} {body[:200]!r}: not an object")
    return d
