"""User errors of the ``mqstore`` command line, walked with real subprocesses.

Each is one line on stderr and the exit code ``mqstore --help`` documents, never a
traceback: an illegal topic, a store path that is a file, a port in use, a store locked
by another process, a bad size or count, a path that holds no store, an output that
exists, a closed pipe, Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore import Message, MessageStore, StoreConfig
from tests.helpers import SMALL_STORE_FLAGS

SMALL = SMALL_STORE_FLAGS
USAGE, BUSY, INTERRUPTED, OUTPUT_CLOSED = 2, 3, 130, 141


@pytest.fixture
def sigint_reaches_children() -> Iterator[None]:
    """Children start with SIGINT's default action, as from a terminal (a shell that runs
    pytest as a background job makes it ignored, and exec keeps an ignored signal)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "mqstore.tools.cli", *args]


def mqstore(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _cmd(*args), cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def one_line(stderr: str) -> str:
    """The one error line of ``stderr`` (geometry notes of produce/broker aside)."""
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if ": geometry: " not in line]
    assert len(lines) == 1, stderr
    return lines[0]


def small_store(root: Path, messages: int = 0, body: bytes = b"m") -> StoreConfig:
    cfg = StoreConfig(
        root_dir=root,
        commitlog_file_size=1 << 20,
        mapped_file_size_consume_queue=4000,
        max_hash_slot_num=100,
        max_index_num=400,
    )
    with MessageStore.open(cfg) as store:
        for i in range(messages):
            store.put_message(Message(topic="t", body=body + b" %d" % i, tags="TagA"))
        store.wait_dispatched(timeout=30)
    return cfg


def test_an_illegal_topic_is_refused_in_one_line(tmp_path: Path):
    r = mqstore("produce", "--store", "s", *SMALL, "--topic", "../x", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "illegal topic name '../x'" in one_line(r.stderr)
    assert not (tmp_path / "x").exists()


def test_a_store_path_that_is_a_file_is_refused(tmp_path: Path):
    (tmp_path / "f").write_text("not a store")
    for command in (["produce", *SMALL, "--topic", "t"], ["consume", "--topic", "t"]):
        r = mqstore(command[0], "--store", "f", *command[1:], cwd=tmp_path)
        assert r.returncode == USAGE
        assert "f is a file, not a store directory" in one_line(r.stderr)


def test_a_segment_size_below_the_minimum_is_refused(tmp_path: Path):
    r = mqstore("produce", "--store", "s", "--file-size", "1000", "--topic", "t", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "commitlog_file_size must be >= 4096, got 1000" in one_line(r.stderr)


def test_a_size_that_is_not_a_number_is_refused(tmp_path: Path):
    r = mqstore("produce", "--store", "s", "--file-size", "1x", "--topic", "t", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "--file-size: not a size in bytes" in one_line(r.stderr)


@pytest.mark.parametrize("count", ["0", "-5"])
def test_a_count_below_one_is_refused(tmp_path: Path, count: str):
    r = mqstore("produce", "--store", "s", *SMALL, "--topic", "t", "--count", count, cwd=tmp_path)
    assert r.returncode == USAGE
    assert "--count: must be a positive integer" in one_line(r.stderr)
    assert not (tmp_path / "s").exists()


def test_a_store_locked_by_another_process_is_busy(tmp_path: Path):
    cfg = small_store(tmp_path / "s")
    with MessageStore.open(cfg):
        r = mqstore("produce", "--store", "s", "--topic", "t", cwd=tmp_path)
    assert r.returncode == BUSY
    assert "is in use by another process" in one_line(r.stderr)


def test_a_broker_port_in_use_is_busy_and_leaves_no_store(tmp_path: Path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        r = mqstore("broker", "--store", "s", *SMALL, "--port", port, cwd=tmp_path)
    assert r.returncode == BUSY
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in one_line(r.stderr)
    assert not (tmp_path / "s").exists()


def test_consume_refuses_a_path_that_holds_no_store_and_creates_nothing(tmp_path: Path):
    r = mqstore("consume", "--store", "typo", "--topic", "t", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "typo: no such directory" in one_line(r.stderr)
    assert not (tmp_path / "typo").exists()
    (tmp_path / "empty").mkdir()
    r = mqstore("consume", "--store", "empty", "--topic", "t", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "holds no store" in one_line(r.stderr)
    assert list((tmp_path / "empty").iterdir()) == []


def test_a_closed_pipe_ends_consume_quietly(tmp_path: Path):
    small_store(tmp_path / "s", 1500, body=b"x" * 100)  # ~170 KB of output: past a pipe's buffer
    p = subprocess.Popen(
        _cmd("consume", "--store", "s", "--topic", "t", "--limit", "1500"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None and p.stderr is not None
    assert p.stdout.readline().startswith(b"q0@0 tags=TagA xxx")
    p.stdout.close()  # what `| head -1` does
    assert p.wait(timeout=60) == OUTPUT_CLOSED
    assert p.stderr.read() == b""


@pytest.mark.usefixtures("sigint_reaches_children")
def test_ctrl_c_during_produce_exits_130_with_one_line(tmp_path: Path):
    p = subprocess.Popen(
        _cmd("produce", "--store", "s", *SMALL, "--topic", "t", "--count", "100000000"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    assert p.stdout.readline().startswith("PUT_OK")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == INTERRUPTED
    assert one_line(err) == "mqstore produce: interrupted"


def test_export_to_an_existing_output_fails_before_spark_starts(tmp_path: Path):
    small_store(tmp_path / "s", 3)
    (tmp_path / "out.parquet").mkdir()
    t0 = time.monotonic()
    r = mqstore("export", "s", "--parquet", "out.parquet", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "out.parquet already exists" in one_line(r.stderr)
    assert time.monotonic() - t0 < 5  # no JVM was started


def test_audit_of_a_path_that_holds_no_store_fails_before_spark_starts(tmp_path: Path):
    r = mqstore("audit", "nothing-here", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "nothing-here" in one_line(r.stderr)


def test_help_documents_every_exit_code_and_version_is_printed(tmp_path: Path):
    r = mqstore("--help", cwd=tmp_path)
    assert r.returncode == 0
    for code in ("0 ", "1 ", "2 ", "3 ", "130", "141"):
        assert f"\n  {code}" in r.stdout
    v = mqstore("--version", cwd=tmp_path)
    assert v.returncode == 0 and v.stdout.startswith("mqstore ")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.usefixtures("sigint_reaches_children")
def test_ctrl_c_during_audit_exits_130_without_a_py4j_traceback(tmp_path: Path):
    pytest.importorskip("pyspark")
    small_store(tmp_path / "s", 50)
    p = subprocess.Popen(
        _cmd("audit", "s"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Ctrl-C reaches the whole process group, the JVM too
    )
    assert p.stderr is not None
    assert p.stderr.readline().startswith("mqstore audit: starting Spark")
    time.sleep(3)  # inside the JVM's start or the first stage
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == INTERRUPTED
    assert "Traceback" not in err and "ERROR" not in err
    assert err.rstrip().endswith("mqstore audit: interrupted")
