"""The HA handshake (our addition, mqstore.ha.handshake): sans-IO rules H1-H3, then real
TCP: a master with a secret streams nothing to, and counts no ack from, a slave that
cannot answer its challenge; a fake acking slave can no longer turn a SYNC_MASTER's
SLAVE_NOT_AVAILABLE into PUT_OK (SEND_OK on the wire)."""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore import BrokerRole, Message, MessageStore, PutStatus, StoreConfig
from mqstore.ha.handshake import (
    CHALLENGE_SIZE,
    PROOF_SIZE,
    HandshakeState,
    MasterHandshake,
    SlaveHandshake,
    proof_for,
)
from mqstore.ha.master import HAMaster
from mqstore.ha.protocol import ConnectionClosed, RemoteProtocolError, Transfer
from tests.ha.procs import FakeSlave, wait_until

NONCE = bytes(range(16))
SECRET = b"replication-secret"


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# ------------------------------------------------------------------------ sans-IO


@given(st.lists(st.integers(min_value=0), max_size=6), st.binary(max_size=20))
def test_right_proof_in_any_pieces_is_accepted_and_later_bytes_kept(
    cuts: list[int], after: bytes
) -> None:
    master = MasterHandshake(SECRET, NONCE)
    slave = SlaveHandshake(SECRET)
    proof = None
    for piece in _pieces(master.challenge(), cuts):
        proof = slave.receive_data(piece) or proof
    assert proof is not None and len(proof) == PROOF_SIZE
    for piece in _pieces(proof + after, cuts):
        master.receive_data(piece)
    assert master.state is HandshakeState.ACCEPTED
    assert master.leftover == after


def test_wrong_secret_is_refused() -> None:
    master = MasterHandshake(SECRET, NONCE)
    proof = SlaveHandshake(b"guess").receive_data(master.challenge())
    assert proof is not None
    assert master.receive_data(proof) is HandshakeState.REFUSED


def test_a_recorded_proof_fails_for_another_nonce() -> None:
    recorded = proof_for(SECRET, NONCE)
    master = MasterHandshake(SECRET, bytes(16))
    assert master.receive_data(recorded) is HandshakeState.REFUSED


def test_master_is_pending_until_the_whole_proof() -> None:
    master = MasterHandshake(SECRET, NONCE)
    assert master.receive_data(proof_for(SECRET, NONCE)[:-1]) is HandshakeState.PENDING


def test_slave_refuses_bytes_that_are_not_a_challenge() -> None:
    with pytest.raises(RemoteProtocolError, match="no HA challenge"):
        SlaveHandshake(SECRET).receive_data(bytes(12))  # a heartbeat frame header


def test_challenge_layout() -> None:
    data = MasterHandshake(SECRET, NONCE).challenge()
    assert len(data) == CHALLENGE_SIZE and data[:5] == b"MQHA\x01" and data[5:] == NONCE


# ------------------------------------------------------------------------ real TCP


def _master_cfg(root: Path, **ha: Any) -> StoreConfig:
    return StoreConfig(root_dir=root, broker_role=BrokerRole.SYNC_MASTER, ha_listen_port=0,
                       commitlog_file_size=1 << 20, slave_timeout_ms=500, **ha)  # fmt: skip


def _ha(store: MessageStore) -> HAMaster:
    assert isinstance(store.ha, HAMaster)
    return store.ha


def _msg(i: int) -> Message:
    return Message(topic="ha", body=b"m%d" % i, queue_id=0)


class AckingFakeSlave:
    """Stores nothing, acks every frame it is sent: the attack of issue 18."""

    def __init__(self, port: int) -> None:
        self.fake = FakeSlave(port)
        self.fake.report(0)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                event = self.fake.next_event(timeout=30)
                if isinstance(event, ConnectionClosed):
                    return  # the master hung up: every later event is this one
                if isinstance(event, Transfer):
                    self.fake.report(event.end_offset)
        except (OSError, RemoteProtocolError) as e:
            self.error = e

    def close(self) -> None:
        """Hang up and wait for the reader thread (shutdown wakes its blocked recv)."""
        with contextlib.suppress(OSError):  # already disconnected
            self.fake.sock.shutdown(socket.SHUT_RDWR)
        self.fake.close()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the fake slave's reader thread did not stop"


