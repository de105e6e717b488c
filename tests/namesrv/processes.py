"""Real ``mqstore namesrv`` and ``mqstore broker`` processes on 127.0.0.1 for the tests,
and a small remoting client to ask them."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from mqstore.client.remoting_client import RemotingClient
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from tests.helpers import SMALL_STORE_FLAGS, cli_process, until

SMALL = SMALL_STORE_FLAGS


@contextmanager
def process(args: list[str], ready: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A CLI process; yields it and the address after ``ready`` in its stdout."""
    with cli_process(args, ready) as started:
        yield started.proc, started.address


@contextmanager
def namesrv(expiry_s: float = 2.0) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A name server with a short expiry, scanning every 0.2 s."""
    args = ["namesrv", "--port", "0", "--expiry", str(expiry_s), "--scan-interval", "0.2"]
    with process(args, "mqstore namesrv: on") as pa:
        yield pa


@contextmanager
def broker(
    root: Path, name: str, namesrv_addr: str, *extra: str
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A master broker registering with ``namesrv_addr`` every 0.3 s."""
    args = ["broker", "--store", str(root), *SMALL, "--port", "0", "--broker-name", name]
    args += ["--namesrv", namesrv_addr, "--register-interval", "0.3", *extra]
    with process(args, "mqstore broker: remoting on") as pa:
        yield pa


def call(
    client: RemotingClient, addr: str, code: int, ext: dict[str, str] | None = None
) -> RemotingCommand:
    return client.invoke(addr, RemotingCommand(code=code, ext_fields=ext or {}), 5.0)


def create_topic(client: RemotingClient, broker_addr: str, topic: str, queues: int) -> None:
    ext = {"topic": topic, "readQueueNums": str(queues), "writeQueueNums": str(queues)}
    resp = call(client, broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def route(client: RemotingClient, namesrv_addr: str, topic: str) -> dict[str, Any] | None:
    """The route of ``topic`` as standard JSON, None for TOPIC_NOT_EXIST."""
    ext = {"topic": topic, "acceptStandardJsonOnly": "true"}
    resp = call(client, namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    doc: dict[str, Any] = json.loads(resp.body)
    return doc


def route_brokers(client: RemotingClient, namesrv_addr: str, topic: str) -> list[str]:
    doc = route(client, namesrv_addr, topic)
    return [] if doc is None else sorted(q["brokerName"] for q in doc["queueDatas"])


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> float:
    """Seconds until ``predicate()`` held; AssertionError after ``timeout_s``."""
    start = time.monotonic()
    until(predicate, timeout_s, 0.05)
    return time.monotonic() - start


class TwoBrokers(NamedTuple):
    """The addresses (and broker-b's process) of :func:`two_brokers`."""

    namesrv: str
    a: str
    b: str
    b_process: subprocess.Popen[str]


@contextmanager
def two_brokers(
    root: Path, client: RemotingClient, topic: str, expiry_s: float = 60.0
) -> Iterator[TwoBrokers]:
    """A name server and two masters, broker-a and broker-b (stores under ``root``),
    each with ``topic`` of 4 queues; yields once the name server routes it to both."""
    with (
        namesrv(expiry_s=expiry_s) as (_, ns),
        broker(root / "a", "broker-a", ns) as (_, a),
        broker(root / "b", "broker-b", ns) as (pb, b),
    ):
        create_topic(client, a, topic, 4)
        create_topic(client, b, topic, 4)
        wait_for(lambda: route_brokers(client, ns, topic) == ["broker-a", "broker-b"])
        yield TwoBrokers(ns, a, b, pb)
