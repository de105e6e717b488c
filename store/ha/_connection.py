"""HA endpoints: :class:`MasterConnection` and :class:`SlaveConnection`, sans-IO.

They enforce the Rules of :mod:`mqstore.ha.protocol` (which documents them and
re-exports these classes): no sockets, threads, clocks or files here.
"""

from __future__ import annotations

import struct

from mqstore.ha._events import (
    HEADER_STRUCT,
    MAX_OFFSET,
    MAX_TRANSFER,
    NEED_DATA,
    REPORT_SIZE,
    REPORT_STRUCT,
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


class _ReceiveBuffer:
    """Bytes received but not yet parsed; consumed from the front without quadratic copies."""

    __slots__ = ("_data", "_start")

    def __init__(self) -> None:
        self._data = bytearray()
        self._start = 0

    def __len__(self) -> int:
        return len(self._data) - self._start

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._start and self._start * 2 >= len(self._data):
            del self._data[: self._start]
            self._start = 0
        self._data += data

    def unpack(self, codec: struct.Struct, skip: int = 0) -> tuple[int, ...]:
        """Decode ``codec`` at ``skip`` bytes past the front, consuming nothing."""
        return codec.unpack_from(self._data, self._start + skip)

    def take(self, size: int) -> bytes:
        """Consume and return ``size`` bytes (the caller checked they are there)."""
        with memoryview(self._data) as view:  # one copy, and the export ends here
            out = bytes(view[self._start : self._start + size])
        self._start += size
        return out


class _Endpoint:
    """What both roles share: the receive buffer, EOF, state and its transitions."""

    role: Role

    def __init__(self) -> None:
        self._buffer = _ReceiveBuffer()
        self._eof = False
        self._state = State.CONNECTED

    @property
    def state(self) -> State:
        """The current :class:`State`."""
        return self._state

    @property
    def buffered(self) -> int:
        """Bytes received and not yet decoded: the start of a message still arriving."""
        return len(self._buffer)

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer bytes read from the socket; ``b""`` means the peer closed (EOF).

        Raises:
            LocalProtocolError: data arrives after EOF was already signalled.
        """
        if self._eof:
            raise self._fail(LocalProtocolError("receive_data after EOF (b'') was fed"))
        if data:
            self._buffer.feed(data)
        else:
            self._eof = True

    def next_event(self) -> Event | NeedData:
        """The next complete event from the buffer, or ``NEED_DATA``.

        After EOF on a frame boundary it returns :class:`ConnectionClosed` for ever.

        Raises:
            RemoteProtocolError: the peer broke a rule (module Rules 1-7); the state is ERROR.
        """
        if self._state is State.ERROR:
            raise RemoteProtocolError(f"{self.role.value} connection is in state ERROR")
        if self._state is State.CLOSED:
            return ConnectionClosed()
        try:
            event = self._parse()
        except ProtocolError as exc:
            raise self._fail(exc) from None
        if event is not None:
            return event
        if not self._eof:
            return NEED_DATA
        if self._buffer:
            raise self._fail(
                RemoteProtocolError(
                    f"peer closed the connection inside a message: {len(self._buffer)} "
                    "bytes of an incomplete report or frame are pending"
                )
            )
        self._transition(Action.RECEIVE_EOF, remote=True)
        return ConnectionClosed()

    def _parse(self) -> Event | None:
        raise NotImplementedError

    def _check_sendable(self) -> None:
        if self._state is State.ERROR:
            raise LocalProtocolError(f"{self.role.value} connection is in state ERROR")

    def _allowed(self, action: Action, *, remote: bool) -> State:
        """The state ``action`` leads to, or raise (the caller marks the ERROR state)."""
        following = TRANSITIONS[self.role].get((self._state, action))
        if following is None:
            error = RemoteProtocolError if remote else LocalProtocolError
            raise error(f"{self.role.value} cannot {action.value} in state {self._state.value}")
        return following

    def _transition(self, action: Action, *, remote: bool) -> None:
        """Move along :data:`TRANSITIONS` or raise (the caller marks the ERROR state)."""
        self._state = self._allowed(action, remote=remote)

    def _fail(self, exc: ProtocolError) -> ProtocolError:
        self._state = State.ERROR
        return exc


class MasterConnection(_Endpoint):
    """The master's end of one slave connection: receives reports, sends frames.

    Args:
        max_transfer: the largest payload it may send (``haTransferBatchSize``).

    Not thread-safe; a transport with a reader and a writer thread shares one lock.
    """

    role = Role.MASTER

    def __init__(self, *, max_transfer: int = MAX_TRANSFER) -> None:
        if max_transfer <= 0:
            raise ValueError(f"max_transfer must be positive, got {max_transfer}")
        super().__init__()
        self._max_transfer = max_transfer
        self._request: int | None = None
        self._ack: int | None = None
        self._next: int | None = None
        self._file_size: int | None = None

    @property
    def slave_request_offset(self) -> int | None:
        """Where the slave asked to start (its first report acted on); None before it."""
        return self._request

    @property
    def slave_ack_offset(self) -> int | None:
        """The slave's latest reported max offset (its ack); None before the first report."""
        return self._ack

    @property
    def next_transfer_offset(self) -> int | None:
        """Where the next frame must start; None until :meth:`start_offset` was called."""
        return self._next

    def start_offset(self, master_max_offset: int, file_size: int) -> int:
        """Choose, record and return where this slave's stream starts (module Rule 3).

        ``file_size`` is the commitlog file size; later Transfers must not cross its
        multiples. Call once, after the first ``ReportOffset`` event.

        Raises:
            ValueError: a negative max offset or a non-positive file size.
            LocalProtocolError: no report yet, or the start was already chosen.
            RemoteProtocolError: the slave asked for more than the master holds.
        """
        if master_max_offset < 0 or file_size <= 0:
            raise ValueError(
                f"need master_max_offset >= 0 and file_size > 0, got {master_max_offset}, "
                f"{file_size}"
            )
        self._check_sendable()
        try:
            self._transition(Action.START, remote=False)
        except ProtocolError as exc:
            raise self._fail(exc) from None
        assert self._request is not None
        if self._request > master_max_offset:
            raise self._fail(
                RemoteProtocolError(
                    f"diverging data: the slave reports max offset {self._request} beyond the "
                    f"master's {master_max_offset}; it holds data the master does not"
                )
            )
        start = self._request or master_max_offset - master_max_offset % file_size
        self._next, self._file_size = start, file_size
        return start

    def send(self, event: Event) -> bytes:
        """Encode a Transfer or Heartbeat for the wire (module Rule 4).

        Raises:
            LocalProtocolError: a wrong-direction event, no start chosen yet, a frame not
                at ``next_transfer_offset``, an empty, oversize or file-crossing payload.
        """
        self._check_sendable()
        try:
            return self._encode(event)
        except ProtocolError as exc:
            raise self._fail(exc) from None

    def _encode(self, event: Event) -> bytes:
        if isinstance(event, Transfer):
            self._transition(Action.SEND_TRANSFER, remote=False)
            if not event.payload:
                raise LocalProtocolError(
                    f"empty Transfer at {event.physical_offset}: send Heartbeat for a size-0 frame"
                )
            self._check_frame(event.physical_offset, len(event.payload))
            self._next = event.end_offset
            return HEADER_STRUCT.pack(event.physical_offset, len(event.payload)) + event.payload
        if isinstance(event, Heartbeat):
            self._transition(Action.SEND_HEARTBEAT, remote=False)
            self._check_frame(event.physical_offset, 0)
            return HEADER_STRUCT.pack(event.physical_offset, 0)
        raise LocalProtocolError(f"a master cannot send {event!r}")

    def _check_frame(self, offset: int, size: int) -> None:
        assert self._next is not None and self._file_size is not None
        kind = "Transfer" if size else "Heartbeat"
        if offset != self._next:
            raise LocalProtocolError(
                f"misplaced {kind}: offset {offset} but the previous frame ended at {self._next}"
            )
        if size > self._max_transfer:
            raise LocalProtocolError(f"Transfer of {size} bytes exceeds {self._max_transfer}")
        if size and offset // self._file_size != (offset + size - 1) // self._file_size:
            raise LocalProtocolError(
                f"Transfer [{offset}, {offset + size}) crosses a commitlog file boundary "
                f"(file size {self._file_size})"
            )

    def _parse(self) -> Event | None:
        count = len(self._buffer) // REPORT_SIZE
        if not count:
            return None
        offset = self._ack
        for i in range(count):
            (reported,) = self._buffer.unpack(REPORT_STRUCT, i * REPORT_SIZE)
            self._check_report(reported, offset)
            offset = reported
        self._buffer.take(count * REPORT_SIZE)
        self._transition(Action.RECEIVE_REPORT, remote=True)
        assert offset is not None
        if self._request is None:
            self._request = offset
        self._ack = offset
        return ReportOffset(offset)

    def _check_report(self, reported: int, previous: int | None) -> None:
        if reported < 0:
            raise RemoteProtocolError(f"slave reported a negative offset {reported}")
        if previous is not None and reported < previous:
            raise RemoteProtocolError(f"slave report went backwards: {reported} after {previous}")
        if self._next is not None and reported > self._next:
            raise RemoteProtocolError(
                f"slave acks offset {reported} beyond what this connection sent ({self._next})"
            )


class SlaveConnection(_Endpoint):
    """The slave's end: sends reports, receives and checks frames (module Rule 5).

    Args:
        max_offset: the slave commitlog's max physical offset when the connection opens.
        file_size: the commitlog file size; when given, frames crossing a file boundary
            and an empty slave's first Transfer inside a file are refused.
        max_transfer: the largest payload accepted (the master's ``haTransferBatchSize``).

    Not thread-safe; a transport with a reader and a writer thread shares one lock.
    """

    role = Role.SLAVE

    def __init__(
        self, max_offset: int, *, file_size: int | None = None, max_transfer: int = MAX_TRANSFER
    ) -> None:
        if (
            not 0 <= max_offset <= MAX_OFFSET
            or (file_size is not None and file_size <= 0)
            or max_transfer <= 0
        ):
            raise ValueError(
                f"bad slave geometry: max_offset={max_offset} file_size={file_size} "
                f"max_transfer={max_transfer}"
            )
        super().__init__()
        self._end = max_offset
        self._file_size = file_size
        self._max_transfer = max_transfer
        self._reported: int | None = None

    @property
    def end_offset(self) -> int:
        """The slave's max offset once every Transfer returned so far is appended."""
        return self._end

    @property
    def last_reported_offset(self) -> int | None:
        """The offset in the latest report sent; None before the first."""
        return self._reported

    def send(self, event: Event) -> bytes:
        """Encode a ReportOffset for the wire (module Rule 2).

        Raises:
            LocalProtocolError: a wrong-direction event, or an offset that is negative,
                beyond ``end_offset`` or below the previous report.
        """
        self._check_sendable()
        try:
            if not isinstance(event, ReportOffset):
                raise LocalProtocolError(f"a slave cannot send {event!r}")
            if not 0 <= event.offset <= self._end:
                raise LocalProtocolError(
                    f"report {event.offset} outside [0, end_offset={self._end}]"
                )
            if self._reported is not None and event.offset < self._reported:
                raise LocalProtocolError(f"report {event.offset} goes back from {self._reported}")
            self._transition(Action.SEND_REPORT, remote=False)
        except ProtocolError as exc:
            raise self._fail(exc) from None
        self._reported = event.offset
        return REPORT_STRUCT.pack(event.offset)

    def _parse(self) -> Event | None:
        if len(self._buffer) < TRANSFER_HEADER_SIZE:
            return None
        offset, size = self._buffer.unpack(HEADER_STRUCT)
        action = Action.RECEIVE_TRANSFER if size else Action.RECEIVE_HEARTBEAT
        self._allowed(action, remote=True)
        self._check_header(offset, size)
        if len(self._buffer) < TRANSFER_HEADER_SIZE + size:
            return None
        self._buffer.take(TRANSFER_HEADER_SIZE)
        self._transition(action, remote=True)
        if size == 0:
            return Heartbeat(offset)
        self._end = offset + size
        return Transfer(offset, self._buffer.take(size))

    def _check_header(self, offset: int, size: int) -> None:
        """Every check that needs only the header, so garbage fails before its body arrives."""
        if offset < 0 or not 0 <= size <= self._max_transfer:
            raise RemoteProtocolError(
                f"bad frame header: offset {offset}, size {size} (max {self._max_transfer})"
            )
        if offset + size > MAX_OFFSET:
            raise RemoteProtocolError(f"frame at {offset} of {size} bytes overflows a long")
        kind = "Transfer" if size else "Heartbeat"
        if self._end and offset < self._end:
            raise RemoteProtocolError(
                f"diverging data: master {kind} at offset {offset} but the slave already holds "
                f"data up to {self._end}; the slave has data the master does not"
            )
        if self._end and offset > self._end:
            raise RemoteProtocolError(
                f"gap: master {kind} at offset {offset} but the slave's data ends at "
                f"{self._end}; bytes in between were never received"
            )
        fs = self._file_size
        if fs is None or not size:
            return
        if offset // fs != (offset + size - 1) // fs:
            raise RemoteProtocolError(
                f"Transfer [{offset}, {offset + size}) crosses a commitlog file boundary "
                f"(file size {fs})"
            )
        if not self._end and offset % fs:
            raise RemoteProtocolError(
                f"an empty slave's first Transfer must start a commitlog file (size {fs}), "
                f"got offset {offset}"
            )
