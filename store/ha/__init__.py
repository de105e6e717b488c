"""Master/slave HA replication (docs/protocol.md §2).

One job per module: :mod:`~mqstore.ha.protocol` is the sans-IO wire protocol (its public
names are re-exported here); :mod:`~mqstore.ha.transport` the sockets;
:mod:`~mqstore.ha.master` (``HAMaster``) serves slaves, with the SYNC_MASTER waits in
:mod:`~mqstore.ha.group_transfer`; :mod:`~mqstore.ha.slave` (``HASlave``) replicates, with
the divergence check in :mod:`~mqstore.ha.continuity`; :mod:`~mqstore.ha.service` decides
which of them a store runs. The services are imported from their modules, so importing
the protocol does not start or import any threading machinery.
"""

from __future__ import annotations

from mqstore.ha.protocol import (
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
