"""Processes for the differential tests: the real RocketMQ 4.9.8 name server and broker,
``mqstore namesrv`` and ``mqstore broker``, Java client programs and mqadmin.

Every process gets free ports chosen at run time (a 4.9.8 broker also binds
``listenPort - 2``, the VIP channel, and ``listenPort + 1``, HA, on all addresses, so all
three are probed free), its own HOME and directories under the test's temp dir, and its
output in a log file there. :class:`Fleet` starts them and stops every one it started
(SIGTERM, then SIGKILL after 15 s).

The oracle is found at ``$MQSTORE_SHARED/oracles/rocketmq-4.9.8`` (``../shared`` beside the
repository by default, as :data:`tests.conftest.SHARED`); :func:`require_oracle` skips with
the reason when it or ``java`` is absent.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqstore.client.remoting_client import RemotingClient
from mqstore.remoting import fastjson
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import V4_9_8, RequestCode, ResponseCode
from tests.conftest import SHARED
from tests.helpers import SMALL_STORE_FLAGS, until

ORACLE = SHARED / "oracles" / "rocketmq-4.9.8"
ORACLE_533 = SHARED / "oracles" / "rocketmq-5.3.3"
"""RocketMQ 5.3.3 (timer wheel, POP, SQL92 on): its own name server, broker and client."""
JAVA_DIR = Path(__file__).resolve().parent / "java"
"""Our Java client programs (run with ``bin/java-run``)."""
BOOT_S = 60.0
"""How long a JVM may take to print "boot success" on a loaded 2-core machine."""


def require_oracle() -> Path:
    """The oracle folder; skips the test with the reason when it or java is missing."""
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH: the RocketMQ 4.9.8 oracle tests need Java 17+")
    if not (ORACLE / "bin" / "namesrv").is_file():
        pytest.skip(f"the RocketMQ 4.9.8 oracle is not at {ORACLE} (set MQSTORE_SHARED)")
    if not list(Path("/usr/share/java").glob("netty-*.jar")):
        pytest.skip(f"the oracle's jars are not installed: run {ORACLE / 'setup.sh'}")
    return ORACLE


def require_oracle_533() -> Path:
    """The 5.3.3 oracle folder; skips the test with the reason when it or java is missing."""
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH: the RocketMQ 5.3.3 oracle tests need Java 17+")
    if not (ORACLE_533 / "bin" / "broker").is_file():
        pytest.skip(f"the RocketMQ 5.3.3 oracle is not at {ORACLE_533} (set MQSTORE_SHARED)")
    return ORACLE_533


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port(*, also: Sequence[int] = ()) -> int:
    """A port the OS gives (bind to 0) such that ``port + d`` for every ``d`` in ``also``
    is free too (on all addresses, as a 4.9.8 broker binds)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("0.0.0.0", 0))
            port = int(s.getsockname()[1])
        if all(0 < port + d < 65536 and _bindable(port + d) for d in also):
            return port
    raise AssertionError("no free port block found")


def broker_port() -> int:
    """A ``listenPort`` for a 4.9.8 broker: it, ``-2`` (VIP) and ``+1`` (HA) free."""
    return free_port(also=(-2, 1))


