"""FIFO (orderly) POP: one in-flight batch per (topic, group, queue), RocketMQ's way.

RocketMQ's ``ConsumerOrderInfoManager`` keeps, per ``topic@group`` and queue, the
batch an orderly pop handed out; while any message of it is unacknowledged and
invisible, the queue gives that group nothing else, so a later message of a message
group (which producers route to one queue) is never delivered while an earlier one is
in flight, whichever consumer holds it. When the batch's invisible time runs out, the
unacknowledged messages are delivered again, in order, with their attempt counted.
The group's consumer offset moves only when the whole batch is acknowledged (no
checkpoint goes to the revive topic: the order info is the state).

Here the batch has one deadline (``pt + it``); changing the invisible time of any of
its messages moves it. The table is plain data under the POP service's queue locks;
it is persisted in the POP state file (``mqstore.pop.state``) with the field names
``pt`` pop time, ``it`` invisible time, ``o`` offsets, ``oc`` attempts per offset,
``cm`` acknowledged bit map.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mqstore.pop.records import java_long


@dataclass(slots=True)
class OrderInfo:
    """The in-flight batch of one queue for one group."""

    pop_time: int
    invisible_time: int
    offsets: list[int]
    attempts: list[int]
    acked: int = 0
    """Bit i set: ``offsets[i]`` acknowledged."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def deadline(self) -> int:
        """When the unacknowledged messages may be delivered again (ms)."""
        return java_long(self.pop_time + self.invisible_time)

    def done(self) -> bool:
        """Every message of the batch acknowledged."""
        return self.acked == (1 << len(self.offsets)) - 1

    def unacked(self) -> list[tuple[int, int]]:
        """(offset, attempts so far) of the unacknowledged messages, in order."""
        return [
            (o, a)
            for i, (o, a) in enumerate(zip(self.offsets, self.attempts, strict=True))
            if not self.acked & (1 << i)
        ]

    def ack(self, offset: int) -> bool:
        """Mark ``offset`` acknowledged; False if it is not in the batch or already was."""
        try:
            i = self.offsets.index(offset)
        except ValueError:
            return False
        if self.acked & (1 << i):
            return False
        self.acked |= 1 << i
        return True

    def next_offset(self) -> int:
        """The consumer offset once the batch is done: one past its last message."""
        return self.offsets[-1] + 1

    def to_json(self) -> dict[str, Any]:
        """The ``orderInfoTable`` entry."""
        return {"pt": self.pop_time, "it": self.invisible_time, "o": self.offsets,
                "oc": self.attempts, "cm": self.acked}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OrderInfo:
        """Parse an ``orderInfoTable`` entry."""
        return cls(
            int(d["pt"]), int(d["it"]), [int(x) for x in d["o"]],
            [int(x) for x in d["oc"]], int(d.get("cm", 0)),
        )  # fmt: skip
