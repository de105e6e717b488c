"""Is there a Spark RPC endpoint behind a ``spark://HOST:PORT``? One request, one answer.

A port that accepts TCP but is not a Spark master (another service, a proxy, a listener
that never answers) makes Spark's standalone client wait for a registration that never
comes; nothing bounds it. Before the JVM starts, :func:`probe` asks the address the one
question every Spark RPC server (``NettyRpcEnv``) answers at once: a request for an
endpoint that does not exist. A Spark master replies with an RPC failure frame carrying
the request's id ("Could not find ..."), logs nothing above INFO, and keeps running;
silence or any other bytes mean the address is not a Spark master.

The wire format (Spark's ``network-common`` transport, as PySpark 4.3's master
answers it):

* a frame: total length as a big-endian int64 (counting these 8 bytes), a message type
  byte, the message;
* RPC request (type 3): request id int64, body length int32, body;
* the body (``NettyRpcEnv.RequestMessage``): sender address (a boolean ``false``: none),
  receiver address (``true``, host as Java modified UTF-8 with a uint16 length, port
  int32), receiver endpoint name (UTF), then the content in Java serialization (stream
  header ``ACED0005``, then a ``TC_STRING``);
* the answer: RPC response (type 4) or RPC failure (type 5), request id int64 first.

:func:`request` and :func:`is_answer` are pure; :func:`probe` does the I/O.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Final

RPC_REQUEST: Final = 3
RPC_RESPONSE: Final = 4
RPC_FAILURE: Final = 5
PROBE_ENDPOINT: Final = "mqstore-probe"
"""An endpoint name no Spark process registers: the master answers that it has none."""
_JAVA_STREAM_HEADER: Final = b"\xac\xed\x00\x05"
_TC_STRING: Final = b"\x74"
ANSWER_HEADER: Final = 17
"""Frame length (8), type (1) and request id (8): all the probe reads of the answer."""


def _utf(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def request(request_id: int, host: str, port: int) -> bytes:
    """The frame asking the server at ``host:port`` for :data:`PROBE_ENDPOINT`."""
    content = _JAVA_STREAM_HEADER + _TC_STRING + _utf("probe")
    body = b"\x00" + b"\x01" + _utf(host) + struct.pack(">i", port) + _utf(PROBE_ENDPOINT)
    body += content
    message = struct.pack(">qi", request_id, len(body)) + body
    return struct.pack(">qB", 8 + 1 + len(message), RPC_REQUEST) + message


def is_answer(header: bytes, request_id: int) -> bool:
    """Whether ``header`` (the first :data:`ANSWER_HEADER` bytes back) is a Spark RPC
    response or failure to ``request_id``."""
    if len(header) < ANSWER_HEADER:
        return False
    length, kind, rid = struct.unpack_from(">qBq", header)
    return kind in (RPC_RESPONSE, RPC_FAILURE) and rid == request_id and length >= ANSWER_HEADER


def probe(host: str, port: int, timeout_s: float) -> str | None:
    """None when ``host:port`` answers as a Spark RPC server within ``timeout_s`` (for
    the connection and again for the answer); else why not, in a few words.

    Raises:
        OSError: the connection was refused or failed.
    """
    rid = int(time.monotonic_ns() & 0x7FFF_FFFF_FFFF)
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        deadline = time.monotonic() + timeout_s
        try:
            sock.sendall(request(rid, host, port))
            got = b""
            while len(got) < ANSWER_HEADER:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                data = sock.recv(ANSWER_HEADER - len(got))
                if not data:
                    break
                got += data
        except TimeoutError:
            return f"accepts connections but sent no answer within {timeout_s:g} s"
        except OSError as e:
            return f"accepts connections but the exchange failed ({e.strerror or e})"
    if is_answer(got, rid):
        return None
    if not got:
        return "accepts connections but closed without an answer"
    return f"answers, but not as Spark does (first bytes {got[:8].hex()})"