class Proc:
    """One child process whose output goes to ``log``; ``start`` waits for ``ready`` in it."""

    def __init__(self, label: str, cmd: list[str], log: Path, ready: str, *, address: str,
                 env: dict[str, str] | None = None) -> None:  # fmt: skip
        self.label = label
        self.cmd = cmd
        self.log = log
        self.ready = ready
        self.address = address
        self.env = env
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = BOOT_S) -> Proc:
        """Run the command; returns once ``ready`` appeared in its output.

        Raises:
            AssertionError: it exited, or did not print ``ready`` within ``timeout_s``.
        """
        self.log.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.env, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.log.read_bytes()[offset:].decode(errors="replace")
            if self.ready in text:
                return self
            if self.popen.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"{self.label} did not start:\n{text[-3000:]}")
            time.sleep(0.05)

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL (a crash: nothing flushed, no unregistration) and reap."""
        if self.popen is not None:
            if self.popen.poll() is None:
                self.popen.kill()
            self.popen.wait(30)
        self.popen = None

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after 15 s; reaped."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(30)
        self.popen = None


def _java_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    # java takes user.home (where RocketMQ's client writes its logs) from the passwd entry,
    # not from HOME: JAVA_TOOL_OPTIONS sets it for java-run's JVM too.
    opts = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} -Duser.home={home}".strip()
    return {**os.environ, "HOME": str(home), "TMPDIR": str(home), "JAVA_TOOL_OPTIONS": opts}


@dataclass(frozen=True, slots=True)
class Ran:
    """A finished program: exit code and output."""

    code: int
    out: str
    err: str

    def lines(self, prefix: str) -> list[str]:
        """Stdout lines starting with ``prefix``."""
        return [ln for ln in self.out.splitlines() if ln.startswith(prefix)]


class Fleet:
    """Starts real and mqstore processes under ``root``; :meth:`close` stops them all."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[Proc] = []
        self.conversations: list[Conversation] = []
        self._n = 0
        self._lock = threading.Lock()

    def _dir(self, label: str) -> Path:
        with self._lock:
            self._n += 1
            d = self.root / f"{self._n:02d}-{label}"
        d.mkdir(parents=True)
        return d

    def _started(self, proc: Proc) -> Proc:
        self.procs.append(proc)
        return proc.start()

    # ----------------------------------------------------------- the real 4.9.8

    def real_namesrv(self) -> Proc:
        """A real 4.9.8 name server; ``address`` is its ``127.0.0.1:port``."""
        d, port = self._dir("real-ns"), free_port()
        cmd = [str(ORACLE / "bin" / "namesrv"), str(port), str(d)]
        return self._started(Proc("real namesrv", cmd, d / "out.log", "boot success",
                                  address=f"127.0.0.1:{port}", env=_java_env(d / "home")))  # fmt: skip

    def real_broker(self, name: str, namesrv: str, *conf: str) -> Proc:
        """A real 4.9.8 master broker ``name`` registering with ``namesrv`` (``;``-separated);
        ``conf`` are extra ``key=value`` lines for its broker.conf (see ``bin/mkconf``)."""
        d, port = self._dir(f"real-{name}"), broker_port()
        conf_file = d / "broker.conf"
        mk = [str(ORACLE / "bin" / "mkconf"), str(conf_file), name, str(port), str(d / "store"),
              namesrv, *conf]  # fmt: skip
        subprocess.run(mk, check=True, capture_output=True, timeout=30)
        cmd = [str(ORACLE / "bin" / "broker"), str(conf_file), str(d)]
        return self._started(Proc(f"real broker {name}", cmd, d / "out.log", "boot success",
                                  address=f"127.0.0.1:{port}", env=_java_env(d / "home")))  # fmt: skip

    # ----------------------------------------------------------- the real 5.3.3

    def real533(self, name: str, *conf: str, store: Path | None = None) -> tuple[Proc, Proc, Path]:
        """A real 5.3.3 name server and master broker ``name`` (``conf``: extra
        ``key=value`` lines, see its ``bin/mkconf``) on ``store`` (default: a new folder);
        (name server, broker, store dir)."""
        oracle = require_oracle_533()
        d, ns_port, port = self._dir(f"real533-{name}"), free_port(), broker_port()
        ns = self._started(Proc("real 5.3.3 namesrv", [str(oracle / "bin" / "namesrv"),
                                str(ns_port), str(d / "ns")], d / "ns.log", "boot success",
                                address=f"127.0.0.1:{ns_port}", env=_java_env(d / "ns-home")))  # fmt: skip
        conf_file, store = d / "broker.conf", store or d / "store"
        subprocess.run([str(oracle / "bin" / "mkconf"), str(conf_file), name, str(port),
                        str(store), ns.address, *conf], check=True, capture_output=True,
                       timeout=30)  # fmt: skip
        broker = self._started(Proc(f"real 5.3.3 broker {name}", [str(oracle / "bin" / "broker"),
                                    str(conf_file), str(d / "b")], d / "broker.log",
                                    "boot success", address=f"127.0.0.1:{port}",
                                    env=_java_env(d / "b-home")))  # fmt: skip
        return ns, broker, store

    def java533(self, source: Path, *args: str, timeout_s: float = 120) -> Ran:
        """Run the Java source file ``source ARGS`` with 5.3.3's ``bin/java-run`` (the 5.x
        client: ``setDeliverTimeMs`` and the rest of its API), own HOME."""
        home = self._dir(f"java533-{source.stem}") / "home"
        cmd = [str(require_oracle_533() / "bin" / "java-run"), str(source), *args]
        return _run(cmd, _java_env(home), timeout_s)

    # -------------------------------------------------------------------- mqstore

    def mq_namesrv(self, *flags: str) -> Proc:
        """``mqstore namesrv`` on a free port."""
        d, port = self._dir("mq-ns"), free_port()
        cmd = [sys.executable, "-m", "mqstore.tools.cli", "namesrv", "--port", str(port), *flags]
        return self._started(Proc("mqstore namesrv", cmd, d / "out.log", "mqstore namesrv: on",
                                  address=f"127.0.0.1:{port}"))  # fmt: skip

    def mq_broker(self, name: str, namesrv: str, *flags: str) -> Proc:
        """``mqstore broker`` ``name`` (small store files) registering with ``namesrv``; its
        store is ``store`` in the directory of its ``log``."""
        d, port = self._dir(f"mq-{name}"), free_port(also=(1,))
        cmd = [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(d / "store"),
               *SMALL_STORE_FLAGS, "--port", str(port), "--ha-port", "0", "--broker-name", name,
               "--namesrv", namesrv, *flags]  # fmt: skip
        return self._started(Proc(f"mqstore broker {name}", cmd, d / "out.log",
                                  "mqstore broker: registering", address=f"127.0.0.1:{port}"))  # fmt: skip

    # ---------------------------------------------------------------- programs

    def java(self, program: str, *args: str, timeout_s: float = 120) -> Ran:
        """Run ``tests/oracle/java/<program>.java ARGS`` with ``bin/java-run`` (own HOME)."""
        return self.java_file(JAVA_DIR / f"{program}.java", *args, timeout_s=timeout_s)

    def java_file(self, source: Path, *args: str, timeout_s: float = 120) -> Ran:
        """Run the Java source file ``source ARGS`` with ``bin/java-run`` (own HOME)."""
        home = self._dir(f"java-{source.stem}") / "home"
        cmd = [str(ORACLE / "bin" / "java-run"), str(source), *args]
        return _run(cmd, _java_env(home), timeout_s)

    def java_session(self, program: str, *args: str, ready: str = "ready") -> Conversation:
        """Start ``tests/oracle/java/<program>.java ARGS``, driven line by line over
        stdin/stdout; returns once it printed ``ready``. Stopped by :meth:`close`."""
        home = self._dir(f"java-{program}") / "home"
        cmd = [str(ORACLE / "bin" / "java-run"), str(JAVA_DIR / f"{program}.java"), *args]
        conv = Conversation(cmd, _java_env(home))
        self.conversations.append(conv)
        conv.expect(ready, BOOT_S)
        return conv

    def mqadmin(self, *args: str, timeout_s: float = 60, tries: int = 3) -> Ran:
        """The real ``mqadmin ARGS`` (own HOME). Run again, up to ``tries`` times, when it
        failed on a remoting timeout or connect failure: its calls wait 3 s, which a cold JVM on a loaded
        2-core machine can miss."""
        home = self._dir("mqadmin") / "home"
        for _ in range(tries):
            ran = _run([str(ORACLE / "bin" / "mqadmin"), *args], _java_env(home), timeout_s)
            if "rocketmq.remoting.exception" not in ran.err + ran.out:
                break
        return ran

    def close(self) -> None:
        """Stop every process started, newest first."""
        for c in self.conversations:
            c.close()
        self.conversations.clear()
        for p in reversed(self.procs):
            p.stop()
        self.procs.clear()