def test_without_a_secret_a_fake_slave_turns_puts_into_put_ok(tmp_path: Path) -> None:
    """The attack the secret closes (RocketMQ's protocol, unchanged without one)."""
    with MessageStore.open(_master_cfg(tmp_path / "m")) as m:
        fake = AckingFakeSlave(_ha(m).port)
        try:
            wait_until(lambda: _ha(m).connection_count() == 1, 60, "fake connected")
            assert m.put_message(_msg(0)).status is PutStatus.PUT_OK
        finally:
            fake.close()


def test_with_a_secret_a_fake_slave_gets_nothing_and_acks_nothing(tmp_path: Path) -> None:
    with MessageStore.open(_master_cfg(tmp_path / "m", ha_secret="s3cret")) as m:
        m.put_message(_msg(0))
        fake = AckingFakeSlave(_ha(m).port)
        try:
            wait_until(lambda: _ha(m).accepted == 1, 60, "fake accepted")
            assert _ha(m).connection_count() == 0
            assert m.put_message(_msg(1)).status is PutStatus.SLAVE_NOT_AVAILABLE
            fake.thread.join(5)
            assert isinstance(fake.error, RemoteProtocolError)  # it got a challenge, no frame
        finally:
            fake.close()


def test_a_wrong_proof_is_refused_and_the_connection_closed(tmp_path: Path) -> None:
    with MessageStore.open(_master_cfg(tmp_path / "m", ha_secret="s3cret")) as m:
        m.put_message(_msg(0))
        with socket.create_connection(("127.0.0.1", _ha(m).port), timeout=5) as sock:
            challenge = b""
            while len(challenge) < CHALLENGE_SIZE:
                challenge += sock.recv(CHALLENGE_SIZE)
            sock.sendall(proof_for(b"guess", challenge[5:]) + bytes(8))
            assert sock.recv(1024) == b""  # closed, not one frame sent
        wait_until(lambda: "wrong HA secret" in (_ha(m).last_error or ""), 60, "refusal noted")


def test_slave_with_the_secret_replicates_and_acks(tmp_path: Path) -> None:
    with MessageStore.open(_master_cfg(tmp_path / "m", ha_secret="s3cret")) as m:
        slave_cfg = StoreConfig(root_dir=tmp_path / "s", broker_role=BrokerRole.SLAVE,
                                commitlog_file_size=1 << 20,
                                ha_master_address=f"127.0.0.1:{_ha(m).port}",
                                ha_secret="s3cret", ha_reconnect_interval_ms=100)  # fmt: skip
        with MessageStore.open(slave_cfg) as s:
            wait_until(lambda: _ha(m).connection_count() == 1, 60, "slave authenticated")
            r = m.put_message(_msg(0))
            assert r.status is PutStatus.PUT_OK
            assert s.max_physical_offset >= r.physical_offset + r.size


def test_slave_outside_the_allowed_hosts_is_closed_at_accept(tmp_path: Path) -> None:
    cfg = _master_cfg(tmp_path / "m", ha_allowed_slaves=("10.1.2.3",))
    with MessageStore.open(cfg) as m:
        fake = AckingFakeSlave(_ha(m).port)
        try:
            wait_until(lambda: "not an allowed slave" in (_ha(m).last_error or ""), 60, "refused")
            assert _ha(m).connection_count() == 0
            assert m.put_message(_msg(0)).status is PutStatus.SLAVE_NOT_AVAILABLE
        finally:
            fake.close()


def test_allowed_slaves_given_as_one_string_are_its_comma_separated_hosts(tmp_path: Path) -> None:
    cfg = StoreConfig(root_dir=tmp_path, ha_allowed_slaves="10.0.0.2, 10.0.0.3")  # type: ignore[arg-type]
    assert cfg.ha_allowed_slaves == ("10.0.0.2", "10.0.0.3")


def test_a_reconnect_interval_that_is_not_positive_is_refused(tmp_path: Path) -> None:
    from mqstore.errors import ConfigError

    with pytest.raises(ConfigError, match="ha_reconnect_interval_ms must be positive"):
        StoreConfig(root_dir=tmp_path, ha_reconnect_interval_ms=0)
