"""Each install a user can choose runs what it is for: the bare package and every extra
of ``pyproject.toml`` go into a fresh venv of their own (pip, from a wheel built from
this tree), and the commands that extra exists for run there with nothing else on the
path.

What each one is for (README "Requirements"):

* no extra: the embedded store, ``mqstore produce`` / ``consume``, ``mqstore broker``
  (remoting) and ``mqstore namesrv``;
* ``grpc``: ``mqstore broker --grpc-port`` (the 5.x endpoint) and the official client;
* ``spark``: ``mqstore audit`` (with Java 17 or 21);
* ``bench``: the flush lab with its plot and its persist-queue reference;
* ``test``: the test suite and the linter;
* ``dev``: all of the above (the environment these tests themselves run in).

Installing is slow (seconds to minutes per extra, mostly pip resolving and unpacking
from its cache), so the venvs are built once per module, several at a time, and the
tests are marked slow. Without pip or a reachable package index they skip, saying so.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

# pip and Spark on a busy machine can take many minutes (the spark test once waited 9 for
# its venv at a load average of 25): more than the suite's per-test default of 600 s.
pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(1800)]

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]
INSTALLED = ("", "grpc", "spark", "bench", "test")
"""What gets a venv: the bare package and every extra but ``dev`` (their union)."""
PIP_TIMEOUT = 900


def _pip(*args: str, timeout: float = PIP_TIMEOUT) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def _last_lines(text: str, n: int = 15) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("WARNING"))[-3000:]


@dataclass(frozen=True, slots=True)
class Venv:
    """A venv holding the package with one extra (``""``: none), and nothing else."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def env(self) -> dict[str, str]:
        """The environment of a user of this venv: its bin/ first, the dev venv off the
        path, no PYTHONPATH."""
        dev_bin = str(Path(sys.executable).parent)
        path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != dev_bin]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(PATH=os.pathsep.join([str(self.bin), *path]), VIRTUAL_ENV=str(self.root))
        return env

    def run(self, *cmd: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        exe = str(self.bin / cmd[0])
        return subprocess.run(
            [exe, *cmd[1:]], cwd=cwd, env=self.env(), capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip

    def start(self, *cmd: str, cwd: Path) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(self.bin / cmd[0]), *cmd[1:]], cwd=cwd, env=self.env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip


def _build_wheel(work: Path) -> Path:
    """A wheel of this tree, built from a copy (the build never writes into the repo)."""
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("store", "tools"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    r = _pip("wheel", "--no-deps", "-q", "-w", str(work / "wheel"), str(src))
    assert r.returncode == 0, f"building the wheel failed:\n{_last_lines(r.stderr)}"
    shutil.rmtree(src)
    (wheel,) = (work / "wheel").glob("mqstore-*.whl")
    return wheel


def _install(work: Path, wheel: Path, extra: str) -> Venv:
    """A fresh venv with ``wheel[extra]`` installed by pip (no bytecode compiled: it is
    the slow part and changes nothing about what imports)."""
    root = work / f"venv-{extra or 'bare'}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    spec = f"{wheel}[{extra}]" if extra else str(wheel)
    r = _pip("--python", str(root / "bin" / "python"), "install", "-q", "--no-compile", spec)
    assert r.returncode == 0, f"pip install {extra or '(bare)'} failed:\n{_last_lines(r.stderr)}"
    return Venv(root)


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Venv]]]:
    """One venv per install, built two at a time in the background; removed at the end."""
    if importlib.util.find_spec("pip") is None:
        pytest.skip("pip is not installed in this environment")
    work = tmp_path_factory.mktemp("install")
    probe = _pip("download", "--no-deps", "-q", "-d", str(work / "probe"), "lz4", timeout=300)
    if probe.returncode != 0:
        pytest.skip(f"no package index reachable: {_last_lines(probe.stderr, 2)}")
    wheel = _build_wheel(work)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {extra: pool.submit(_install, work, wheel, extra) for extra in INSTALLED}
        try:
            yield futures
        finally:
            for f in futures.values():
                f.cancel()
    shutil.rmtree(work, ignore_errors=True)


def _venv(venvs: dict[str, Future[Venv]], extra: str) -> Venv:
    return venvs[extra].result(timeout=PIP_TIMEOUT * 2)


