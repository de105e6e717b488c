"""A new user's first mistakes with the ``mqstore`` command line (issue 33, "First
errors"), walked with real subprocesses: each is one line on stderr and a documented
exit code, found before the work starts, never a traceback and never a changed folder.

Spark's own failures (no Java, a master that is malformed or down) are caught before a
JVM starts, so these tests need PySpark installed but start no Spark.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mqstore import Message, MessageStore, StoreConfig
from mqstore.tools.cli import main
from tests.cli.test_cli_errors import USAGE, mqstore, one_line, small_store


def _no_java_env(tmp_path: Path) -> dict[str, str]:
    """This environment with an empty PATH and no JAVA_HOME (the interpreter is run
    by its full path, so only ``java`` goes missing)."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    empty = tmp_path / "empty-path"
    empty.mkdir(exist_ok=True)
    env["PATH"] = str(empty)
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    r = subprocess.run(
        [sys.executable, "-m", "mqstore.tools.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return r.returncode, r.stdout, r.stderr


def _error_line(stderr: str) -> str:
    """The one error line of a Spark command (its "starting Spark" notice aside)."""
    return one_line("\n".join(x for x in stderr.splitlines() if "starting Spark" not in x))


def test_audit_without_java_says_so_in_one_line_and_exits_2(tmp_path: Path):
    pytest.importorskip("pyspark")
    small_store(tmp_path / "s", messages=3)
    rc, _, err = _run(["audit", "s"], tmp_path, _no_java_env(tmp_path))
    assert rc == USAGE
    assert "Java 17 or 21 not found: no java on PATH" in _error_line(err)


def test_audit_with_a_java_home_that_holds_no_java_exits_2(tmp_path: Path):
    pytest.importorskip("pyspark")
    small_store(tmp_path / "s", messages=3)
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-jdk")}
    rc, _, err = _run(["audit", "s"], tmp_path, env)
    assert rc == USAGE
    assert f"Java 17 or 21 not found: JAVA_HOME={tmp_path / 'no-jdk'} has no bin/java" in (
        _error_line(err)
    )


def test_quickstart_without_java_skips_the_audit_step_and_passes(tmp_path: Path):
    pytest.importorskip("pyspark")
    rc, out, err = _run(["quickstart", "--messages", "20"], tmp_path, _no_java_env(tmp_path))
    assert rc == 0, err
    assert "  5. Spark audit skipped (Java 17 or 21 not found" in out
    assert "RESULT: OK" in out
    assert "Traceback" not in err


def test_a_malformed_spark_master_is_refused_before_anything_starts(tmp_path: Path):
    small_store(tmp_path / "s", messages=3)
    r = mqstore("audit", "s", "--master", "bogus", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "argument --master: bad Spark master URL 'bogus'" in one_line(r.stderr)


def test_an_unreachable_spark_master_fails_at_once_with_one_line(tmp_path: Path):
    pytest.importorskip("pyspark")
    small_store(tmp_path / "s", messages=3)
    with socket.socket() as bound:  # bound, never listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        master = f"spark://127.0.0.1:{bound.getsockname()[1]}"
        r = mqstore("audit", "s", "--master", master, cwd=tmp_path)
    assert r.returncode == USAGE
    assert f"Spark master {master} cannot be reached" in _error_line(r.stderr)


def test_audit_report_that_is_a_directory_fails_before_the_audit(tmp_path: Path):
    small_store(tmp_path / "s", messages=3)
    (tmp_path / "out").mkdir()
    r = mqstore("audit", "s", "--report", "out", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "--report out is a directory: give a file name" in one_line(r.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "s"]  # no out.tmp


def test_audit_report_in_a_missing_directory_fails_before_the_audit(tmp_path: Path):
    small_store(tmp_path / "s", messages=3)
    r = mqstore("audit", "s", "--report", "nowhere/r.json", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "does not exist" in one_line(r.stderr)


def test_produce_refuses_a_folder_of_other_files_and_leaves_it_as_it_was(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("mine")
    r = mqstore("produce", "--store", "docs", "--topic", "t", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "docs holds files but no store" in one_line(r.stderr)
    assert [p.name for p in (tmp_path / "docs").iterdir()] == ["notes.txt"]


def test_quickstart_on_an_existing_default_size_store_keeps_its_geometry(tmp_path: Path):
    root = tmp_path / "store"
    with MessageStore.open(StoreConfig(root_dir=root)) as store:  # RocketMQ's 1 GiB segments
        store.put_message(Message(topic="t", body=b"before"))
    assert main(["quickstart", str(root), "--messages", "30", "--no-spark"]) == 0
    assert [p.stat().st_size for p in (root / "commitlog").iterdir()] == [1 << 30]


@pytest.mark.parametrize(
    "master",
    ["local", "local[*]", "local[2]", "local[2,4]", "local[*,3]", "local-cluster[2,1,1024]",
     "spark://127.0.0.1:7077", "spark://a:7077,b:7077", "yarn", "k8s://https://h:6443"],
)  # fmt: skip
def test_master_urls_spark_takes_are_accepted(master: str):
    from mqstore.tools.spark.session import check_master

    check_master(master)


@pytest.mark.parametrize(
    "master", ["bogus", "local[0]", "local[", "spark://host", "spark://:7077", "k8s://", ""]
)
def test_master_urls_spark_refuses_are_refused_in_one_line(master: str):
    from mqstore.tools.spark.session import SparkSetupError, check_master

    with pytest.raises(SparkSetupError, match="bad Spark master URL"):
        check_master(master)


def _serve(answer: bytes | None) -> tuple[socket.socket, threading.Thread]:
    """A TCP listener on a free port that accepts, reads what comes and sends ``answer``
    (None: says nothing) until it is closed; not a Spark master either way."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def loop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed by the test
                break
            held.append(conn)
            if answer is not None:
                conn.recv(4096)
                conn.sendall(answer)
        for c in held:
            c.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return server, thread


@pytest.mark.parametrize(
    ("answer", "why"),
    [(None, "sent no answer within 5 s"), (b"HTTP/1.1 400 Bad Request\r\n\r\n", "answers, but")],
    ids=["silent", "garbage"],
)
def test_a_port_that_accepts_but_is_no_spark_master_fails_in_one_line(
    tmp_path: Path, answer: bytes | None, why: str
):
    pytest.importorskip("pyspark")
    small_store(tmp_path / "s", messages=3)
    server, thread = _serve(answer)
    master = f"spark://127.0.0.1:{server.getsockname()[1]}"
    try:
        r = mqstore("audit", "s", "--master", master, cwd=tmp_path)
    finally:
        server.close()
        thread.join(5)
    assert r.returncode == USAGE
    line = _error_line(r.stderr)
    assert f"Spark master {master} cannot be reached" in line
    assert why in line and "not a Spark master" in line


def test_the_answer_of_a_pyspark_4_master_to_the_probe_is_recognised():
    from mqstore.tools.spark import masterprobe

    # The first 17 bytes PySpark 4.3's standalone Master sent back to request id 0x6D71:
    # an RPC failure frame ("Could not find mqstore-probe.").
    recorded = bytes.fromhex("0000000000000a9b050000000000006d71")
    assert masterprobe.is_answer(recorded, 0x6D71)
    assert not masterprobe.is_answer(recorded, 0x6D72)
    assert not masterprobe.is_answer(b"HTTP/1.1 400 Bad Request", 0x6D71)
