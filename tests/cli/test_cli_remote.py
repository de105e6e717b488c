"""``mqstore send`` and ``mqstore consume --broker/--namesrv``: messages to and from a
running broker over TCP, through mqstore's own client, against ``mqstore broker`` and
(when Java and the oracle are here) the real RocketMQ 4.9.8 broker and name server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.cli.test_cli_errors import USAGE, mqstore, one_line
from tests.helpers import SMALL_STORE_FLAGS, cli_process

ORACLE = Path(__file__).resolve().parents[3] / "shared" / "oracles" / "rocketmq-4.9.8"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[str]:
    """A running ``mqstore broker`` on a free port: its remoting address."""
    store = str(tmp_path / "store")
    with cli_process(["broker", "--store", store, *SMALL_STORE_FLAGS, "--port", "0"]) as b:
        yield b.address


def _lines(r: subprocess.CompletedProcess[str]) -> list[str]:
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def _send_three_and_consume(flag: str, address: str, topic: str, cwd) -> list[str]:
    """Three sends through ``flag`` (--broker/--namesrv), each SEND_OK; then consume's lines,
    which must hold the three bodies."""
    sent = _lines(mqstore("send", flag, address, "--topic", topic, "--count", "3",
                          "--tags", "TagA", cwd=cwd))  # fmt: skip
    assert len(sent) == 3 and all(line.startswith("SEND_OK queue=") for line in sent)
    got = _lines(mqstore("consume", flag, address, "--topic", topic, cwd=cwd))
    assert sorted(line.split(" ", 2)[2] for line in got) == [
        f"hello from mqstore #{i}" for i in range(3)
    ]
    return got


def test_send_puts_messages_into_a_running_broker_and_consume_reads_them(broker, tmp_path):
    got = _send_three_and_consume("--broker", broker, "T", tmp_path)
    assert all(" tags=TagA " in line for line in got)


def test_send_to_one_queue_and_consume_from_an_offset(broker, tmp_path):
    _lines(mqstore("send", "--broker", broker, "--topic", "T", "--count", "3", "--queue-id",
                   "2", "--body", "b", cwd=tmp_path))  # fmt: skip
    got = _lines(mqstore("consume", "--broker", broker, "--topic", "T", "--queue-id", "2",
                         "--offset", "1", cwd=tmp_path))  # fmt: skip
    assert got == ["q2@1 tags=- b #1", "q2@2 tags=- b #2"]


def test_consume_from_a_broker_filters_by_tag_and_stops_at_the_limit(broker, tmp_path):
    for tag in ("TagA", "TagB"):
        _lines(mqstore("send", "--broker", broker, "--topic", "T", "--count", "4",
                       "--queue-id", "0", "--tags", tag, "--body", tag, cwd=tmp_path))  # fmt: skip
    got = _lines(mqstore("consume", "--broker", broker, "--topic", "T", "--tags", "TagB",
                         "--limit", "3", cwd=tmp_path))  # fmt: skip
    assert got == [f"q0@{4 + i} tags=TagB TagB #{i}" for i in range(3)]


def test_consume_of_a_topic_the_broker_does_not_have_says_so(broker, tmp_path):
    r = mqstore("consume", "--broker", broker, "--topic", "Nope", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == ""
    assert "no messages in topic 'Nope' (no route for it at" in one_line(r.stderr)


def test_send_to_an_address_where_nothing_listens_is_one_line_and_exit_2(tmp_path):
    with socket.socket() as bound:  # bound, never listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{bound.getsockname()[1]}"
        r = mqstore("send", "--broker", addr, "--topic", "T", cwd=tmp_path)
    assert r.returncode == USAGE
    assert f"mqstore send: no answer from {addr}" in one_line(r.stderr)


def test_send_needs_a_broker_or_a_name_server(tmp_path):
    r = mqstore("send", "--topic", "T", cwd=tmp_path)
    assert r.returncode == USAGE
    assert "one of the arguments --broker --namesrv is required" in one_line(r.stderr)


def test_consume_takes_a_store_or_a_broker_not_both(tmp_path):
    r = mqstore("consume", "--store", "s", "--broker", "127.0.0.1:1", "--topic", "T",
                cwd=tmp_path)  # fmt: skip
    assert r.returncode == USAGE
    assert "not allowed with argument" in one_line(r.stderr)


# ------------------------------------------------------------------ RocketMQ 4.9.8


def _free_port(offsets: tuple[int, ...] = (0,)) -> int:
    """A port P with P + each offset free right now (a RocketMQ broker also takes
    P - 2 and P + 1)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        try:
            with ExitStack() as stack:
                for off in offsets:
                    probe = stack.enter_context(socket.socket())
                    probe.bind(("127.0.0.1", port + off))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port block")


@contextmanager
def _java(args: list[str], home: Path) -> Iterator[None]:
    """A RocketMQ process until it says "boot success"; killed at exit."""
    p = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    assert p.stdout is not None
    try:
        seen = []
        for line in p.stdout:
            seen.append(line)
            if "boot success" in line:
                break
        assert seen and "boot success" in seen[-1], "".join(seen[-20:])
        yield
    finally:
        p.kill()
        p.communicate(timeout=60)


@pytest.mark.integration
def test_send_and_consume_against_the_real_rocketmq_498_broker(tmp_path):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("needs Java (the RocketMQ 4.9.8 oracle)")
    if not (ORACLE / "bin" / "broker").exists():
        pytest.skip(f"the RocketMQ 4.9.8 oracle is not at {ORACLE}")
    home = tmp_path / "home"
    home.mkdir()
    ns_port, broker_port = _free_port(), _free_port((-2, 0, 1))
    namesrv = f"127.0.0.1:{ns_port}"
    conf = tmp_path / "broker.conf"
    subprocess.run([ORACLE / "bin" / "mkconf", conf, "broker-r", str(broker_port),
                    tmp_path / "rstore", namesrv], check=True)  # fmt: skip
    with (
        _java([str(ORACLE / "bin" / "namesrv"), str(ns_port), str(tmp_path / "ns")], home),
        _java([str(ORACLE / "bin" / "broker"), str(conf), str(tmp_path / "b")], home),
    ):
        _send_three_and_consume("--namesrv", namesrv, "J", tmp_path)
