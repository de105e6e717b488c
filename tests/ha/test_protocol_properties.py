"""Properties of the sans-IO HA protocol: garbage in, streams rebuilt, interleavings."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from mqstore.ha.protocol import (
    MAX_TRANSFER,
    ConnectionClosed,
    Heartbeat,
    MasterConnection,
    ProtocolError,
    ReportOffset,
    SlaveConnection,
    State,
    Transfer,
)
from tests.ha.helpers import FILE_SIZE, LOG, ConnectionPair, deliver, drain, frame, transfers

_header = st.builds(
    frame,
    offset=st.one_of(st.integers(-2, 3 * FILE_SIZE), st.integers(-(2**63), 2**63 - 1)),
    size=st.one_of(st.integers(-2, 300), st.integers(-(2**31), 2**31 - 1)),
)
_wire_piece = st.one_of(st.binary(max_size=40), _header)


def _drain_garbage(conn: MasterConnection | SlaveConnection, data: list[bytes], eof: bool) -> None:
    """Feed ``data`` then maybe EOF; only events or ProtocolError may come out."""
    try:
        for piece in [*data, b""] if eof else data:
            conn.receive_data(piece)
            for event in drain(conn):
                assert isinstance(event, ReportOffset | Transfer | Heartbeat | ConnectionClosed)
    except ProtocolError:
        assert conn.state is State.ERROR


@given(data=st.lists(_wire_piece, max_size=12), eof=st.booleans())
def test_garbage_into_a_master_yields_only_events_or_protocol_errors(
    data: list[bytes], eof: bool
) -> None:
    _drain_garbage(MasterConnection(), data, eof)


@given(
    data=st.lists(_wire_piece, max_size=12),
    eof=st.booleans(),
    end=st.sampled_from([0, 1, FILE_SIZE, FILE_SIZE + 5, 2**63 - 1]),
    reported=st.booleans(),
    file_size=st.sampled_from([None, 1, FILE_SIZE]),
    max_transfer=st.sampled_from([1, 256, MAX_TRANSFER]),
)
def test_garbage_into_a_slave_yields_only_events_or_protocol_errors(
    data: list[bytes],
    eof: bool,
    end: int,
    reported: bool,
    file_size: int | None,
    max_transfer: int,
) -> None:
    slave = SlaveConnection(end, file_size=file_size, max_transfer=max_transfer)
    if reported:
        slave.send(ReportOffset(end))
    _drain_garbage(slave, data, eof)


@given(
    slave_files=st.integers(0, 3),
    master_extra=st.integers(0, FILE_SIZE - 1),
    max_transfer=st.integers(1, 700),
    cuts=st.lists(st.integers(0, 5000), max_size=20),
)
def test_replicated_stream_rebuilds_the_masters_bytes(
    slave_files: int, master_extra: int, max_transfer: int, cuts: list[int]
) -> None:
    slave_end = slave_files * FILE_SIZE
    master_max = min(slave_end + master_extra + FILE_SIZE, len(LOG))
    pair = ConnectionPair(slave_max_offset=slave_end, max_transfer=max_transfer)
    start = pair.handshake(master_max)
    wire = b"".join(pair.master.send(t) for t in transfers(start, master_max, max_transfer))
    received = deliver(pair.slave, wire, cuts)
    rebuilt = b"".join(e.payload for e in received if isinstance(e, Transfer))
    assert rebuilt == LOG[start:master_max]
    # an empty slave of a master whose max sits on a file boundary has nothing to fetch yet
    assert pair.slave.end_offset == (master_max if start < master_max else slave_end)
    ack = ReportOffset(pair.slave.end_offset)
    assert pair.slave_sends(ack) == [ack]


class ReplicationMachine(RuleBasedStateMachine):
    """Master and slave interleaving appends, frames, heartbeats and partial reads.

    The oracle is ``LOG`` itself: whatever the slave received must be the master's bytes
    from the chosen start on, and the master's ack never passes what it sent.
    """

    def __init__(self) -> None:
        super().__init__()
        self.pair = ConnectionPair()
        self.to_master = bytearray()
        self.to_slave = bytearray()
        self.received = bytearray()
        self.start: int | None = None
        self.slave_start = 0
        self.master_max = 0
        self.max_transfer = 1

    @initialize(
        slave_files=st.integers(0, 2),
        master_max=st.integers(0, 3 * FILE_SIZE),
        max_transfer=st.integers(1, 600),
    )
    def connect(self, slave_files: int, master_max: int, max_transfer: int) -> None:
        self.slave_start = slave_files * FILE_SIZE
        self.master_max = max(master_max, self.slave_start)
        self.max_transfer = max_transfer
        self.pair = ConnectionPair(slave_max_offset=self.slave_start, max_transfer=max_transfer)
        self.to_master += self.pair.slave.send(ReportOffset(self.slave_start))

    @rule(size=st.integers(1, 700))
    def producer_appends(self, size: int) -> None:
        self.master_max = min(self.master_max + size, len(LOG))

    @rule(size=st.integers(0, 20))
    def master_reads(self, size: int) -> None:
        data, self.to_master[:size] = bytes(self.to_master[:size]), b""
        for event in deliver(self.pair.master, data):
            assert isinstance(event, ReportOffset)
            if self.start is None:
                self.start = self.pair.master.start_offset(self.master_max, FILE_SIZE)

    @precondition(lambda self: self.start is not None)
    @rule()
    def master_pumps(self) -> None:
        begin = self.pair.master.next_transfer_offset
        assert begin is not None
        for transfer in transfers(begin, self.master_max, self.max_transfer):
            self.to_slave += self.pair.master.send(transfer)

    @precondition(lambda self: self.start is not None)
    @rule()
    def master_heartbeats(self) -> None:
        offset = self.pair.master.next_transfer_offset
        assert offset is not None
        self.to_slave += self.pair.master.send(Heartbeat(offset))

    @rule(size=st.integers(0, 900))
    def slave_reads(self, size: int) -> None:
        data, self.to_slave[:size] = bytes(self.to_slave[:size]), b""
        for event in deliver(self.pair.slave, data):
            if isinstance(event, Transfer):
                self.received += event.payload

    @rule()
    def slave_reports(self) -> None:
        self.to_master += self.pair.slave.send(ReportOffset(self.pair.slave.end_offset))

    @invariant()
    def slave_holds_the_masters_bytes(self) -> None:
        if self.received:
            assert self.start is not None
            assert self.received == LOG[self.start : self.start + len(self.received)]
            assert self.pair.slave.end_offset == self.start + len(self.received)
        else:
            assert self.pair.slave.end_offset == self.slave_start

    @invariant()
    def ack_never_passes_what_was_sent(self) -> None:
        ack, sent = self.pair.master.slave_ack_offset, self.pair.master.next_transfer_offset
        if ack is not None and sent is not None:
            assert ack <= sent


TestReplicationMachine = ReplicationMachine.TestCase
