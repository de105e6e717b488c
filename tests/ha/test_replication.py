"""HA replication over real TCP on 127.0.0.1: processes, in-process stores, fake peers.

Every wait is a deadline poll (``wait_until`` / ``HAProcess.wait_for``); intervals are
shortened through the config so the whole module runs in seconds.
"""

from __future__ import annotations

import filecmp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mqstore import (
    BrokerRole,
    ConfigError,
    FlushDiskType,
    GetStatus,
    Message,
    MessageStore,
    PutStatus,
    StoreConfig,
)
from mqstore.ha import service as ha_service
from mqstore.ha.master import HAMaster
from mqstore.ha.protocol import Heartbeat, ReportOffset, Transfer
from mqstore.ha.slave import HASlave
from tests.ha.procs import (
    REPO,
    FakeMaster,
    FakeSlave,
    HAProcess,
    assert_same_log,
    log_bytes,
    wait_until,
)

pytestmark = pytest.mark.integration

FILE_SIZE = 1 << 20
SMALL_FILE = 64 * 1024


def master_cfg(root: Path, role: BrokerRole = BrokerRole.SYNC_MASTER, **kw) -> StoreConfig:
    kw.setdefault("commitlog_file_size", FILE_SIZE)
    return StoreConfig(root_dir=root, broker_role=role, ha_listen_port=0, **kw)


def slave_cfg(root: Path, port: int, **kw) -> StoreConfig:
    kw.setdefault("commitlog_file_size", FILE_SIZE)
    kw.setdefault("ha_reconnect_interval_ms", kw.pop("reconnect_ms", 100))
    return StoreConfig(
        root_dir=root,
        broker_role=BrokerRole.SLAVE,
        ha_master_address=f"127.0.0.1:{port}",
        **kw,
    )


def msg(i: int, size: int = 1024) -> Message:
    tag = f"m{i}-".encode()
    return Message(topic="ha", body=tag + b"x" * (size - len(tag)), queue_id=i % 4)


def ha_master(store: MessageStore) -> HAMaster:
    assert isinstance(store.ha, HAMaster)
    return store.ha


def ha_slave(store: MessageStore) -> HASlave:
    assert isinstance(store.ha, HASlave)
    return store.ha


def caught_up(master: MessageStore, slave: MessageStore) -> bool:
    return slave.max_physical_offset == master.max_physical_offset


def streaming(master: HAMaster) -> bool:
    """A slave is connected and its stream's start is chosen."""
    return any(link.next_transfer_offset is not None for link in master.links())


def consumequeue_available() -> bool:
    """The ConsumeQueue has landed: its module exists and the store serves reads from it."""
    return (REPO / "store" / "consumequeue" / "queue.py").exists() and hasattr(
        MessageStore, "get_message"
    )


# ---------------------------------------------------------------- processes


def replicate_between_processes(tmp_path: Path, *master_args: str) -> dict[str, Any]:
    """Run a master process in ``tmp_path / "m"`` (``master_args`` must make it produce;
    it starts once a slave connects) and a slave process in ``tmp_path / "s"`` that
    follows it, until the slave holds the whole log the master produced; stop both.
    Returns the master's status once it produced everything."""
    master = HAProcess(
        "master", tmp_path / "m", tmp_path, "master", *master_args, "--after-connect"
    )
    slave = None
    try:
        port = master.wait_for(lambda s: s.get("port"), 120, "listening")["port"]
        slave = HAProcess(
            "slave", tmp_path / "s", tmp_path, "slave", "--master", f"127.0.0.1:{port}"
        )
        done = master.wait_for(lambda s: s["produced_all"], 120, "producing everything")
        final = done["max_offset"]
        slave.wait_for(lambda s: s["max_offset"] == final, 120, f"slave at {final}")
        slave.terminate()
        master.terminate()
    finally:
        master.cleanup()
        if slave is not None:
            slave.cleanup()
    return done


@pytest.mark.slow
@pytest.mark.parametrize(("role", "threads"), [("ASYNC_MASTER", 2), ("SYNC_MASTER", 4)])
def test_master_under_load_and_slave_process_end_byte_identical(
    tmp_path: Path, role: str, threads: int
):
    count = 12_000  # ~14 MB of 1 KiB messages over 1 MiB files
    done = replicate_between_processes(
        tmp_path, "--role", role, "--produce", str(count), "--threads", str(threads)
    )
    assert sum(done["statuses"].values()) == count
    if role == "SYNC_MASTER":
        assert done["statuses"] == {"PUT_OK": count}
    final = done["max_offset"]
    lo, hi = assert_same_log(tmp_path / "m", tmp_path / "s", FILE_SIZE)
    assert (lo, hi) == (0, final)
    assert hi > 10 * FILE_SIZE