def _started(proc: subprocess.Popen[str], marker: str) -> str:
    """The first stdout line holding ``marker`` (the process's output if it exits first)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if marker in line:
            return line
    proc.wait(timeout=10)
    err = proc.stderr.read() if proc.stderr else ""
    raise AssertionError(f"exited {proc.returncode} before {marker!r}:\n{err[-3000:]}")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


# ------------------------------------------------------------------- declarations


def test_dev_is_the_union_of_every_other_extra() -> None:
    (dev,) = EXTRAS["dev"]
    named = set(dev.removeprefix("mqstore[").removesuffix("]").split(","))
    assert named == set(EXTRAS) - {"dev"}


def test_no_extra_repeats_a_core_dependency() -> None:
    def name(req: str) -> str:
        return re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0].lower()

    core = {name(r) for r in PYPROJECT["project"]["dependencies"]}
    for extra, reqs in EXTRAS.items():
        assert not core & {name(r) for r in reqs}, extra


# ------------------------------------------------------------------- no extra


def test_the_bare_install_imports_the_store_and_its_clients(
    venvs: dict[str, Future[Venv]], tmp_path: Path
) -> None:
    v = _venv(venvs, "")
    code = (
        "from mqstore import MessageStore, StoreConfig, Message; "
        "from mqstore.client.producer import Producer; "
        "from mqstore.client.consumer import PushConsumer; "
        "from mqstore.pop import PopService; print('ok')"
    )
    r = v.run("python", "-c", code, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "ok"


def test_the_bare_install_produces_and_consumes(
    venvs: dict[str, Future[Venv]], tmp_path: Path
) -> None:
    v = _venv(venvs, "")
    small = ("--file-size", str(1 << 20))
    p = v.run("mqstore", "produce", "--store", "s", *small, "--topic", "t", "--count", "3",
              cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    c = v.run("mqstore", "consume", "--store", "s", "--topic", "t", cwd=tmp_path)
    assert c.returncode == 0, c.stderr[-3000:]
    assert len(c.stdout.strip().splitlines()) == 3


def test_the_bare_install_serves_a_broker_and_a_name_server(
    venvs: dict[str, Future[Venv]], tmp_path: Path
) -> None:
    v = _venv(venvs, "")
    broker = v.start("mqstore", "broker", "--store", "s", "--file-size", str(1 << 20),
                     "--port", "0", "--ha-port", "0", cwd=tmp_path)  # fmt: skip
    try:
        assert "remoting on" in _started(broker, "remoting on")
    finally:
        _stop(broker)
    namesrv = v.start("mqstore", "namesrv", "--port", "0", cwd=tmp_path)
    try:
        assert _started(namesrv, "127.0.0.1:")
    finally:
        _stop(namesrv)


# ------------------------------------------------------------------- extras


def test_the_grpc_extra_serves_the_5x_endpoint(
    venvs: dict[str, Future[Venv]], tmp_path: Path
) -> None:
    v = _venv(venvs, "grpc")
    broker = v.start("mqstore", "broker", "--store", "s", "--file-size", str(1 << 20),
                     "--port", "0", "--ha-port", "0", "--grpc-port", "0", cwd=tmp_path)  # fmt: skip
    try:
        assert "grpc on" in _started(broker, "grpc on")
    finally:
        _stop(broker)
    r = v.run("python", "-c", "import rocketmq, grpc; print('ok')", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]


def test_the_spark_extra_audits_a_store(venvs: dict[str, Future[Venv]], tmp_path: Path) -> None:
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("no Java on PATH or JAVA_HOME: the audit needs Java 17 or 21")
    v = _venv(venvs, "spark")
    p = v.run("mqstore", "produce", "--store", "s", "--file-size", str(1 << 20), "--topic", "t",
              "--count", "5", cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    a = v.run("mqstore", "audit", "s", cwd=tmp_path, timeout=600)
    assert a.returncode == 0, (a.stdout + a.stderr)[-3000:]


def test_the_bench_extra_runs_the_flush_lab_with_its_plot(
    venvs: dict[str, Future[Venv]], tmp_path: Path
) -> None:
    v = _venv(venvs, "bench")
    r = v.run("mqstore", "bench", "flush", "--quick", "--plot", "lab.png", cwd=tmp_path,
              timeout=600)  # fmt: skip
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "persist-queue" in r.stdout
    assert (tmp_path / "lab.png").stat().st_size > 0
    m = v.run("python", "-c", "import mfusepy", cwd=tmp_path)
    assert m.returncode == 0 or "libfuse" in m.stderr, m.stderr[-3000:]


def test_the_test_extra_runs_tests_and_the_linter(
    venvs: dict[str, Future[Venv]], tmp_path: Path
) -> None:
    v = _venv(venvs, "test")
    t = v.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider",
              "tests/store/test_geometry.py", cwd=REPO)  # fmt: skip
    assert t.returncode == 0, (t.stdout + t.stderr)[-3000:]
    assert " passed" in t.stdout
    lint = v.run("ruff", "check", "--no-cache", "store", "tools", cwd=REPO)
    assert lint.returncode == 0, (lint.stdout + lint.stderr)[-3000:]
