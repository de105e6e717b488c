"""HA under faults: SIGKILLed slaves and masters, cut connections, diverging logs.

Real processes (``ha_proc.py``) and real TCP on 127.0.0.1; every wait is a deadline poll.
"""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest

from mqstore import BrokerRole, Message, MessageStore, StoreConfig
from mqstore.ha import service as ha_service
from mqstore.ha.master import HAMaster
from mqstore.ha.slave import HASlave
from tests.ha.ha_proc import streaming
from tests.ha.procs import HAProcess, assert_same_log, log_bytes, open_plain, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.crash]

FILE_SIZE = 1 << 20


def slave_store(root: Path, port: int) -> MessageStore:
    return MessageStore.open(
        StoreConfig(
            root_dir=root,
            commitlog_file_size=FILE_SIZE,
            broker_role=BrokerRole.SLAVE,
            ha_master_address=f"127.0.0.1:{port}",
            ha_reconnect_interval_ms=100,
        )
    )


def ha_slave(store: MessageStore) -> HASlave:
    assert isinstance(store.ha, HASlave)
    return store.ha


def fill(root: Path, sizes: list[int]) -> bytes:
    """Write messages of these body sizes into a plain store; return its whole log."""
    cfg = StoreConfig(root_dir=root, commitlog_file_size=FILE_SIZE, compress_msg_body_over=1 << 20)
    with MessageStore.open(cfg) as s:
        for i, n in enumerate(sizes):
            s.put_message(Message(topic="div", body=bytes([65 + i % 26]) * n))
        return log_bytes(s, 0, s.max_physical_offset)


# ------------------------------------------------------------------ slave crash


@pytest.mark.slow
def test_slave_killed_mid_stream_catches_up_from_where_it_was(tmp_path: Path):
    # the master holds its second half until the second slave is connected: the kill is
    # before the end of the load, and the new slave takes live data, however slow the
    # machine (deadlines are generous: process starts take seconds under load)
    master = HAProcess(
        "master", tmp_path / "m", tmp_path, "master",
        "--produce", "24000", "--hold-at", "12000", "--rate", "12000", "--after-connect",
    )  # fmt: skip
    procs = [master]
    try:
        port = master.wait_for(lambda s: s.get("port"), 120, "listening")["port"]
        args = ("--master", f"127.0.0.1:{port}")
        first = HAProcess("slave", tmp_path / "s", tmp_path, "slave1", *args)
        procs.append(first)
        first.wait_for(lambda s: s["max_offset"] > 3 * FILE_SIZE, 120, "slave past 3 MiB")
        first.kill()

        second = HAProcess("slave", tmp_path / "s", tmp_path, "slave2", *args)
        procs.append(second)
        resumed = second.wait_for(lambda s: s.get("connected"), 120, "reconnected")
        # It had more than 3 MiB when killed; recovery cuts at most the torn last record,
        # and the master resumes it there (not from scratch, not from its last file).
        assert resumed["max_offset"] > 3 * FILE_SIZE - 4096
        held = master.status()
        assert held is not None and not held["produced_all"]
        master.proc.send_signal(signal.SIGUSR1)
        final = master.wait_for(lambda s: s["produced_all"], 120, "load done")["max_offset"]
        second.wait_for(lambda s: s["max_offset"] == final, 120, f"slave at {final}")
        second.terminate()
        master.terminate()
    finally:
        for p in procs:
            p.cleanup()
    assert assert_same_log(tmp_path / "m", tmp_path / "s", FILE_SIZE) == (0, final)


# ----------------------------------------------------------------- master crash


def _acked(acks: Path) -> list[tuple[str, int, int]]:
    """Complete lines of the master's PUT_OK log: (tag, physical offset, size)."""
    out = []
    for line in acks.read_text().splitlines(keepends=True):
        if line.endswith("\n"):
            tag, phys, size = line.split()
            out.append((tag, int(phys), int(size)))
    return out


def _kill_sync_master_after(work: Path, wanted: int) -> list[tuple[str, int, int]]:
    """Run a SYNC_MASTER process with an in-process slave, SIGKILL it after ``wanted`` PUT_OKs.

    Returns the PUT_OKs it logged; the slave store is closed cleanly afterwards.
    """
    acks = work / "acks.txt"
    master = HAProcess(
        "master", work / "m", work, "master", "--role", "SYNC_MASTER",
        "--produce", "-1", "--threads", "4", "--acks", str(acks), "--after-connect",
    )  # fmt: skip
    try:
        port = master.wait_for(lambda s: s.get("port"), 120, "listening")["port"]
        with slave_store(work / "s", port) as slave:
            wait_until(
                lambda: acks.exists() and len(_acked(acks)) >= wanted, 120, f"{wanted} PUT_OKs"
            )
            master.kill()
            wait_until(lambda: not ha_slave(slave).connected, 60, "slave saw the crash")
    finally:
        master.cleanup()
    return _acked(acks)


