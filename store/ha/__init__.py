"""Master/slave HA replication (rocketmq-facts section 9).

One job per module: :mod:`~store.ha.protocol` is the sans-IO wire protocol (its public
names are re-exported here); :mod:`~store.ha.transport` the sockets;
:mod:`~store.ha.master` (``HAMaster``) serves slaves, with the SYNC_MASTER waits in
:mod:`~store.ha.group_transfer`; :mod:`~store.ha.slave` (``HASlave``) replicates, with
the divergence check in :mod:`~store.ha.continuity`; :mod:`~store.ha.service` decides
which of them a store runs. The services are imported from their modules, so importing
the protocol does not start or import any threading machinery.
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
