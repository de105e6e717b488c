"""HA connection states and the transition table: which move is legal when.

Documented with the rules in :mod:`mqstore.ha.protocol`; import these names from there.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final


class Role(enum.Enum):
    """Which end of the replication connection an endpoint is."""

    MASTER = "MASTER"
    SLAVE = "SLAVE"


class State(enum.Enum):
    """Where a connection is in the conversation (see the module's Theory of operation)."""

    CONNECTED = "CONNECTED"
    """Nothing has crossed the wire yet."""
    REPORTED = "REPORTED"
    """The slave's first report crossed; the master has not chosen where to start."""
    STREAMING = "STREAMING"
    """Master: the start is chosen and frames may flow. Slave: a frame has arrived."""
    CLOSED = "CLOSED"
    """The peer closed its side on a frame boundary."""
    ERROR = "ERROR"
    """A ProtocolError was raised; every later call raises too."""


class Action(enum.Enum):
    """Something that moves a connection: a sent or received event, or choosing the start."""

    SEND_REPORT = "send ReportOffset"
    RECEIVE_REPORT = "receive ReportOffset"
    START = "choose the start offset"
    SEND_TRANSFER = "send Transfer"
    RECEIVE_TRANSFER = "receive Transfer"
    SEND_HEARTBEAT = "send Heartbeat"
    RECEIVE_HEARTBEAT = "receive Heartbeat"
    RECEIVE_EOF = "receive end of stream"


_S = State
_A = Action
TRANSITIONS: Final[Mapping[Role, Mapping[tuple[State, Action], State]]] = {
    Role.MASTER: {
        (_S.CONNECTED, _A.RECEIVE_REPORT): _S.REPORTED,
        (_S.REPORTED, _A.RECEIVE_REPORT): _S.REPORTED,
        (_S.REPORTED, _A.START): _S.STREAMING,
        (_S.STREAMING, _A.RECEIVE_REPORT): _S.STREAMING,
        (_S.STREAMING, _A.SEND_TRANSFER): _S.STREAMING,
        (_S.STREAMING, _A.SEND_HEARTBEAT): _S.STREAMING,
        (_S.CONNECTED, _A.RECEIVE_EOF): _S.CLOSED,
        (_S.REPORTED, _A.RECEIVE_EOF): _S.CLOSED,
        (_S.STREAMING, _A.RECEIVE_EOF): _S.CLOSED,
    },
    Role.SLAVE: {
        (_S.CONNECTED, _A.SEND_REPORT): _S.REPORTED,
        (_S.REPORTED, _A.SEND_REPORT): _S.REPORTED,
        (_S.REPORTED, _A.RECEIVE_TRANSFER): _S.STREAMING,
        (_S.REPORTED, _A.RECEIVE_HEARTBEAT): _S.STREAMING,
        (_S.STREAMING, _A.SEND_REPORT): _S.STREAMING,
        (_S.STREAMING, _A.RECEIVE_TRANSFER): _S.STREAMING,
        (_S.STREAMING, _A.RECEIVE_HEARTBEAT): _S.STREAMING,
        (_S.CONNECTED, _A.RECEIVE_EOF): _S.CLOSED,
        (_S.REPORTED, _A.RECEIVE_EOF): _S.CLOSED,
        (_S.STREAMING, _A.RECEIVE_EOF): _S.CLOSED,
    },
}
"""Every legal (state, action) -> next state, per role. Anything absent is a ProtocolError."""