@pytest.mark.slow
def test_sync_master_killed_every_put_ok_is_on_the_slave(tmp_path: Path):
    rng = random.Random(4)
    trials = 10
    total_acked = 0
    for trial in range(trials):
        work = tmp_path / f"t{trial}"
        work.mkdir()
        acked = _kill_sync_master_after(work, rng.randrange(20, 3000))
        total_acked += len(acked)
        with open_plain(work / "s", FILE_SIZE) as s:
            for tag, phys, size in acked:
                rec = s.look_message_by_offset(phys)
                assert rec is not None, f"trial {trial}: PUT_OK {tag} at {phys} not on the slave"
                assert rec.body.startswith(tag.encode() + b".")
                assert phys + size <= s.max_physical_offset
    assert total_acked >= trials * 20


# -------------------------------------------------------------- cut connection


@pytest.mark.slow
def test_connection_cut_by_the_master_is_reestablished(tmp_path: Path):
    cfg = StoreConfig(root_dir=tmp_path / "m", commitlog_file_size=FILE_SIZE, ha_listen_port=0)
    with MessageStore.open(cfg) as m:
        master = ha_service.serve(m)
        slave = HAProcess(
            "slave", tmp_path / "s", tmp_path, "slave", "--master", f"127.0.0.1:{master.port}"
        )
        try:
            # A slave reporting offset 0 is streamed from the start of the master's last file
            # (RocketMQ's rule), so the load waits until the stream's start is chosen: 0.
            wait_until(lambda: streaming(master), 120, "the slave's stream started")
            for i in range(3000):
                m.put_message(Message(topic="cut", body=b"%d" % i * 300))
            end = m.max_physical_offset
            # Cut while the slave is still copying: it resumes wherever its last frame
            # ended, usually inside a record.
            wait_until(lambda: master.push_to_slave_max_offset > 0, 60, "streaming")
            assert master.disconnect_all() == 1
            wait_until(lambda: master.accepted == 2 and master.connection_count() == 1, 60,
                       "the slave reconnected")  # fmt: skip
            slave.wait_for(lambda s: s["max_offset"] == end, 120, "catch-up after the cut")
            assert master.disconnect_all() == 1  # and once more, idle this time
            wait_until(lambda: master.accepted == 3 and master.connection_count() == 1, 60,
                       "the slave reconnected again")  # fmt: skip
            for i in range(500):
                m.put_message(Message(topic="cut", body=b"%d" % i * 100))
            end = m.max_physical_offset
            st = slave.wait_for(lambda s: s["max_offset"] == end, 120, "final catch-up")
            assert st["sessions"] == 3
            assert not st["diverged"]
            slave.terminate()
        finally:
            slave.cleanup()
    assert assert_same_log(tmp_path / "m", tmp_path / "s", FILE_SIZE) == (0, end)


# -------------------------------------------------------------- diverging logs


def test_slave_holding_more_than_the_master_is_refused_not_spliced(tmp_path: Path):
    slave_log = fill(tmp_path / "s", [500] * 50)
    fill(tmp_path / "m", [500] * 10)
    cfg = StoreConfig(root_dir=tmp_path / "m", commitlog_file_size=FILE_SIZE, ha_listen_port=0)
    with MessageStore.open(cfg) as m:
        master = ha_service.serve(m)
        with slave_store(tmp_path / "s", master.port) as s:
            wait_until(lambda: "diverging data" in (master.last_error or ""), 60, "refusal")
            wait_until(lambda: "without sending a frame" in (ha_slave(s).last_error or ""), 60,
                       "the slave's account of it")  # fmt: skip
            assert log_bytes(s, 0, s.max_physical_offset) == slave_log


def test_slave_with_a_different_log_stops_with_a_clear_error(tmp_path: Path):
    slave_log = fill(tmp_path / "s", [700] * 20)  # ends inside one of the master's records
    fill(tmp_path / "m", [1000] * 100)
    cfg = StoreConfig(root_dir=tmp_path / "m", commitlog_file_size=FILE_SIZE, ha_listen_port=0)
    with MessageStore.open(cfg) as m:
        master = ha_service.serve(m)
        assert isinstance(master, HAMaster)
        with slave_store(tmp_path / "s", master.port) as s:
            slave = ha_slave(s)
            wait_until(lambda: slave.diverged, 60, "divergence detected")
            assert "diverging data" in (slave.last_error or "")
            assert "replication stopped" in (slave.last_error or "")
            wait_until(lambda: not slave.running, 60, "replication thread stopped")
            assert log_bytes(s, 0, s.max_physical_offset) == slave_log  # nothing spliced
            assert master.connection_count() == 0 or wait_until(
                lambda: master.connection_count() == 0, 60, "link closed"
            )