@pytest.mark.slow
def test_master_and_slave_processes_have_identical_consume_queues(tmp_path: Path):
    if not consumequeue_available():
        pytest.skip(
            "the ConsumeQueue has not landed yet (store/consumequeue/queue.py and "
            "MessageStore.get_message): nothing to compare beyond the CommitLog"
        )
    replicate_between_processes(tmp_path, "--produce", "3000")
    m_cq, s_cq = tmp_path / "m" / "consumequeue", tmp_path / "s" / "consumequeue"
    files = sorted(p.relative_to(m_cq) for p in m_cq.rglob("*") if p.is_file())
    assert files, "the master wrote no consume queue files"
    assert files == sorted(p.relative_to(s_cq) for p in s_cq.rglob("*") if p.is_file())
    _, mismatch, errors = filecmp.cmpfiles(m_cq, s_cq, [str(f) for f in files], shallow=False)
    assert (mismatch, errors) == ([], [])


def test_cli_broker_runs_a_master_until_sigterm(tmp_path: Path):
    cfg = StoreConfig(root_dir=tmp_path / "b", commitlog_file_size=FILE_SIZE)
    with MessageStore.open(cfg) as pre:
        pre.put_message(msg(0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(tmp_path / "b"),
         "--port", "0", "--role", "ASYNC_MASTER", "--ha-port", "0", "--file-size", str(FILE_SIZE)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:  # it exited: say why (a port in use, ...) instead of an empty line
            proc.wait(15)
            raise AssertionError(proc.stderr.read() if proc.stderr else "no output")
        assert "ASYNC_MASTER" in line and "HA port" in line, line
        port = int(line.rsplit(":", 1)[1].split()[0])
        probe = FakeSlave(port)
        probe.report(0)
        first = probe.next_event(timeout=10)
        assert isinstance(first, Transfer) and first.physical_offset == 0
        probe.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- in process


def test_new_empty_slave_starts_at_the_masters_last_file(tmp_path: Path):
    with MessageStore.open(
        master_cfg(tmp_path / "m", BrokerRole.ASYNC_MASTER, commitlog_file_size=SMALL_FILE)
    ) as m:
        master = ha_service.serve(m)
        m.put_messages([msg(i) for i in range(40)])  # ~3 files of 64 KiB: batch per 40
        for i in range(150):
            m.put_message(msg(i))
        assert len(m.segments.files) >= 3
        last_start = m.segments.files[-1].file_from_offset
        with MessageStore.open(
            slave_cfg(tmp_path / "s", master.port, commitlog_file_size=SMALL_FILE)
        ) as s:
            wait_until(lambda: caught_up(m, s), 60, "slave caught up")
            assert s.min_physical_offset == last_start
            end = m.max_physical_offset
            assert log_bytes(s, last_start, end) == log_bytes(m, last_start, end)


def test_sync_master_without_slave_is_slave_not_available(tmp_path: Path):
    # a slave timeout far beyond any machine's slowness: waiting for it would show
    with MessageStore.open(master_cfg(tmp_path / "m", slave_timeout_ms=120_000)) as m:
        t0 = time.monotonic()
        r = m.put_message(msg(0))
        assert r.status is PutStatus.SLAVE_NOT_AVAILABLE
        assert r.status.stored
        assert time.monotonic() - t0 < 60  # at once, not after slave_timeout
        assert m.look_message_by_offset(r.physical_offset) is not None


def test_sync_master_put_ok_means_the_slave_has_it(tmp_path: Path):
    with MessageStore.open(master_cfg(tmp_path / "m")) as m:
        port = ha_master(m).port
        with MessageStore.open(slave_cfg(tmp_path / "s", port)) as s:
            wait_until(lambda: ha_master(m).connection_count(), 60, "slave connected")
            for i in range(200):
                r = m.put_message(msg(i))
                assert r.status is PutStatus.PUT_OK
                assert s.max_physical_offset >= r.physical_offset + r.size
            rs = m.put_messages([msg(i) for i in range(10)])
            assert {r.status for r in rs} == {PutStatus.PUT_OK}
            assert s.max_physical_offset >= rs[-1].physical_offset
            assert s.put_message(msg(0)).status is PutStatus.SERVICE_NOT_AVAILABLE


def test_sync_master_times_out_when_no_slave_acks(tmp_path: Path):
    with MessageStore.open(master_cfg(tmp_path / "m", slave_timeout_ms=300)) as m:
        fake = FakeSlave(ha_master(m).port)
        try:
            fake.report(0)
            wait_until(lambda: streaming(ha_master(m)), 60, "link started")
            t0 = time.monotonic()
            r = m.put_message(msg(0))
            assert r.status is PutStatus.FLUSH_SLAVE_TIMEOUT
            assert 0.25 < time.monotonic() - t0 < 60  # after the slave timeout, not never
            assert isinstance(fake.next_event(), Transfer)  # it was sent, never acked
        finally:
            fake.close()


def test_slave_too_far_behind_is_not_available(tmp_path: Path):
    cfg = master_cfg(
        tmp_path / "m", ha_slave_fallbehind_max=4096, compress_msg_body_over=1 << 20,
        slave_timeout_ms=120_000,
    )  # fmt: skip
    with MessageStore.open(cfg) as m:
        fake = FakeSlave(ha_master(m).port)
        try:
            fake.report(0)
            wait_until(lambda: ha_master(m).connection_count(), 60, "connected")
            t0 = time.monotonic()
            assert m.put_message(msg(0, size=8192)).status is PutStatus.SLAVE_NOT_AVAILABLE
            assert time.monotonic() - t0 < 60  # at once, not after slave_timeout
        finally:
            fake.close()


def test_failed_flush_wins_over_the_replica_wait(tmp_path: Path, monkeypatch):
    cfg = master_cfg(tmp_path / "m", flush_disk_type=FlushDiskType.SYNC_FLUSH)
    with MessageStore.open(cfg) as m:
        monkeypatch.setattr(m.flusher, "wait_for", lambda _o: PutStatus.FLUSH_DISK_TIMEOUT)
        assert m.put_message(msg(0)).status is PutStatus.FLUSH_DISK_TIMEOUT
        assert {r.status for r in m.put_messages([msg(1)])} == {PutStatus.FLUSH_DISK_TIMEOUT}


def test_sync_flush_and_sync_replication_both_ok(tmp_path: Path):
    cfg = master_cfg(tmp_path / "m", flush_disk_type=FlushDiskType.SYNC_FLUSH)
    with (
        MessageStore.open(cfg) as m,
        MessageStore.open(slave_cfg(tmp_path / "s", ha_master(m).port)),
    ):
        wait_until(lambda: ha_master(m).connection_count(), 60, "slave connected")
        r = m.put_message(msg(0))
        assert r.status is PutStatus.PUT_OK
        assert m.flushed_physical_offset >= r.physical_offset + r.size


def test_async_master_and_no_wait_messages_never_wait(tmp_path: Path):
    with MessageStore.open(master_cfg(tmp_path / "a", BrokerRole.ASYNC_MASTER)) as a:
        ha_service.serve(a)
        assert a.put_message(msg(0)).status is PutStatus.PUT_OK  # no slave at all
    with MessageStore.open(master_cfg(tmp_path / "s")) as s:
        m = msg(1)
        m.wait_store_msg_ok = False
        assert s.put_message(m).status is PutStatus.PUT_OK


def test_master_sends_heartbeats_when_idle(tmp_path: Path):
    with MessageStore.open(master_cfg(tmp_path / "m", ha_send_heartbeat_interval_ms=50)) as m:
        m.put_message(msg(0))
        fake = FakeSlave(ha_master(m).port)
        try:
            fake.report(0)
            first = fake.next_event()
            assert isinstance(first, Transfer) and first.physical_offset == 0
            fake.report(first.end_offset)
            beat = fake.next_event()
            assert beat == Heartbeat(first.end_offset)
        finally:
            fake.close()


def test_master_closes_a_silent_slave(tmp_path: Path):
    with MessageStore.open(master_cfg(tmp_path / "m", ha_housekeeping_interval_ms=200)) as m:
        master = ha_master(m)
        fake = FakeSlave(master.port)
        try:
            fake.report(0)
            wait_until(lambda: master.connection_count() == 1, 60, "connected")
            wait_until(lambda: master.connection_count() == 0, 60, "housekeeping close")
            assert "housekeeping" in (master.last_error or "")
        finally:
            fake.close()


def test_slave_reports_at_once_and_leaves_a_silent_master(tmp_path: Path):
    fake = FakeMaster()
    try:
        # a heartbeat interval far beyond any machine's slowness: a report that waited
        # for it would show
        cfg = slave_cfg(
            tmp_path / "s", fake.port, ha_housekeeping_interval_ms=200,
            ha_send_heartbeat_interval_ms=120_000,
        )  # fmt: skip
        with MessageStore.open(cfg) as s:
            sock, conn = fake.accept(timeout=60)
            sock.settimeout(60)
            t0 = time.monotonic()
            conn.receive_data(sock.recv(8))
            assert conn.next_event() == ReportOffset(0)
            assert time.monotonic() - t0 < 60  # not after the heartbeat interval
            second, _ = fake.accept(timeout=60)  # the slave gave up on us and reconnected
            assert "sent nothing" in (ha_slave(s).last_error or "")
            sock.close()
            second.close()
    finally:
        fake.close()


def test_master_refuses_to_start_on_a_taken_port(tmp_path: Path):
    with MessageStore.open(master_cfg(tmp_path / "a")) as a:
        taken = ha_master(a).port
        cfg = master_cfg(tmp_path / "b").with_(ha_listen_port=taken)
        with pytest.raises(OSError):
            MessageStore.open(cfg)
        with MessageStore.open(cfg.with_(broker_role=BrokerRole.ASYNC_MASTER)) as b:
            assert b.ha is None  # an ASYNC_MASTER opens offline
        assert ha_master(a).host == "127.0.0.1"


def test_which_service_a_store_runs(tmp_path: Path):
    with MessageStore.open(StoreConfig(root_dir=tmp_path / "a")) as a:
        assert a.ha is None  # ASYNC_MASTER: offline until served
    slave_only = StoreConfig(root_dir=tmp_path / "s", broker_role=BrokerRole.SLAVE)
    with MessageStore.open(slave_only) as s:
        assert s.ha is None  # a SLAVE with no master address is just read-only
        with pytest.raises(ConfigError):
            ha_service.serve(s)
    with pytest.raises(ConfigError, match="HOST:PORT"):
        MessageStore.open(slave_only.with_(ha_master_address="nowhere"))
    with pytest.raises(ConfigError, match="ha_listen_port"):
        MessageStore.open(master_cfg(tmp_path / "m").with_(ha_listen_port=70000))


def test_slave_serves_pulls_and_key_lookups_of_replicated_messages(tmp_path: Path):
    with (
        MessageStore.open(master_cfg(tmp_path / "m")) as m,
        MessageStore.open(slave_cfg(tmp_path / "s", ha_master(m).port)) as s,
    ):
        wait_until(lambda: ha_master(m).connection_count(), 60, "slave connected")
        sent = [
            m.put_message(Message(topic="ha", body=f"b{i}".encode(), tags="T", keys=[f"k{i}"]))
            for i in range(20)
        ]
        assert {r.status for r in sent} == {PutStatus.PUT_OK}
        wait_until(lambda: s.max_offset_in_queue("ha", 0) == 20, 60, "slave dispatched")
        g = s.get_message("g", "ha", 0, 0, 32, "T")
        assert g.status is GetStatus.FOUND
        assert [x.body for x in g.messages] == [f"b{i}".encode() for i in range(20)]
        assert [x.body for x in s.query_by_key("ha", "k7").messages] == [b"b7"]


def test_a_slave_reopened_as_master_takes_over_where_the_master_stopped(tmp_path: Path):
    """README "Failing over to a slave": stop the slave, open its directory as a master."""
    with MessageStore.open(master_cfg(tmp_path / "m", BrokerRole.ASYNC_MASTER)) as m:
        port = ha_service.serve(m).port
        ends = [m.put_message(msg(i)) for i in range(8)]
        with MessageStore.open(slave_cfg(tmp_path / "s", port)) as s:
            wait_until(lambda: caught_up(m, s), 60, "slave caught up")
    with MessageStore.open(master_cfg(tmp_path / "s", BrokerRole.ASYNC_MASTER)) as promoted:
        assert promoted.wait_dispatched(60)
        assert promoted.max_offset_in_queue("ha", 0) == 2
        r = promoted.put_message(msg(8))
        assert r.status is PutStatus.PUT_OK
        assert r.physical_offset == ends[-1].physical_offset + ends[-1].size
        assert r.queue_offset == 2  # queue 0 held messages 0 and 4
