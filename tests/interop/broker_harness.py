"""Harness for the ali-ons interop tests: a real broker on 127.0.0.1 and node runners.

:class:`LiveBroker` runs our broker (MessageStore + BrokerCore + BrokerServer, name
server on the same port) inside the test process on a free port; ``restart()`` closes
everything and reopens the same store directory, as a broker restart does (offsets
must come back from ``config/consumerOffset.json``). :class:`BrokerProcess` runs
``mqstore broker`` as a child process instead. :func:`run_node` runs one of the
ali-ons scripts next to this file with JSON options and returns its JSON output lines.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer

HERE = Path(__file__).resolve().parent


class LiveBroker:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.store: MessageStore | None = None
        self.core: BrokerCore | None = None
        self.server: BrokerServer | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> LiveBroker:
        self.store = MessageStore.open(StoreConfig(root_dir=str(self.root)))
        self.core = BrokerCore(self.store)
        self.core.start()
        self.server = BrokerServer(self.core, host="127.0.0.1", port=0)
        self.port = self.server.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.core is not None:
            self.core.shutdown()
        if self.store is not None:
            self.store.close()
        self.server = self.core = self.store = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def live_broker(tmp_path: Path) -> Iterator[LiveBroker]:
    """A :class:`LiveBroker` on a fresh store under ``tmp_path``; stopped after."""
    b = LiveBroker(tmp_path / "store").start()
    yield b
    b.stop()


def run_node(node: str, script: str, opts: dict[str, Any], timeout_s: float = 60) -> list[dict]:
    """Run ``node script '<opts json>'``; its stdout JSON lines (asserts exit 0)."""
    proc = subprocess.run(
        [node, str(HERE / script), json.dumps(opts)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        cwd=HERE,
    )
    assert proc.returncode == 0, f"{script} failed:\n{proc.stderr[-4000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


class BrokerProcess:
    """``mqstore broker`` as a child process on a free port; ``stop`` sends SIGTERM
    (a clean shutdown: offsets persisted), ``start`` may run it again on the same
    store directory and port."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.proc: subprocess.Popen[bytes] | None = None
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        cmd = [sys.executable, "-m", "mqstore.tools.cli", "broker", "--store", str(self.root),
               "--port", str(self.port), "--ha-port", "0"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                assert self.proc.poll() is None, f"{cmd} exited with {self.proc.returncode}"
                assert time.monotonic() < deadline, f"{cmd} did not listen within 30 s"
                time.sleep(0.05)

    def stop(self) -> int:
        """SIGTERM and wait; the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(30)
        self.proc = None
        return code


def create_topic(addr: str, topic: str, queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC to the broker at ``addr``, as ``mqadmin updateTopic``
    sends it, over a client of its own."""
    from mqstore.client.remoting_client import RemotingClient
    from tests.namesrv import processes

    client = RemotingClient()
    try:
        processes.create_topic(client, addr, topic, queues)
    finally:
        client.close()


def broker_with_topic(
    root: Path, topic: str, queues: int, messages: int, *, tags: str | None = None
) -> BrokerProcess:
    """``mqstore broker`` started on ``root`` with ``topic`` created with ``queues``
    queues (UPDATE_AND_CREATE_TOPIC, as ``mqadmin updateTopic`` sends it) and holding
    ``messages`` messages with bodies ``m-0``, ``m-1``, ... sent by a producer (so
    spread round-robin over the queues); stopped again if any of that fails."""
    from mqstore.client.producer import Producer
    from mqstore.client.remote import RemoteTransport
    from mqstore.message import Message

    b = BrokerProcess(root).start()
    try:
        create_topic(b.address, topic, queues)
        with RemoteTransport(b.address) as t, Producer("pg", t) as p:
            for i in range(messages):
                p.send(Message(topic, f"m-{i}".encode(), tags=tags))
    except BaseException:
        b.stop()
        raise
    return b
