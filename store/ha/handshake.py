"""The HA handshake, sans-IO: a master with a shared secret serves only slaves that know it.

RocketMQ's HA protocol has no authentication: whoever connects to the HA port may read
the whole CommitLog, and its reports count as acks for SYNC_MASTER puts. This handshake
is our addition (docs/acl.md §5), used only when the master is given a secret; a master
without one speaks the plain protocol, so RocketMQ slaves still work with it.

Wire format (before any report or frame)::

    master -> slave   CHALLENGE  4 bytes magic b"MQHA", 1 byte version (1), 16 bytes nonce
    slave  -> master  PROOF      32 bytes HMAC-SHA256(secret, b"mqstore-ha/1" + nonce)

Rules
-----
Rule H1. With a secret, the master speaks first: it sends the CHALLENGE on accept, with
a fresh random nonce, and sends nothing else until a correct PROOF arrived. Every byte
the slave sends before that is proof; bytes after the 32 belong to the replication
protocol (:attr:`MasterHandshake.leftover`).

Rule H2. A wrong PROOF refuses the slave (``HandshakeState.REFUSED``): the master
closes the connection, never streams, and never counts the connection's reports as
acks. The secret itself never crosses the wire, and a recorded PROOF is worthless for
another nonce.

Rule H3. A slave given a secret waits for the CHALLENGE before its first report; bytes
that are not a CHALLENGE (wrong magic or version) are a :class:`RemoteProtocolError`.

Pure: no sockets, clocks or threads; the nonce is a parameter (tests pass a fixed one).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import os
import struct
from dataclasses import dataclass
from typing import Final

from mqstore.ha._events import RemoteProtocolError

MAGIC: Final = b"MQHA"
VERSION: Final = 1
NONCE_SIZE: Final = 16
CHALLENGE_SIZE: Final = len(MAGIC) + 1 + NONCE_SIZE
PROOF_SIZE: Final = 32
_LABEL: Final = b"mqstore-ha/1"
_HEAD: Final = struct.Struct(">4sB")


@dataclass(frozen=True, slots=True)
class Challenge:
    """The master's first bytes (Rule H1)."""

    nonce: bytes

    def encode(self) -> bytes:
        return _HEAD.pack(MAGIC, VERSION) + self.nonce


def proof_for(secret: bytes, nonce: bytes) -> bytes:
    """The PROOF a slave holding ``secret`` answers to ``nonce``."""
    return hmac.new(secret, _LABEL + nonce, hashlib.sha256).digest()


class HandshakeState(enum.Enum):
    """Where the master's side of one connection stands (Rules H1, H2)."""

    PENDING = "PENDING"
    """No whole PROOF yet: the master sends nothing after the CHALLENGE."""
    ACCEPTED = "ACCEPTED"
    """The PROOF matches: replication starts with :attr:`MasterHandshake.leftover`."""
    REFUSED = "REFUSED"
    """A wrong PROOF: the master closes the connection and counts no ack from it."""


class MasterHandshake:
    """The master's side: issue a challenge, judge the proof (Rules H1, H2)."""

    def __init__(self, secret: bytes, nonce: bytes | None = None) -> None:
        if not secret:
            raise ValueError("an HA secret must not be empty")
        self._nonce = nonce if nonce is not None else os.urandom(NONCE_SIZE)
        if len(self._nonce) != NONCE_SIZE:
            raise ValueError(f"the nonce must be {NONCE_SIZE} bytes")
        self._secret = secret
        self._buf = bytearray()
        self.state = HandshakeState.PENDING
        self.leftover = b""
        """Bytes received after the proof: the start of the replication protocol."""

    def challenge(self) -> bytes:
        """The CHALLENGE to send on accept."""
        return Challenge(self._nonce).encode()

    def receive_data(self, data: bytes) -> HandshakeState:
        """Feed bytes from the slave; the state after them."""
        if self.state is not HandshakeState.PENDING:
            self.leftover += data
            return self.state
        self._buf += data
        if len(self._buf) >= PROOF_SIZE:
            proof = bytes(self._buf[:PROOF_SIZE])
            self.leftover = bytes(self._buf[PROOF_SIZE:])
            ok = hmac.compare_digest(proof, proof_for(self._secret, self._nonce))
            self.state = HandshakeState.ACCEPTED if ok else HandshakeState.REFUSED
        return self.state


class SlaveHandshake:
    """The slave's side: read the challenge, answer it (Rule H3)."""

    def __init__(self, secret: bytes) -> None:
        if not secret:
            raise ValueError("an HA secret must not be empty")
        self._secret = secret
        self._buf = bytearray()
        self.leftover = b""

    def receive_data(self, data: bytes) -> bytes | None:
        """Feed bytes from the master; the PROOF to send once the challenge is whole.

        Raises:
            RemoteProtocolError: the bytes are not a CHALLENGE.
        """
        self._buf += data
        if len(self._buf) >= _HEAD.size:
            magic, version = _HEAD.unpack_from(self._buf)
            if magic != MAGIC or version != VERSION:
                raise RemoteProtocolError(
                    "the master sent no HA challenge (is it configured with a secret?)"
                )
        if len(self._buf) < CHALLENGE_SIZE:
            return None
        nonce = bytes(self._buf[_HEAD.size : CHALLENGE_SIZE])
        self.leftover = bytes(self._buf[CHALLENGE_SIZE:])
        return proof_for(self._secret, nonce)
