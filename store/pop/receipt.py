"""Receipt handles: RocketMQ's ``ExtraInfoUtil`` string, what a popped message carries.

A handle is eight fields joined by single spaces (``MessageConst.KEY_SEPARATOR``)::

    <ck start offset> <pop time ms> <invisible time ms> <revive queue id>
    <retry flag> <broker name> <queue id> <message queue offset>

The retry flag (:class:`RetryFlag`) says which topic the message was read from. The
revive queue id is ``999`` (``KeyBuilder.POP_ORDER_REVIVE_QUEUE``) for a FIFO pop. Start
offset and pop time name the checkpoint the message belongs to; an ack or a change of
invisible time quotes them, so a handle made stale by a later pop or change is
recognised.

>>> h = ReceiptHandle(7, 1000, 30000, 3, RetryFlag.NORMAL, "broker-a", 1, 9)
>>> h.encode()
'7 1000 30000 3 0 broker-a 1 9'
>>> ReceiptHandle.parse(h.encode()) == h
True
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mqstore.errors import InvalidReceiptHandleError
from mqstore.pop.records import RETRY_PREFIX, java_long

_SEP = " "


class RetryFlag(enum.StrEnum):
    """A handle's retry field: which topic the message was read from
    (``ExtraInfoUtil.getRetry``). The value is the field's text in the handle."""

    NORMAL = "0"
    """The topic itself."""
    RETRY = "1"
    """The POP retry topic ``%RETRY%<group>_<topic>``."""
    RETRY_V2 = "2"
    """The V2 retry topic ``%RETRY%<group>+<topic>``: parsed, never produced."""


def retry_flag(topic: str) -> RetryFlag:
    """``RETRY`` for a topic under ``%RETRY%``, else ``NORMAL`` (``ExtraInfoUtil.getRetry``)."""
    return RetryFlag.RETRY if topic.startswith(RETRY_PREFIX) else RetryFlag.NORMAL


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """The parsed ``ExtraInfoUtil`` fields of one popped message."""

    ck_start_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: RetryFlag
    broker_name: str
    queue_id: int
    queue_offset: int

    def encode(self) -> str:
        """The handle as RocketMQ writes it (``buildExtraInfo`` with the message offset)."""
        return _SEP.join(
            str(x)
            for x in (
                self.ck_start_offset, self.pop_time, self.invisible_time, self.revive_qid,
                self.retry, self.broker_name, self.queue_id, self.queue_offset,
            )
        )  # fmt: skip

    @property
    def deadline(self) -> int:
        """When the message becomes visible again unless acknowledged (ms)."""
        return java_long(self.pop_time + self.invisible_time)

    def real_topic(self, topic: str, group: str) -> str:
        """The topic the message was read from (``ExtraInfoUtil.getRealTopic``)."""
        if self.retry == RetryFlag.NORMAL:
            return topic
        sep = "_" if self.retry == RetryFlag.RETRY else "+"
        return f"{RETRY_PREFIX}{group}{sep}{topic}"

    @classmethod
    def parse(cls, text: str) -> ReceiptHandle:
        """Parse a handle.

        Raises:
            InvalidReceiptHandleError: not eight fields, or a number field or the
                retry flag is not one.
        """
        parts = text.split(_SEP) if isinstance(text, str) else []
        if len(parts) != 8:
            raise InvalidReceiptHandleError(f"receipt handle {text!r}: not 8 fields")
        try:
            return cls(
                int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), RetryFlag(parts[4]),
                parts[5], int(parts[6]), int(parts[7]),
            )  # fmt: skip
        except ValueError as e:
            raise InvalidReceiptHandleError(f"receipt handle {text!r}: {e}") from e