class Conversation:
    """A program answering one stdout line per stdin line (other output lines skipped)."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.popen = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, start_new_session=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self.lines.append("<eof>")
            self._cond.notify_all()

    def expect(self, word: str, timeout_s: float) -> list[str]:
        """The fields of the next unread line starting with ``word`` (AssertionError on
        exit or timeout)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                while self.lines:
                    line = self.lines.pop(0)
                    if line == "<eof>":
                        raise AssertionError(
                            f"program exited ({self.popen.poll()}) before {word!r}"
                        )
                    if line.split(" ", 1)[0] == word:
                        return line.split()[1:]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {word!r} line within {timeout_s} s")
                self._cond.wait(left)

    def ask(self, line: str, word: str, timeout_s: float = 120) -> list[int]:
        """Send ``line``; the integer fields of the answer line starting with ``word``."""
        assert self.popen.stdin is not None
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()
        return [int(f) for f in self.expect(word, timeout_s)]

    def close(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(30)


def _run(cmd: list[str], env: dict[str, str], timeout_s: float) -> Ran:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s,
                       check=False, stdin=subprocess.DEVNULL)  # fmt: skip
    return Ran(p.returncode, p.stdout, p.stderr)


def wait_until(
    predicate: Callable[[], bool], timeout_s: float = 30.0, step_s: float = 0.1
) -> float:
    """Seconds until ``predicate()`` held; AssertionError after ``timeout_s``."""
    start = time.monotonic()
    until(predicate, timeout_s, step_s, f"a condition within {timeout_s} s")
    return time.monotonic() - start


