"""A tiny scripted remoting server on 127.0.0.1 for framing-level client tests.

Real TCP, real frames (the project's codec): each accepted connection gets a reader
thread that decodes requests, records them in ``received`` (a queue the test can wait
on) and writes whatever ``respond(request)`` returns. ``push`` sends a command to every
open connection (a broker-originated request). ``stop`` closes the listener and every
connection; ``start`` may listen again on the same port (a broker restart).
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
from collections.abc import Callable

from mqstore.closeable import Stoppable
from mqstore.remoting.codec import CLOSED, NEED_DATA, FrameDecoder, RemotingCommand, encode

Respond = Callable[[RemotingCommand], list[RemotingCommand]]


def echo(request: RemotingCommand) -> list[RemotingCommand]:
    """Answer every two-way request with SUCCESS and its extFields echoed."""
    if request.is_oneway or request.is_response:
        return []
    return [request.make_response(0, ext_fields=request.ext_fields, body=request.body)]


class ScriptedPeer(Stoppable):
    def __init__(self, respond: Respond = echo, port: int = 0) -> None:
        self.respond = respond
        self.port = port
        self.received: queue.Queue[RemotingCommand] = queue.Queue()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ScriptedPeer:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", self.port))
        ls.listen(16)
        self.port = ls.getsockname()[1]
        self._listener = ls
        threading.Thread(target=self._accept, args=(ls,), daemon=True).start()
        return self

    def _accept(self, ls: socket.socket) -> None:
        while True:
            try:
                conn, _ = ls.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        lock = threading.Lock()
        try:
            while True:
                data = conn.recv(65536)
                decoder.receive_data(data)
                while True:
                    cmd = decoder.next_command()
                    if cmd is NEED_DATA or cmd is CLOSED:
                        break
                    self.received.put(cmd)
                    for out in self.respond(cmd):
                        with lock:
                            conn.sendall(encode(out))
                if not data:
                    return
        except OSError:
            return

    def push(self, cmd: RemotingCommand) -> None:
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            conn.sendall(encode(cmd))

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):  # wakes the blocked accept()
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
