"""The framing of the remoting protocol: length prefix and header meta around a header.

One job: whole frames. :func:`encode` / :func:`encode_head` write one command's frame;
a :class:`FrameDecoder` (one per connection, h11-style ``receive_data`` /
``next_command``) splits a byte stream into commands, refusing frames over
:data:`FRAME_MAX_LENGTH` before buffering their body, and reports a clean EOF as
``CLOSED`` (Rule 4). The header inside a frame is ``mqstore.remoting._header``'s.
The frame layout and the Rules are documented once, in :mod:`mqstore.remoting.codec`,
the public facade: import from there.

Pure: no sockets, no clocks.
"""

from __future__ import annotations

import struct
from typing import Final

from mqstore.remoting._command import (
    CLOSED,
    NEED_DATA,
    Closed,
    LocalProtocolError,
    NeedData,
    RemoteProtocolError,
    RemotingCommand,
)
from mqstore.remoting._header import _INT, decode_header, encode_header
from mqstore.remoting.codes import SerializeType

FRAME_MAX_LENGTH: Final = 16 * 1024 * 1024
"""Largest whole frame, length prefix included (``com.rocketmq.remoting.frameMaxLength``)."""
HEADER_LENGTH_MASK: Final = 0xFFFFFF
"""Header length bits of the header-meta int."""

_PREFIX: Final = struct.Struct(">iI")  # length, header_meta
_UINT: Final = struct.Struct(">I")


def header_meta(header_length: int, serialize_type: SerializeType) -> bytes:
    """The 4 header-meta bytes (RocketMQ ``markProtocolType``)."""
    if not 0 <= header_length <= HEADER_LENGTH_MASK:
        raise LocalProtocolError(f"header length {header_length} does not fit 24 bits")
    return _UINT.pack(int(serialize_type) << 24 | header_length)


def encode_head(cmd: RemotingCommand, *, max_frame_length: int = FRAME_MAX_LENGTH) -> bytes:
    """Everything of the frame but the body: length, header meta, header.

    Lets a transport write a large body without copying it: send ``encode_head(cmd)``
    then ``cmd.body``.

    Raises:
        LocalProtocolError: see :func:`encode_header`; or the frame exceeds the limit.
    """
    header = encode_header(cmd)
    if len(header) > HEADER_LENGTH_MASK:
        raise LocalProtocolError(f"header of {len(header)} bytes does not fit 24 bits")
    length = 4 + len(header) + len(cmd.body)
    if length + 4 > max_frame_length:
        raise LocalProtocolError(f"frame of {length + 4} bytes exceeds {max_frame_length}")
    meta = int(cmd.serialize_type) << 24 | len(header)
    return _PREFIX.pack(length, meta) + header


def encode(cmd: RemotingCommand, *, max_frame_length: int = FRAME_MAX_LENGTH) -> bytes:
    """One whole frame for ``cmd`` (RocketMQ ``RemotingCommand.encode``).

    Raises:
        LocalProtocolError: see :func:`encode_head`.
    """
    return encode_head(cmd, max_frame_length=max_frame_length) + cmd.body


class FrameDecoder:
    """Splits a byte stream into :class:`RemotingCommand` s; one per connection.

    Not thread-safe: one reader feeds and drains it. Frame sizes are checked as soon as
    their first 8 bytes arrive, so an oversized frame is refused before its body is
    buffered.
    """

    def __init__(self, max_frame_length: int = FRAME_MAX_LENGTH) -> None:
        if max_frame_length < 8:
            raise ValueError(f"max_frame_length {max_frame_length} < 8")
        self.max_frame_length = max_frame_length
        self._buf = bytearray()
        self._eof = False
        self._error: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as commands."""
        return len(self._buf)

    def receive_data(self, data: bytes) -> None:
        """Append bytes read from the peer; ``b""`` means the peer closed (Rule 4).

        Raises:
            LocalProtocolError: data after EOF was signalled.
        """
        if self._eof:
            if data:
                raise LocalProtocolError("receive_data after EOF")
            return
        if data:
            self._buf += data
        else:
            self._eof = True

    def next_command(self) -> RemotingCommand | NeedData | Closed:
        """The next whole command, or ``NEED_DATA``, or ``CLOSED`` after a clean EOF.

        Raises:
            RemoteProtocolError: the stream is not valid remoting frames (Rules 2-4);
                every later call raises it again.
        """
        if self._error is not None:
            raise self._error
        try:
            return self._next()
        except RemoteProtocolError as e:
            self._error = e
            raise

    def _next(self) -> RemotingCommand | NeedData | Closed:
        buf = self._buf
        have = len(buf)
        if have >= 4:
            (length,) = _INT.unpack_from(buf)
            self._check_length(length)
            if have >= 8:
                (meta,) = _UINT.unpack_from(buf, 4)
                header_len = meta & HEADER_LENGTH_MASK
                serialize_type = self._serialize_type(meta >> 24)
                if header_len > length - 4:
                    raise RemoteProtocolError(
                        f"header length {header_len} exceeds frame length {length} - 4"
                    )
                total = 4 + length
                if have >= total:
                    header = bytes(buf[8 : 8 + header_len])
                    body = bytes(buf[8 + header_len : total])
                    del buf[:total]
                    return decode_header(header, serialize_type, body)
        if self._eof:
            if have:
                raise RemoteProtocolError(f"connection closed inside a frame ({have} bytes)")
            return CLOSED
        return NEED_DATA

    def _check_length(self, length: int) -> None:
        if length < 4:
            raise RemoteProtocolError(f"frame length {length} < 4")
        if length + 4 > self.max_frame_length:
            raise RemoteProtocolError(
                f"frame of {length + 4} bytes exceeds the {self.max_frame_length}-byte limit"
            )

    @staticmethod
    def _serialize_type(code: int) -> SerializeType:
        if code == 0:  # JSON, nearly every frame: no enum lookup
            return SerializeType.JSON
        try:
            return SerializeType(code)
        except ValueError:
            raise RemoteProtocolError(f"unknown serialize type {code}") from None
