"""The audit on a Spark standalone cluster (master + worker on 127.0.0.1) equals local mode."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import until
from tests.spark.test_audit import _faulty_store

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(predicate, what: str, timeout: float = 180.0) -> None:
    """Poll until ready; generous because a JVM's start on a loaded 2-core machine takes a minute."""
    until(predicate, timeout, 0.2, what)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def standalone(tmp_path) -> Iterator[str]:
    """A master and one worker from the installed pyspark; both stopped by PID."""
    import pyspark

    home = Path(pyspark.__file__).parent
    env = os.environ | {
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER_HOST": "127.0.0.1",
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
        "PYSPARK_PYTHON": sys.executable,
    }
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    cls = str(home / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []
    master_log = tmp_path / "master.log"
    try:
        with open(master_log, "wb") as log:
            procs.append(
                subprocess.Popen(
                    [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(_free_port())],
                    stdout=log, stderr=subprocess.STDOUT, env=env,
                )
            )  # fmt: skip
        _wait_for(lambda: _listening(port), "master")
        with open(tmp_path / "worker.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [cls, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                     "--cores", "2", "--memory", "1g", "--webui-port", str(_free_port())],
                    stdout=log, stderr=subprocess.STDOUT, env=env,
                )
            )  # fmt: skip
        _wait_for(lambda: b"Registering worker" in master_log.read_bytes(), "worker")
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _comparable(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in ("elapsed_s", "master")}


def test_cluster_audit_equals_local(spark, standalone, tmp_path):
    from mqstore.tools.spark.audit import run_audit

    gen = _faulty_store(tmp_path)
    local = run_audit(gen.root, report=tmp_path / "local.json")
    assert local.findings
    out = tmp_path / "cluster.json"
    proc = subprocess.run(
        [sys.executable, "-m", "mqstore.tools.spark.audit", str(gen.root), "--master", standalone,
         "--report", str(out)],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    cluster = json.loads(out.read_text())
    assert cluster["master"] == standalone
    assert _comparable(cluster) == _comparable(json.loads((tmp_path / "local.json").read_text()))
