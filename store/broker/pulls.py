"""Pull requests and outcomes as the broker sees them, and the status-to-code mapping.

A pull is answered with a RocketMQ response code, never a :class:`GetStatus`: the
client only knows the four pull codes. The mapping (docs/store.md §3.2,
``PullMessageProcessor``):

==========================================  =========================================
GetStatus                                   response code
==========================================  =========================================
FOUND                                       SUCCESS (0)
MESSAGE_WAS_REMOVING, NO_MATCHED_MESSAGE    PULL_RETRY_IMMEDIATELY (20)
NO_MATCHED_LOGIC_QUEUE, NO_MESSAGE_IN_QUEUE PULL_OFFSET_MOVED (21) if the request
                                            offset != 0, else PULL_NOT_FOUND (19)
OFFSET_FOUND_NULL, OFFSET_OVERFLOW_ONE      PULL_NOT_FOUND (19)
OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL,    PULL_OFFSET_MOVED (21)
OFFSET_RESET
==========================================  =========================================

On a slave without ``offsetCheckInSlave``, PULL_OFFSET_MOVED becomes
PULL_RETRY_IMMEDIATELY (the slave may just be behind).

>>> response_code(GetStatus.NO_MESSAGE_IN_QUEUE, request_offset=0)
<ResponseCode.PULL_NOT_FOUND: 19>
>>> response_code(GetStatus.NO_MESSAGE_IN_QUEUE, request_offset=5)
<ResponseCode.PULL_OFFSET_MOVED: 21>
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mqstore.consumequeue.results import StoredMessage
from mqstore.remoting.codes import ResponseCode
from mqstore.status import GetStatus

_FIXED: dict[GetStatus, ResponseCode] = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_RESET: ResponseCode.PULL_OFFSET_MOVED,
}


def response_code(
    status: GetStatus, request_offset: int, *, slave_without_offset_check: bool = False
) -> ResponseCode:
    """The pull response code for a store status (the table above)."""
    code = _FIXED.get(status)
    if code is None:  # NO_MATCHED_LOGIC_QUEUE, NO_MESSAGE_IN_QUEUE
        moved = request_offset != 0
        code = ResponseCode.PULL_OFFSET_MOVED if moved else ResponseCode.PULL_NOT_FOUND
    if code is ResponseCode.PULL_OFFSET_MOVED and slave_without_offset_check:
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    return code


@dataclass(frozen=True, slots=True)
class PullRequest:
    """One PULL_MESSAGE as the broker receives it, transport-neutral.

    The fields a client asks with mean what they mean in its
    :class:`~mqstore.remoting.values.PullQuery`, but the queue is named as the request
    header names it: a topic and a queue id as sent, not a route's ``MessageQueue``
    (the header carries no broker name, and the broker itself judges the id against
    the topic's config, answering RocketMQ's SYSTEM_ERROR for an illegal one).
    ``commit_offset`` is the piggy-backed group offset (sysflag 0x1); ``suspend_ms``
    > 0 allows the broker to hold the request (sysflag 0x2 with
    ``suspendTimeoutMillis``). ``decoded`` asks for :class:`StoredMessage` objects
    (in-process callers) instead of raw record views (the TCP server); ``client_host``
    names the asker in remarks.
    """

    group: str
    topic: str
    queue_id: int
    offset: int
    max_count: int = 32
    expression: str = "*"
    commit_offset: int | None = None
    suspend_ms: int = 0
    decoded: bool = False
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class PullOutcome:
    """A pull's answer: the response code, the four headers, and the messages.

    ``buffers`` (raw pulls) are zero-copy views of the mapped CommitLog, one record
    each; concatenated they are the PULL_MESSAGE response body. They stay valid as
    long as they are referenced. ``messages`` is filled for decoded pulls instead.
    """

    code: ResponseCode
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int = 0
    buffers: tuple[memoryview, ...] = ()
    messages: tuple[StoredMessage, ...] = ()
    remark: str | None = None

    def body(self) -> bytes:
        """The raw records concatenated (one copy)."""
        return b"".join(self.buffers)


PullCallback = Callable[[PullOutcome], None]
"""Receives a pull's outcome exactly once, on the caller's thread (answered at once)
or on a broker thread (answered after being held)."""
