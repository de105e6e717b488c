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


def test_connections_past_the_cap_are_refused_when_every_link_has_reported(
    master: HAMaster,
) -> None:
    master.max_links = 2
    slaves = [socket.create_connection(("127.0.0.1", master.port)) for _ in range(2)]
    for s in slaves:
        s.sendall(struct.pack(">q", 0))
    until(lambda: len([i for i in master.links() if i.slave_request_offset is not None]) == 2)
    more = [socket.create_connection(("127.0.0.1", master.port)) for _ in range(2)]
    try:
        until(lambda: len(master.errors) >= 2)
        assert all("slaves connected" in e for e in master.errors)
        assert master.accepted == 2 and master.connection_count() == 2
    finally:
        for s in slaves + more:
            s.close()


def test_a_connection_past_the_cap_takes_the_place_of_the_oldest_silent_one(
    master: HAMaster,
) -> None:
    master.max_links = 2
    silent = [socket.create_connection(("127.0.0.1", master.port)) for _ in range(2)]
    try:
        until(lambda: master.accepted == 2)
        with socket.create_connection(("127.0.0.1", master.port)) as slave:
            slave.sendall(struct.pack(">q", 0))
            until(lambda: [i.slave_request_offset for i in master.links()].count(0) == 1)
            assert len(master.links()) == 2
            assert silent[0].recv(1) == b""  # the oldest silent one was closed
            assert any("no report yet" in e for e in master.errors)
    finally:
        for s in silent:
            s.close()


def test_a_connection_that_sends_no_report_is_closed_after_the_first_message_bound(
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    from mqstore.limits import HA_LIMITS

    limits = replace(HA_LIMITS, first_message_s=0.3)
    store = MessageStore.open(StoreConfig(root_dir=tmp_path / "m", commitlog_file_size=1 << 20))
    m = HAMaster(store.commitlog, port=0, heartbeat_interval_ms=100, limits=limits).start()
    try:
        with socket.create_connection(("127.0.0.1", m.port)) as s:
            s.sendall(b"\x00" * 7)  # a report, all but its last byte
            until(lambda: m.accepted == 1)
            until(lambda: m.links() == [], timeout=60)
            assert "sent no report within 0.3 s" in (m.last_error or "")
    finally:
        m.stop()
        store.close()


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
                      ha_reconnect_interval_ms=100)  # fmt: skip
    with MessageStore.open(cfg) as store:
        slave = store.ha
        assert isinstance(slave, slave_module.HASlave)
        until(lambda: slave.sessions >= 1 and len(master.links()) == 1)
        assert slave.failures.counts() == {"session": 1}


def test_partial_reports_past_the_servers_total_close_the_links_holding_them(
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    from mqstore.limits import HA_LIMITS

    limits = replace(HA_LIMITS, max_buffered_total=10)
    store = MessageStore.open(StoreConfig(root_dir=tmp_path / "m", commitlog_file_size=1 << 20))
    m = HAMaster(store.commitlog, port=0, limits=limits).start()
    socks = [socket.create_connection(("127.0.0.1", m.port)) for _ in range(2)]
    try:
        socks[0].sendall(b"\x00" * 7)
        until(lambda: m.partial.total == 7)
        socks[1].sendall(b"\x00" * 7)  # 14 bytes held: over 10
        until(lambda: len(m.links()) == 1 and m.partial.total == 7)
        # the reason is noted just after the link leaves the list: wait for it too
        until(lambda: any("partial frames over the server's limit" in e for e in m.errors))
    finally:
        for s in socks:
            s.close()
        m.stop()
        store.close()
