"""A tiny blocking remoting client for the server tests: raw frames over real TCP.

Requests are numbered; :meth:`WireClient.call` returns the response with the same
opaque. Broker-initiated requests (NOTIFY_CONSUMER_IDS_CHANGED) that arrive meanwhile
are kept in :attr:`WireClient.pushed`.
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Mapping

from mqstore.remoting.codec import CLOSED, NEED_DATA, FrameDecoder, RemotingCommand, encode
from mqstore.remoting.codes import RemotingFlag


class WireClient:
    """One connection to a broker."""

    def __init__(self, address: str, timeout: float = 60.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.decoder = FrameDecoder()
        self.opaques = itertools.count(1)
        self.pushed: list[RemotingCommand] = []
        self.responses: dict[int, RemotingCommand] = {}

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(
        self,
        code: int,
        ext: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
    ) -> int:
        """Send a request; returns its opaque."""
        opaque = next(self.opaques)
        cmd = RemotingCommand(
            code=code,
            opaque=opaque,
            flag=RemotingFlag.ONEWAY.value if oneway else 0,
            ext_fields={k: str(v) for k, v in (ext or {}).items()},
            body=body,
        )
        self.sock.sendall(encode(cmd))
        return opaque

    def _read_one(self) -> RemotingCommand | None:
        while True:
            cmd = self.decoder.next_command()
            if cmd is CLOSED:
                return None
            if cmd is not NEED_DATA:
                assert isinstance(cmd, RemotingCommand)
                return cmd
            data = self.sock.recv(1 << 20)
            self.decoder.receive_data(data)

    def _file_next(self) -> None:
        """Read one command: a response goes to ``responses`` by opaque, a
        broker-initiated request to ``pushed``."""
        cmd = self._read_one()
        if cmd is None:
            raise ConnectionError("connection closed by the broker")
        if cmd.is_response:
            self.responses[cmd.opaque] = cmd
        else:
            self.pushed.append(cmd)

    def wait_response(self, opaque: int) -> RemotingCommand:
        while opaque not in self.responses:
            self._file_next()
        return self.responses.pop(opaque)

    def call(
        self, code: int, ext: Mapping[str, object] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """Request and wait for the response."""
        return self.wait_response(self.request(code, ext, body))

    def wait_pushed(self, timeout: float = 60.0) -> RemotingCommand:
        """The next broker-initiated request."""
        deadline = time.monotonic() + timeout
        self.sock.settimeout(timeout)
        while not self.pushed:
            if time.monotonic() > deadline:
                raise TimeoutError("nothing pushed")
            self._file_next()
        return self.pushed.pop(0)