def remoting_call(
    addr: str, code: int, ext: dict[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    """One request over a connection of its own, as a 4.9.8 client sends it (version 409)."""
    client = RemotingClient()
    try:
        cmd = RemotingCommand(code=code, version=V4_9_8, ext_fields=ext or {}, body=body)
        return client.invoke(addr, cmd, 10.0)
    finally:
        client.close()


def route(namesrv: str, topic: str) -> dict[str, Any] | None:
    """GET_ROUTEINFO_BY_TOPIC's TopicRouteData (fastjson read), None for TOPIC_NOT_EXIST."""
    resp = remoting_call(namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    doc: dict[str, Any] = fastjson.loads(resp.body)
    return doc


def queues(namesrv: str, topic: str) -> dict[str, tuple[int, int, int]]:
    """The route's queue data by broker name: (read, write, perm); {} when none."""
    doc = route(namesrv, topic)
    return {
        q["brokerName"]: (q["readQueueNums"], q["writeQueueNums"], q["perm"])
        for q in (doc or {}).get("queueDatas", [])
    }


def create_topic(broker: str, topic: str, queue_nums: int = 4) -> None:
    """UPDATE_AND_CREATE_TOPIC as ``mqadmin updateTopic -b`` sends it."""
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queue_nums),
           "writeQueueNums": str(queue_nums), "perm": "6", "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": "0", "order": "false"}  # fmt: skip
    resp = remoting_call(broker, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def send_new(broker: str, topic: str) -> None:
    """One SEND_MESSAGE to ``topic`` with TBW102 as the default topic (auto-creation)."""
    ext = {"producerGroup": "oracle_pg", "topic": topic, "defaultTopic": "TBW102",
           "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
           "bornTimestamp": str(int(time.time() * 1000)), "flag": "0", "properties": "",
           "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}  # fmt: skip
    resp = remoting_call(broker, RequestCode.SEND_MESSAGE, ext, b"hello")
    assert resp.code == ResponseCode.SUCCESS, resp.remark
