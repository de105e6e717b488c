"""HA wire constants, errors and events: the vocabulary of :mod:`mqstore.ha.protocol`.

The byte layouts and the rules that use them are documented once, in the
:mod:`mqstore.ha.protocol` docstring; import these names from there.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from mqstore.errors import StoreError

REPORT_STRUCT: Final = struct.Struct(">q")
HEADER_STRUCT: Final = struct.Struct(">qi")
REPORT_SIZE: Final = REPORT_STRUCT.size
"""Bytes in a slave report (RocketMQ ``REPORT_HEADER_SIZE``)."""
TRANSFER_HEADER_SIZE: Final = HEADER_STRUCT.size
"""Bytes in a frame header (RocketMQ ``TRANSFER_HEADER_SIZE``)."""
MAX_TRANSFER: Final = 32 * 1024
"""Largest payload per frame (RocketMQ ``haTransferBatchSize``)."""
MAX_OFFSET: Final = (1 << 63) - 1
"""Largest physical offset a signed long carries."""
HEARTBEAT_INTERVAL_MS: Final = 5_000
"""``haSendHeartbeatInterval``: idle time before a report or heartbeat (for transports)."""
HOUSEKEEPING_INTERVAL_MS: Final = 20_000
"""``haHousekeepingInterval``: read silence after which either side closes (for transports)."""


class ProtocolError(StoreError):
    """A rule of the HA protocol was broken; the connection is unusable and must close."""


class LocalProtocolError(ProtocolError):
    """We tried to send something the protocol forbids (a bug in our own transport)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids (diverging data, garbage, bad size)."""


@dataclass(frozen=True, slots=True)
class ReportOffset:
    """Slave -> master: the slave holds the commitlog up to ``offset`` (exclusive)."""

    offset: int


@dataclass(frozen=True, slots=True)
class Transfer:
    """Master -> slave: ``payload`` is the master's commitlog from ``physical_offset`` on."""

    physical_offset: int
    payload: bytes = field(repr=False)

    @property
    def end_offset(self) -> int:
        """The physical offset just past the payload."""
        return self.physical_offset + len(self.payload)

    def __repr__(self) -> str:
        return f"Transfer(physical_offset={self.physical_offset}, size={len(self.payload)})"


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Master -> slave, when idle: a size-0 frame at the master's next transfer offset."""

    physical_offset: int


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The peer closed its side (``receive_data(b"")``) on a frame boundary."""


Event: TypeAlias = ReportOffset | Transfer | Heartbeat | ConnectionClosed


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = _Sentinel.NEED_DATA
"""Returned by ``next_event()`` when the buffer holds no complete event yet."""
NeedData: TypeAlias = Literal[_Sentinel.NEED_DATA]
