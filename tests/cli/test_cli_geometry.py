"""The quickstart's store (small segments and index, not RocketMQ's defaults) opens with
``mqstore consume`` and ``mqstore broker`` with no size flags: the sizes come from its
files."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "mqstore.tools.cli"]


@pytest.fixture(scope="module")
def quickstart_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("qs") / "store"
    done = subprocess.run(
        [*CLI, "quickstart", str(root), "--no-spark", "--messages", "120"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def test_consume_reads_the_quickstart_store_with_no_size_flags(quickstart_store: Path):
    done = subprocess.run(
        [*CLI, "consume", "--store", str(quickstart_store), "--topic", "orders", "--limit", "3"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3


def test_broker_serves_the_quickstart_store_with_no_size_flags(quickstart_store: Path):
    proc = subprocess.Popen(
        [*CLI, "broker", "--store", str(quickstart_store), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "remoting on" in line:
                break
        assert any("remoting on" in x for x in lines), (lines, proc.stderr.read())
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    segment = next((quickstart_store / "commitlog").iterdir()).stat().st_size
    assert segment != 1 << 30
    assert f"CommitLog segments {segment} bytes (files)" in err
    assert "index files 50000 slots x 200000 entries (files)" in err


def _serving(argv: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if "remoting on" in line:
            return proc, line.rsplit(" ", 1)[-1].strip()
    proc.kill()
    raise AssertionError(proc.communicate()[1])


def test_broker_with_the_4_9_property_format_stores_as_rocketmq_4_9(tmp_path: Path):
    from mqstore import MessageStore, StoreConfig
    from mqstore.client.producer import Producer
    from mqstore.client.remote import RemoteTransport
    from mqstore.message import Message, decode_offset_msg_id

    root = tmp_path / "s"
    proc, address = _serving(
        ["broker", "--store", str(root), "--port", "0", "--file-size", "65536",
         "--cq-file-size", "6000", "--index-slots", "50", "--index-num", "200",
         "--property-format", "4.9"]
    )  # fmt: skip
    try:
        with RemoteTransport(address) as t, Producer("pg", t) as producer:
            sent = producer.send(Message("T", b"x", tags="A", keys="k"))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    # The index geometry is given: with a single file of few entries, the slots the
    # (random) UNIQ_KEY hashes to may fit more than one geometry of that size.
    opened = StoreConfig(root_dir=root, max_hash_slot_num=50, max_index_num=200)
    with MessageStore.open(opened) as s:
        rec = s.look_message_by_offset(decode_offset_msg_id(sent.offset_msg_id)[1])
    assert rec is not None
    assert rec.properties_string == (
        f"KEYS\x01k\x02UNIQ_KEY\x01{sent.msg_id}\x02CLUSTER\x01DefaultCluster\x02TAGS\x01A"
    )
