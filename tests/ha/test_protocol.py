"""The sans-IO HA protocol: two endpoints wired in memory, no sockets, no sleeps."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.errors import StoreError
from mqstore.ha import protocol
from mqstore.ha.protocol import (
    MAX_OFFSET,
    MAX_TRANSFER,
    NEED_DATA,
    TRANSITIONS,
    ConnectionClosed,
    Heartbeat,
    LocalProtocolError,
    MasterConnection,
    ProtocolError,
    RemoteProtocolError,
    ReportOffset,
    Role,
    SlaveConnection,
    State,
    Transfer,
    chunk,
)
from tests.ha.helpers import (
    FILE_SIZE,
    ConnectionPair,
    deliver,
    drain,
    frame,
    streaming_slave,
    transfers,
)

# --- wire format -------------------------------------------------------------------------


def test_report_is_an_8_byte_big_endian_long() -> None:
    assert SlaveConnection(4096).send(ReportOffset(4096)) == bytes.fromhex("0000000000001000")


def test_transfer_is_offset_size_header_then_payload() -> None:
    pair = ConnectionPair(slave_max_offset=1024)
    pair.handshake(master_max_offset=2048)
    assert pair.master.send(Transfer(1024, b"hi")) == bytes.fromhex(
        "0000000000000400 00000002 6869"
    )


def test_heartbeat_is_a_size_zero_frame() -> None:
    pair = ConnectionPair(slave_max_offset=1026)
    pair.handshake(master_max_offset=2048)
    assert pair.master.send(Heartbeat(1026)) == bytes.fromhex("0000000000000402 00000000")


def test_protocol_errors_belong_to_the_store_hierarchy() -> None:
    assert issubclass(LocalProtocolError, ProtocolError)
    assert issubclass(RemoteProtocolError, ProtocolError)
    assert issubclass(ProtocolError, StoreError)


def test_docstring_examples_run() -> None:
    assert doctest.testmod(protocol, raise_on_error=True).failed == 0


# --- handshake and reports ---------------------------------------------------------------


def test_first_report_sets_request_and_ack_offsets() -> None:
    pair = ConnectionPair(slave_max_offset=512)
    assert pair.slave_sends(ReportOffset(512)) == [ReportOffset(512)]
    assert pair.master.slave_request_offset == 512
    assert pair.master.slave_ack_offset == 512
    assert pair.master.state is State.REPORTED
    assert pair.slave.state is State.REPORTED


def test_master_knows_nothing_before_the_first_report() -> None:
    master = MasterConnection()
    assert master.next_event() is NEED_DATA
    assert master.slave_request_offset is None
    assert master.slave_ack_offset is None
    assert master.state is State.CONNECTED


def test_partial_report_waits_for_its_remaining_bytes() -> None:
    master = MasterConnection()
    master.receive_data(bytes(5))
    assert master.next_event() is NEED_DATA
    master.receive_data(bytes(3))
    assert master.next_event() == ReportOffset(0)


def test_several_reports_in_one_read_last_wins() -> None:
    pair = ConnectionPair(slave_max_offset=300)
    pair.handshake(master_max_offset=300)
    pair.master_sends(*transfers(300, 700))
    got = pair.slave_sends(ReportOffset(400), ReportOffset(556), ReportOffset(700))
    assert got == [ReportOffset(700)]
    assert pair.master.slave_ack_offset == 700
    assert pair.master.slave_request_offset == 300


def test_first_batch_request_offset_is_its_last_report() -> None:
    master = MasterConnection()
    deliver(master, bytes(8) + (0).to_bytes(8, "big"))
    assert master.slave_request_offset == 0


def test_report_split_at_every_byte_boundary_gives_the_last_ack() -> None:
    wire = b"".join(n.to_bytes(8, "big") for n in (10, 20, 30))
    for cut in range(len(wire) + 1):
        master = MasterConnection()
        events = deliver(master, wire, [cut])
        assert events[-1] == ReportOffset(30), cut
        assert master.slave_ack_offset == 30


def test_negative_report_is_remote_error() -> None:
    master = MasterConnection()
    master.receive_data((-1).to_bytes(8, "big", signed=True))
    with pytest.raises(RemoteProtocolError, match="negative"):
        master.next_event()
    assert master.state is State.ERROR


def test_report_going_backwards_is_remote_error() -> None:
    master = MasterConnection()
    deliver(master, (100).to_bytes(8, "big"))
    master.receive_data((99).to_bytes(8, "big"))
    with pytest.raises(RemoteProtocolError, match="backwards"):
        master.next_event()


def test_ack_beyond_what_was_sent_is_remote_error() -> None:
    pair = ConnectionPair(slave_max_offset=100)
    pair.handshake(master_max_offset=500)
    pair.master.receive_data((101).to_bytes(8, "big"))
    with pytest.raises(RemoteProtocolError, match="beyond what this connection sent"):
        pair.master.next_event()


def test_slave_cannot_report_beyond_its_end() -> None:
    slave = SlaveConnection(100)
    with pytest.raises(LocalProtocolError, match="outside"):
        slave.send(ReportOffset(101))
    assert slave.state is State.ERROR


def test_slave_cannot_report_backwards() -> None:
    slave = SlaveConnection(100)
    slave.send(ReportOffset(100))
    with pytest.raises(LocalProtocolError, match="goes back"):
        slave.send(ReportOffset(50))


# --- where the master starts -------------------------------------------------------------


def test_empty_slave_starts_at_the_masters_last_file() -> None:
    pair = ConnectionPair(slave_max_offset=0)
    assert pair.handshake(master_max_offset=3 * FILE_SIZE + 77) == 3 * FILE_SIZE
    assert pair.master.next_transfer_offset == 3 * FILE_SIZE
    assert pair.master.state is State.STREAMING


def test_slave_with_data_starts_at_its_reported_offset() -> None:
    pair = ConnectionPair(slave_max_offset=1500)
    assert pair.handshake(master_max_offset=3 * FILE_SIZE) == 1500


def test_slave_ahead_of_master_is_diverging_remote_error() -> None:
    pair = ConnectionPair(slave_max_offset=2000)
    pair.slave_sends(ReportOffset(2000))
    with pytest.raises(RemoteProtocolError, match="diverging data"):
        pair.master.start_offset(1999, FILE_SIZE)
    assert pair.master.state is State.ERROR


def test_start_before_the_first_report_is_local_error() -> None:
    with pytest.raises(LocalProtocolError, match="CONNECTED"):
        MasterConnection().start_offset(0, FILE_SIZE)


def test_start_chosen_twice_is_local_error() -> None:
    pair = ConnectionPair()
    pair.handshake(master_max_offset=0)
    with pytest.raises(LocalProtocolError, match="STREAMING"):
        pair.master.start_offset(0, FILE_SIZE)


# --- chunking ----------------------------------------------------------------------------


def test_chunk_never_crosses_a_file_boundary() -> None:
    assert list(chunk(1000, 1100, file_size=1024, max_transfer=512)) == [(1000, 24), (1024, 76)]


def test_chunk_respects_the_32_kib_limit() -> None:
    ranges = list(chunk(0, 100_000, file_size=1 << 30))
    assert [length for _, length in ranges] == [MAX_TRANSFER] * 3 + [100_000 - 3 * MAX_TRANSFER]


def test_chunk_of_an_empty_range_is_empty() -> None:
    assert list(chunk(4096, 4096, file_size=1024)) == []


def test_chunk_rejects_an_inverted_range() -> None:
    with pytest.raises(ValueError, match="start <= end"):
        list(chunk(10, 5, file_size=1024))


@given(
    start=st.integers(0, 10_000),
    length=st.integers(0, 10_000),
    file_size=st.integers(1, 3000),
    max_transfer=st.integers(1, 5000),
)
def test_chunk_tiles_the_range_within_files_and_limit(
    start: int, length: int, file_size: int, max_transfer: int
) -> None:
    offset = start
    for chunk_offset, chunk_length in chunk(start, start + length, file_size, max_transfer):
        assert chunk_offset == offset
        assert 1 <= chunk_length <= max_transfer
        assert chunk_offset // file_size == (chunk_offset + chunk_length - 1) // file_size
        offset += chunk_length
    assert offset == start + length


# --- transfers ---------------------------------------------------------------------------


def test_transfer_reaches_the_slave_and_advances_its_end() -> None:
    pair = ConnectionPair(slave_max_offset=0)
    start = pair.handshake(master_max_offset=2 * FILE_SIZE + 300)
    sent = transfers(start, 2 * FILE_SIZE + 300)
    assert pair.master_sends(*sent) == sent
    assert pair.slave.end_offset == 2 * FILE_SIZE + 300
    assert pair.master.next_transfer_offset == 2 * FILE_SIZE + 300


def test_frames_split_at_every_byte_boundary_reassemble() -> None:
    events: list[Transfer | Heartbeat] = [*transfers(1000, 1100, max_transfer=60), Heartbeat(1100)]
    wire = b"".join(
        frame(e.physical_offset, len(e.payload), e.payload)
        if isinstance(e, Transfer)
        else frame(e.physical_offset, 0)
        for e in events
    )
    for cut in range(len(wire) + 1):
        assert deliver(streaming_slave(1000), wire, [cut]) == events, cut


def test_frames_fed_one_byte_at_a_time_reassemble() -> None:
    pair = ConnectionPair(slave_max_offset=1000)
    pair.handshake(master_max_offset=1500)
    sent = transfers(1000, 1500)
    wire = b"".join(pair.master.send(e) for e in sent)
    assert deliver(pair.slave, wire, range(len(wire))) == sent


def test_diverging_transfer_offset_is_remote_error() -> None:
    slave = streaming_slave(1000)
    slave.receive_data(frame(900, 4, b"abcd"))
    with pytest.raises(RemoteProtocolError, match="diverging data"):
        slave.next_event()
    assert slave.state is State.ERROR


def test_transfer_past_the_slave_end_is_a_gap() -> None:
    slave = streaming_slave(1000)
    slave.receive_data(frame(1004, 4))
    with pytest.raises(RemoteProtocolError, match="gap"):
        slave.next_event()


def test_mismatch_is_refused_from_the_header_before_the_payload() -> None:
    slave = streaming_slave(1000)
    slave.receive_data(frame(900, 200))
    with pytest.raises(RemoteProtocolError, match="diverging data"):
        slave.next_event()


def test_empty_slave_accepts_a_start_at_any_file() -> None:
    slave = streaming_slave(0)
    assert deliver(slave, frame(3 * FILE_SIZE, 2, b"xy")) == [Transfer(3 * FILE_SIZE, b"xy")]
    assert slave.end_offset == 3 * FILE_SIZE + 2


def test_empty_slave_refuses_a_first_transfer_inside_a_file() -> None:
    slave = streaming_slave(0)
    slave.receive_data(frame(FILE_SIZE + 8, 2, b"xy"))
    with pytest.raises(RemoteProtocolError, match="must start a commitlog file"):
        slave.next_event()


def test_received_transfer_crossing_a_file_is_remote_error() -> None:
    slave = streaming_slave(FILE_SIZE - 2)
    slave.receive_data(frame(FILE_SIZE - 2, 4, b"abcd"))
    with pytest.raises(RemoteProtocolError, match="crosses a commitlog file"):
        slave.next_event()


@pytest.mark.parametrize(
    ("offset", "size"),
    [(-1, 0), (0, -1), (0, MAX_TRANSFER + 1), (MAX_OFFSET, 1)],
    ids=["negative-offset", "negative-size", "oversize", "offset-overflow"],
)
def test_bad_frame_header_is_remote_error(offset: int, size: int) -> None:
    slave = SlaveConnection(0)
    slave.send(ReportOffset(0))
    slave.receive_data(frame(offset, size))
    with pytest.raises(RemoteProtocolError):
        slave.next_event()


def test_frame_before_the_slaves_first_report_is_remote_error() -> None:
    slave = SlaveConnection(0)
    slave.receive_data(frame(0, 0))
    with pytest.raises(RemoteProtocolError, match="CONNECTED"):
        slave.next_event()


def test_sending_an_oversize_transfer_is_local_error() -> None:
    pair = ConnectionPair(slave_max_offset=0, max_transfer=256)
    pair.handshake(master_max_offset=0)
    with pytest.raises(LocalProtocolError, match="exceeds 256"):
        pair.master.send(Transfer(0, bytes(257)))
    assert pair.master.state is State.ERROR


def test_sending_a_misplaced_transfer_is_local_error() -> None:
    pair = ConnectionPair(slave_max_offset=100)
    pair.handshake(master_max_offset=200)
    with pytest.raises(LocalProtocolError, match="misplaced Transfer"):
        pair.master.send(Transfer(101, b"x"))


def test_sending_a_transfer_across_a_file_is_local_error() -> None:
    pair = ConnectionPair(slave_max_offset=FILE_SIZE - 1)
    pair.handshake(master_max_offset=FILE_SIZE + 1)
    with pytest.raises(LocalProtocolError, match="crosses a commitlog file"):
        pair.master.send(Transfer(FILE_SIZE - 1, b"xy"))


def test_sending_an_empty_transfer_is_local_error() -> None:
    pair = ConnectionPair()
    pair.handshake(master_max_offset=0)
    with pytest.raises(LocalProtocolError, match="send Heartbeat"):
        pair.master.send(Transfer(0, b""))


def test_master_sending_before_the_first_report_is_local_error() -> None:
    with pytest.raises(LocalProtocolError, match="CONNECTED"):
        MasterConnection().send(Heartbeat(0))


def test_sending_the_wrong_direction_is_local_error() -> None:
    with pytest.raises(LocalProtocolError, match="cannot send"):
        SlaveConnection(0).send(Heartbeat(0))


def test_connection_stays_in_error_after_a_protocol_error() -> None:
    pair = ConnectionPair(slave_max_offset=100)
    pair.handshake(master_max_offset=200)
    with pytest.raises(LocalProtocolError):
        pair.master.send(Transfer(0, b"x"))
    with pytest.raises(LocalProtocolError, match="ERROR"):
        pair.master.send(Transfer(100, b"x"))
    with pytest.raises(RemoteProtocolError, match="ERROR"):
        pair.master.next_event()


# --- heartbeats --------------------------------------------------------------------------


def test_heartbeat_at_the_slave_end_is_accepted() -> None:
    pair = ConnectionPair(slave_max_offset=500)
    pair.handshake(master_max_offset=500)
    assert pair.master_sends(Heartbeat(500)) == [Heartbeat(500)]
    assert pair.slave.end_offset == 500
    assert pair.slave.state is State.STREAMING


def test_heartbeat_below_the_slave_end_is_divergence() -> None:
    slave = streaming_slave(500)
    slave.receive_data(frame(400, 0))
    with pytest.raises(RemoteProtocolError, match="slave has data the master does not"):
        slave.next_event()


def test_heartbeat_above_the_slave_end_is_a_gap() -> None:
    slave = streaming_slave(500)
    slave.receive_data(frame(600, 0))
    with pytest.raises(RemoteProtocolError, match="gap"):
        slave.next_event()


def test_heartbeat_to_an_empty_slave_leaves_it_empty() -> None:
    pair = ConnectionPair(slave_max_offset=0)
    start = pair.handshake(master_max_offset=FILE_SIZE + 10)
    assert pair.master_sends(Heartbeat(start)) == [Heartbeat(start)]
    assert pair.slave.end_offset == 0
    assert pair.master_sends(*transfers(start, start + 10)) == transfers(start, start + 10)


def test_master_heartbeat_must_carry_the_next_transfer_offset() -> None:
    pair = ConnectionPair(slave_max_offset=100)
    pair.handshake(master_max_offset=200)
    pair.master.send(Transfer(100, b"abc"))
    with pytest.raises(LocalProtocolError, match="misplaced Heartbeat"):
        pair.master.send(Heartbeat(100))


# --- end of stream -----------------------------------------------------------------------


def test_eof_between_frames_is_connection_closed() -> None:
    pair = ConnectionPair(slave_max_offset=0)
    pair.handshake(master_max_offset=0)
    pair.slave.receive_data(b"")
    assert drain(pair.slave) == [ConnectionClosed()]
    assert pair.slave.next_event() == ConnectionClosed()
    assert pair.slave.state is State.CLOSED


def test_eof_inside_a_frame_is_remote_error() -> None:
    slave = streaming_slave(0)
    slave.receive_data(frame(0, 10, b"abc"))
    slave.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="inside a message"):
        slave.next_event()


def test_data_after_eof_is_local_error() -> None:
    master = MasterConnection()
    master.receive_data(b"")
    with pytest.raises(LocalProtocolError, match="after EOF"):
        master.receive_data(b"x")


def test_slave_cannot_report_after_the_master_closed() -> None:
    slave = streaming_slave(0)
    slave.receive_data(b"")
    drain(slave)
    with pytest.raises(LocalProtocolError, match="CLOSED"):
        slave.send(ReportOffset(0))


def test_every_transition_leads_to_a_live_state() -> None:
    for role in Role:
        for (state, _action), following in TRANSITIONS[role].items():
            assert state not in (State.CLOSED, State.ERROR)
            assert following is not State.ERROR
