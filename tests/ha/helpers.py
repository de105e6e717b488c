"""Two HA protocol endpoints wired together in memory (the role of h11's tests/helpers.py).

No sockets, no threads, no sleeps: bytes one endpoint's ``send`` returns are fed to the
other's ``receive_data`` (optionally cut into pieces) and its events drained.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from mqstore.ha.protocol import (
    NEED_DATA,
    ConnectionClosed,
    Event,
    MasterConnection,
    ReportOffset,
    SlaveConnection,
    Transfer,
    chunk,
)

FILE_SIZE = 1024
"""A small commitlog file size so tests cross file boundaries cheaply."""


def drain(conn: MasterConnection | SlaveConnection) -> list[Event]:
    """Every event ``conn`` can produce now, up to NEED_DATA or ConnectionClosed."""
    events: list[Event] = []
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            return events
        events.append(event)
        if isinstance(event, ConnectionClosed):
            return events


def pieces(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    """``data`` cut at the given positions (sorted, clamped, duplicates allowed)."""
    points = sorted({0, len(data), *(min(max(c, 0), len(data)) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def deliver(
    conn: MasterConnection | SlaveConnection, data: bytes, cuts: Sequence[int] = ()
) -> list[Event]:
    """Feed ``data`` to ``conn`` in pieces, draining events after each piece."""
    events: list[Event] = []
    for piece in pieces(data, cuts):
        conn.receive_data(piece)
        events += drain(conn)
    return events


class ConnectionPair:
    """A master and a slave endpoint joined by an in-memory, lossless, ordered pipe."""

    def __init__(
        self,
        *,
        slave_max_offset: int = 0,
        file_size: int = FILE_SIZE,
        max_transfer: int = 256,
    ) -> None:
        self.file_size = file_size
        self.master = MasterConnection(max_transfer=max_transfer)
        self.slave = SlaveConnection(
            slave_max_offset, file_size=file_size, max_transfer=max_transfer
        )

    def slave_sends(self, *events: Event, cuts: Sequence[int] = ()) -> list[Event]:
        """The slave sends ``events``; returns what the master received."""
        data = b"".join(self.slave.send(e) for e in events)
        return deliver(self.master, data, cuts)

    def master_sends(self, *events: Event, cuts: Sequence[int] = ()) -> list[Event]:
        """The master sends ``events``; returns what the slave received."""
        data = b"".join(self.master.send(e) for e in events)
        return deliver(self.slave, data, cuts)

    def handshake(self, master_max_offset: int) -> int:
        """First report crosses, the master picks the start; returns it."""
        first = ReportOffset(self.slave.end_offset)
        assert self.slave_sends(first) == [first]
        return self.master.start_offset(master_max_offset, self.file_size)


LOG = bytes(i % 251 for i in range(4 * FILE_SIZE))
"""The master's commitlog in these tests: four small files of recognisable bytes."""


def transfers(start: int, end: int, max_transfer: int = 256) -> list[Transfer]:
    """The frames a master sends for ``LOG[start:end]``."""
    return [
        Transfer(offset, LOG[offset : offset + length])
        for offset, length in chunk(start, end, FILE_SIZE, max_transfer)
    ]


def frame(offset: int, size: int, payload: bytes = b"") -> bytes:
    """Raw frame bytes, bypassing the master's send-side checks."""
    return offset.to_bytes(8, "big", signed=True) + size.to_bytes(4, "big", signed=True) + payload


def streaming_slave(end: int = 0, **kwargs: int) -> SlaveConnection:
    """A slave that has sent its first report and waits for frames."""
    slave = SlaveConnection(end, file_size=FILE_SIZE, **kwargs)
    slave.send(ReportOffset(end))
    return slave
