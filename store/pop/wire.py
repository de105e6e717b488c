"""The POP_MESSAGE response header, both sides: the broker writes it, the client builds
each message's receipt handle from it (RocketMQ ``MQClientAPIImpl.processPopResponse``).

Header fields (``PopMessageResponseHeader``): ``popTime``, ``invisibleTime``,
``reviveQid`` (the same for every message of a response), ``restNum``, and

- ``startOffsetInfo``: ``<retry flag> <queue id> <checkpoint start offset>`` per queue
  read, joined by ``;`` (``ExtraInfoUtil.buildStartOffsetInfo``);
- ``msgOffsetInfo``: ``<retry flag> <queue id> <offset>,<offset>,...`` per queue
  (``ExtraInfoUtil.buildMsgOffsetInfo``);
- ``orderCountInfo`` (ours in this form): ``<retry flag> <queue id> <offset>
  <delivery attempt>`` per message of a FIFO pop, whose records do not carry the
  attempt (a FIFO redelivery is the original record, not a retry copy);
- ``brokerName`` (ours): the broker name the handles must carry.

A message's handle is then ``buildExtraInfo(start offset of its (flag, queue), popTime,
invisibleTime, reviveQid, topic, brokerName, queueId) + " " + its queue offset``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from mqstore.pop.receipt import ReceiptHandle, retry_flag
from mqstore.pop.records import POP_ORDER_REVIVE_QUEUE

if TYPE_CHECKING:
    from mqstore.consumequeue.results import StoredMessage
    from mqstore.pop.service import PopResult


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def java_long_text(text: str | None) -> int | None:
    """``text`` parsed as Java's ``Long.parseLong`` parses it; None where it throws
    (missing, not a signed decimal, or outside the 64-bit range).

    >>> java_long_text("-100000"), java_long_text("+7"), java_long_text("1e3")
    (-100000, 7, None)
    >>> java_long_text(str(2**63)) is None
    True
    """
    if not text or text.strip() != text or "_" in text:
        return None
    try:
        value = int(text, 10)
    except ValueError:
        return None
    return value if INT64_MIN <= value <= INT64_MAX else None


def pop_invisible_time(ext: Mapping[str, str]) -> int:
    """The ``invisibleTime`` of a POP_MESSAGE header, as RocketMQ 5.3.3 decodes it: the
    field is a primitive ``long``, and a value its decoder cannot parse (missing, not a
    number, beyond the 64-bit range) is logged and leaves it 0, so the pop goes on with
    an invisible time of 0 (the messages come back at once). Any long is taken as it is,
    negative too (docs/pop.md §10)."""
    value = java_long_text(ext.get("invisibleTime"))
    return 0 if value is None else value


def parse_handle(text: str) -> ReceiptHandle:
    """:meth:`ReceiptHandle.parse`."""
    return ReceiptHandle.parse(text)


def response_header(r: PopResult, broker_name: str) -> dict[str, str]:
    """The POP_MESSAGE response header of ``r``."""
    starts: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], list[str]] = {}
    counts: list[str] = []
    for m in r.messages:
        h = ReceiptHandle.parse(m.receipt_handle)
        key = (h.retry, h.queue_id)
        starts.setdefault(key, h.ck_start_offset)
        offsets.setdefault(key, []).append(str(h.queue_offset))
        if r.revive_qid == POP_ORDER_REVIVE_QUEUE:
            counts.append(f"{h.retry} {h.queue_id} {h.queue_offset} {m.delivery_attempt}")
    header = {
        "popTime": str(r.pop_time),
        "invisibleTime": str(r.invisible_time),
        "reviveQid": str(r.revive_qid),
        "restNum": str(r.rest_num),
        "startOffsetInfo": ";".join(f"{f} {q} {s}" for (f, q), s in starts.items()),
        "msgOffsetInfo": ";".join(f"{f} {q} {','.join(o)}" for (f, q), o in offsets.items()),
        "brokerName": broker_name,
    }
    if counts:
        header["orderCountInfo"] = ";".join(counts)
    return header


def receipts(
    messages: Sequence[StoredMessage], header: Mapping[str, str], broker_name: str = ""
) -> list[tuple[str, int]]:
    """(receipt handle, delivery attempt) of each message of a POP_MESSAGE response.

    Raises:
        ValueError: the header does not name a start offset for a message's queue.
    """
    pop_time, invisible = int(header["popTime"]), int(header["invisibleTime"])
    revive_qid = int(header["reviveQid"])
    broker = header.get("brokerName") or broker_name
    starts: dict[tuple[str, int], int] = {}
    for item in filter(None, header.get("startOffsetInfo", "").split(";")):
        f, q, s = item.split(" ")
        starts[(f, int(q))] = int(s)
    attempts: dict[tuple[str, int, int], int] = {}
    for item in filter(None, header.get("orderCountInfo", "").split(";")):
        f, q, o, n = item.split(" ")
        attempts[(f, int(q), int(o))] = int(n)
    out: list[tuple[str, int]] = []
    for m in messages:
        flag = retry_flag(m.topic)
        start = starts.get((flag, m.queue_id))
        if start is None:
            raise ValueError(f"no start offset for queue {flag} {m.queue_id} in the header")
        h = ReceiptHandle(start, pop_time, invisible, revive_qid, flag, broker, m.queue_id,
                          m.queue_offset)  # fmt: skip
        attempt = attempts.get((flag, m.queue_id, m.queue_offset), m.reconsume_times + 1)
        out.append((h.encode(), attempt))
    return out
