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
from mqstore.remoting.values import PullQuery
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
    """One PULL_MESSAGE as the broker receives it, transport-neutral: the client's
    :class:`~mqstore.remoting.values.PullQuery` and what the transport adds.

    The broker reads the query's queue by topic and queue id only: its broker name is
    the one the transport filled in (the TCP header carries none), and the queue id is
    as the client sent it, judged by the broker against the topic's config (RocketMQ's
    SYSTEM_ERROR for an illegal one), not by a route.
    """

    query: PullQuery
    decoded: bool = False
    """Answer with :class:`StoredMessage` objects (in-process callers) instead of raw
    record views (the TCP server)."""
    client_host: str = ""
    """The asker's address, named in remarks."""


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
