"""The master/slave HA replication protocol, sans-IO (RocketMQ's default HA, 4.9 and 5.x).

This module knows the bytes on the wire and the rules of the conversation. It never
touches a socket, a thread, a clock or a file: like h11, each endpoint is a state
machine fed with ``receive_data(bytes)``, drained with ``next_event()`` and asked to
``send(event) -> bytes``. Sockets, timers and the CommitLog belong to the transport.

Wire format
-----------
Plain TCP, both directions big-endian, no framing beyond what follows.

Slave -> master, a *report*: the slave's max physical offset, nothing else::

    off  size  field
    0    8     offset            signed long (REPORT_SIZE = 8)

Master -> slave, a *frame*: a header then ``size`` bytes of raw commitlog::

    off  size  field
    0    8     physical_offset   signed long: where the payload sits in the commitlog
    8    4     size              signed int: payload length; 0 makes it a heartbeat
    12   size  payload           bytes copied verbatim from one commitlog file

Worked example: ``ReportOffset(4096)`` is ``00 00 00 00 00 00 10 00``;
``Transfer(1024, b"hi")`` is ``00 00 00 00 00 00 04 00 | 00 00 00 02 | 68 69``;
``Heartbeat(1026)`` is ``00 00 00 00 00 00 04 02 | 00 00 00 00``.

Rules
-----
Rule 1. The slave speaks first. The master sends nothing before the slave's first
report; a slave refuses a frame that arrives before it has reported.

Rule 2. Reports are whole 8-byte units, non-negative and never decreasing on one
connection. The master consumes every complete report in its buffer at once and acts
on the *last* one (``slave_ack_offset``), as RocketMQ's ``ReadSocketService`` does;
the first report it acts on is ``slave_request_offset``. A slave never reports more
than it holds, and once frames flow a master refuses an ack beyond what it has sent.

Rule 3. The master chooses the first frame's offset once (``start_offset``): request
offset 0 starts at the master's last commitlog file (``max - max % file_size``), any
other request starts at itself. A request beyond the master's max offset means the
slave holds data the master does not: divergence, refused.

Rule 4. Frames are contiguous. Each starts where the previous one ended (RocketMQ's
``nextTransferFromWhere``, here ``next_transfer_offset``). A Transfer carries 1 to
``max_transfer`` (32 KiB) bytes and never crosses a commitlog file boundary. A
Heartbeat is a frame of size 0 at ``next_transfer_offset``.

Rule 5. The slave's end (``end_offset``, initialised from its own max physical offset)
must equal every frame's offset, heartbeats included (RocketMQ's ``dispatchReadRequest``
checks each header alike). A frame below the end means the slave holds data the master
does not (divergence); above it means bytes were lost (gap). An empty slave (end 0)
accepts any offset, stays empty after a heartbeat, and, when ``file_size`` is known,
takes its first Transfer only at a file boundary: RocketMQ appends at the write
position of the file that *contains* the offset, so any other start would corrupt.
A Transfer advances the end by its payload length.

Rule 6. Breaking a rule raises: :class:`LocalProtocolError` when we try to send it,
:class:`RemoteProtocolError` when the peer sent it. Either way the endpoint enters
``State.ERROR`` for good and the caller closes the socket; nothing is logged here.

Rule 7. ``receive_data(b"")`` means EOF: ``next_event()`` then returns
:class:`ConnectionClosed` between frames and raises ``RemoteProtocolError`` in one.

Rule 8 (our addition, :mod:`mqstore.ha.handshake`). A master configured with a
shared secret first sends a CHALLENGE and streams nothing, and counts no report as an
ack, until the slave answered it with the right PROOF; a wrong proof closes the
connection. Rule 1 then applies to the bytes after the handshake. Without a secret
there is no handshake (RocketMQ's protocol as is).

Theory of operation
-------------------
The states and the moves between them are one table, :data:`TRANSITIONS`, per role::

    master: CONNECTED -recv report-> REPORTED -start_offset-> STREAMING
    slave:  CONNECTED -send report-> REPORTED -recv frame->   STREAMING

A master transport accepts a socket, feeds reads into ``MasterConnection`` and drains
events; the first ``ReportOffset`` lets it call ``start_offset(commitlog max, file
size)``, after which it sends ``Transfer`` frames for every range :func:`chunk` yields
up to the commitlog's max offset, and a ``Heartbeat`` after 5 s without writing. Every
``ReportOffset`` is an ack for SYNC_MASTER waiters.

A slave transport builds ``SlaveConnection(max_offset=commitlog max)``, sends its
first report, then for each ``Transfer`` event appends ``payload`` at
``physical_offset`` and reports the new ``end_offset``; it reports every 5 s anyway.
The protocol object has advanced ``end_offset`` when it returned the event, so the
transport must append (or close) before reading on.

Endpoints are not thread-safe: one reader and one writer thread must share a lock.

Layout: this module is the facade and the documentation. The events, errors and
constants live in ``_events.py``, the states and the table in ``_state.py``, the two
endpoints in ``_connection.py``; every public name is re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterator

from mqstore.ha._connection import MasterConnection, SlaveConnection
from mqstore.ha._events import (
    HEARTBEAT_INTERVAL_MS,
    HOUSEKEEPING_INTERVAL_MS,
    MAX_OFFSET,
    MAX_TRANSFER,
    NEED_DATA,
    REPORT_SIZE,
    TRANSFER_HEADER_SIZE,
    ConnectionClosed,
    Event,
    Heartbeat,
    LocalProtocolError,
    NeedData,
    ProtocolError,
    RemoteProtocolError,
    ReportOffset,
    Transfer,
)
from mqstore.ha._state import TRANSITIONS, Action, Role, State
from mqstore.ha.handshake import (
    Challenge,
    HandshakeState,
    MasterHandshake,
    SlaveHandshake,
    proof_for,
)

__all__ = [
    "HEARTBEAT_INTERVAL_MS",
    "HOUSEKEEPING_INTERVAL_MS",
    "MAX_OFFSET",
    "MAX_TRANSFER",
    "NEED_DATA",
    "REPORT_SIZE",
    "TRANSFER_HEADER_SIZE",
    "TRANSITIONS",
    "Action",
    "Challenge",
    "ConnectionClosed",
    "Event",
    "HandshakeState",
    "Heartbeat",
    "LocalProtocolError",
    "MasterConnection",
    "MasterHandshake",
    "NeedData",
    "ProtocolError",
    "RemoteProtocolError",
    "ReportOffset",
    "Role",
    "SlaveConnection",
    "SlaveHandshake",
    "State",
    "Transfer",
    "chunk",
    "proof_for",
]


def chunk(
    start: int, end: int, file_size: int, max_transfer: int = MAX_TRANSFER
) -> Iterator[tuple[int, int]]:
    """Split the commitlog range ``[start, end)`` into frames: ``(offset, length)`` pairs.

    Each length is 1..``max_transfer`` and no pair crosses a multiple of ``file_size``
    (a frame's payload comes from one commitlog file); the pairs are contiguous and
    cover the range exactly, so an empty range yields nothing.

    >>> list(chunk(90, 130, file_size=100, max_transfer=25))
    [(90, 10), (100, 25), (125, 5)]

    Raises:
        ValueError: ``start`` is negative or after ``end``, or a size is not positive.
    """
    if not 0 <= start <= end or file_size <= 0 or max_transfer <= 0:
        raise ValueError(
            f"chunk needs 0 <= start <= end and positive sizes, got start={start} end={end} "
            f"file_size={file_size} max_transfer={max_transfer}"
        )
    offset = start
    while offset < end:
        length = min(end - offset, max_transfer, file_size - offset % file_size)
        yield offset, length
        offset += length
