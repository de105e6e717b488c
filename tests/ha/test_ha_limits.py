"""The HA master under misbehaving peers: a protocol error is logged once and closes
only that link; connections past the link cap are refused at accept."""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.config import BrokerRole
from mqstore.ha.master import HAMaster
from tests.helpers import FailsFirst, until


@pytest.fixture
def master(tmp_path: Path) -> Iterator[HAMaster]:
    cfg = StoreConfig(root_dir=tmp_path / "m", broker_role=BrokerRole.SYNC_MASTER,
                      ha_listen_port=0, commitlog_file_size=1 << 20)  # fmt: skip
    store = MessageStore.open(cfg)
    try:
        assert isinstance(store.ha, HAMaster)
        yield store.ha
    finally:
        store.close()


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_protocol_error_is_logged_once(master: HAMaster) -> None:
    logger = logging.getLogger("mqstore.ha")
    source = logging.getLogger("mqstore.ha.master")
    handler, level, disabled = Collect(), logger.level, source.disabled
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    source.disabled = False  # a logging.config call elsewhere in the run may disable it
    try:
        with socket.create_connection(("127.0.0.1", master.port)) as s:
            s.sendall(struct.pack(">q", -5))  # a negative reported offset
            until(lambda: master.last_error is not None)
        time.sleep(0.2)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        source.disabled = disabled
    lines = [m for m in handler.messages if "negative offset" in m]
    assert len(lines) == 1, lines


def test_connections_past_the_cap_are_refused_and_the_rest_stay(master: HAMaster) -> None:
    master.max_links = 2
    socks = [socket.create_connection(("127.0.0.1", master.port)) for _ in range(4)]
    try:
        until(lambda: master.accepted == 2 and len(master.errors) >= 2)
        assert master.connection_count() == 2
        assert all("slaves connected" in e for e in master.errors)
    finally:
        for s in socks:
            s.close()


def test_a_link_whose_thread_raises_is_closed_and_others_are_still_served(
    master: HAMaster, monkeypatch: pytest.MonkeyPatch
) -> None:
    notify_ack = FailsFirst(master.group.notify_ack, "a bug handling one report")
    monkeypatch.setattr(master.group, "notify_ack", notify_ack)
    with socket.create_connection(("127.0.0.1", master.port)) as s:
        s.sendall(struct.pack(">q", 0))
        until(lambda: master.failures.counts() == {"link": 1})
        until(lambda: master.links() == [])
    with socket.create_connection(("127.0.0.1", master.port)) as s:
        s.sendall(struct.pack(">q", 0))
        until(lambda: notify_ack.calls >= 2 and len(master.links()) == 1)


def test_a_slave_session_that_raises_is_counted_and_the_slave_reconnects(
    master: HAMaster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mqstore.ha import slave as slave_module

    connect = FailsFirst(slave_module.transport.connect, "a bug in one session")
    monkeypatch.setattr(slave_module.transport, "connect", connect)
    cfg = StoreConfig(root_dir=tmp_path / "s", broker_role=BrokerRole.SLAVE,
                      ha_master_address=f"127.0.0.1:{master.port}", commitlog_file_size=1 << 20,
                      extra={"ha_reconnect_interval_ms": "100"})  # fmt: skip
    with MessageStore.open(cfg) as store:
        slave = store.ha
        assert isinstance(slave, slave_module.HASlave)
        until(lambda: slave.sessions >= 1 and len(master.links()) == 1)
        assert slave.failures.counts() == {"session": 1}
