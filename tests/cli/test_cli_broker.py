"""``mqstore broker`` processes: the HA port follows the remoting port (RocketMQ's
listenPort + 1), so two brokers start side by side with only ``--port`` given; and a
read command works on a store while a broker holds it."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mqstore.message import Message
from mqstore.remoting.values import SendStatus
from tests.helpers import SMALL_STORE_FLAGS, cli_process, until


def _free_port_pair() -> int:
    """A port p with p and p + 1 free just now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port < 65535:
            with socket.socket() as s2:
                try:
                    s2.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
    raise RuntimeError("no pair of free ports")


@contextmanager
def broker(root: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """A broker process; yields it and its stdout lines up to ``remoting on``."""
    with cli_process(["broker", "--store", str(root), *SMALL_STORE_FLAGS, *args]) as started:
        yield started.proc, started.lines


def test_two_brokers_start_side_by_side_with_only_their_ports(tmp_path: Path):
    a, b = _free_port_pair(), _free_port_pair()
    with (
        broker(tmp_path / "a", "--port", str(a)) as (pa, la),
        broker(tmp_path / "b", "--port", str(b)) as (pb, lb),
    ):
        assert f"HA port 127.0.0.1:{a + 1}" in la[0]
        assert f"HA port 127.0.0.1:{b + 1}" in lb[0]
        assert pa.poll() is None and pb.poll() is None
    assert pa.returncode == 0 and pb.returncode == 0


def test_consume_reads_a_store_while_a_broker_holds_it(tmp_path: Path):
    from mqstore.client.producer import Producer
    from mqstore.client.remote import RemoteTransport

    port = _free_port_pair()
    with broker(tmp_path / "s", "--port", str(port)):
        with Producer("p", RemoteTransport(f"127.0.0.1:{port}")) as producer:
            r = producer.send(Message(topic="live", body="héllo".encode(), tags="TagA"))
            assert r.status is SendStatus.SEND_OK

        def consumed() -> subprocess.CompletedProcess[str] | None:
            out = subprocess.run(
                [sys.executable, "-m", "mqstore.tools.cli", "consume", "--store",
                 str(tmp_path / "s"), "--topic", "live", "--queue-id", str(r.queue.queue_id)],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            return out if out.stdout else None

        # the broker's dispatcher writes the consume-queue unit a moment later
        out = until(consumed, 60, 0.2, "the message in the consume queue")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"q{r.queue.queue_id}@0 tags=TagA héllo"]


def test_sending_to_a_slave_says_it_is_a_read_only_slave(tmp_path: Path):
    from mqstore.client.producer import Producer
    from mqstore.client.remote import RemoteTransport
    from mqstore.remoting.errors import TransportError

    master, slave = _free_port_pair(), _free_port_pair()
    slave_args = ("--port", str(slave), "--role", "SLAVE", "--master-ha", f"127.0.0.1:{master + 1}")
    with (
        broker(tmp_path / "m", "--port", str(master)),
        broker(tmp_path / "s", *slave_args),
        Producer("p", RemoteTransport(f"127.0.0.1:{slave}")) as producer,
        pytest.raises(TransportError, match="is a read-only slave: send to its master"),
    ):
        producer.send(Message(topic="t", body=b"x"))
