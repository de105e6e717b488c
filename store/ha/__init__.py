"""Master/slave HA replication: the sans-IO protocol (and, later, its transports).

The public names are those of :mod:`store.ha.protocol`, re-exported here.
"""

from __future__ import annotations

from store.ha.protocol import (
    MAX_TRANSFER,
    NEED_DATA,
    ConnectionClosed,
    Event,
    Heartbeat,
    LocalProtocolError,
    MasterConnection,
    NeedData,
    ProtocolError,
    RemoteProtocolError,
    ReportOffset,
    Role,
    SlaveConnection,
    State,
    Transfer,
    chunk,
)

__all__ = [
    "MAX_TRANSFER",
    "NEED_DATA",
    "ConnectionClosed",
    "Event",
    "Heartbeat",
    "LocalProtocolError",
    "MasterConnection",
    "NeedData",
    "ProtocolError",
    "RemoteProtocolError",
    "ReportOffset",
    "Role",
    "SlaveConnection",
    "State",
    "Transfer",
    "chunk",
]
