"""The official RocketMQ 5.x Node.js client (npm ``rocketmq-client-nodejs``) against the
endpoint: its PushConsumer receives and acknowledges every message, FIFO too.

The Node client checks each body against its digest (CRC32 as a decimal number, MD5 as
upper-case hex) and discards a mismatch as corrupted without acking it: an endpoint
labelling bodies with anything but what the proxy sends (MD5) has it receive nothing.
Skipped without node/npm (``tests/npm_deps.py``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mqstore.broker.core import BrokerCore
from mqstore.broker.pop_processors import broker_pop
from mqstore.grpc import GrpcEndpoint
from tests.grpc.conftest import FIFO_GROUP, GROUP, TOPIC, message
from tests.npm_deps import node_with

pytestmark = [pytest.mark.interop, pytest.mark.integration]

HERE = Path(__file__).resolve().parent / "node"
CLIENT = HERE / "node_modules" / "rocketmq-client-nodejs" / "dist" / "index.js"


@pytest.fixture(scope="module")
def node() -> str:
    return node_with(HERE, CLIENT, "the Node 5.x client tests")


def push_consume(node: str, ep: GrpcEndpoint, group: str, expect: int) -> list[dict[str, Any]]:
    """Run the Node PushConsumer until ``expect`` messages came; the message lines."""
    opts = {"endpoints": ep.address, "group": group, "topic": TOPIC, "expect": expect,
            "timeoutMs": 30_000, "settleMs": 1500}  # fmt: skip
    proc = subprocess.run(
        [node, str(HERE / "push_consume.js"), json.dumps(opts)],
        capture_output=True, text=True, timeout=90, check=False, cwd=HERE,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines[-1] == {"done": True, "count": expect}, proc.stderr[-4000:]
    return lines[:-1]


def test_node_push_consumer_receives_and_acks_every_message(
    node: str, producer: Any, endpoint: GrpcEndpoint, core: BrokerCore
) -> None:
    sent = {producer.send(message(f"n{i}".encode())).message_id: f"n{i}" for i in range(10)}
    got = push_consume(node, endpoint, GROUP, len(sent))
    assert {m["messageId"]: m["body"] for m in got} == sent
    assert broker_pop(core).service.in_flight(GROUP, TOPIC) == 0


def test_node_push_consumer_of_a_fifo_group_receives_each_group_in_order(
    node: str, producer: Any, endpoint: GrpcEndpoint, core: BrokerCore
) -> None:
    order = {"a": [f"a{i}" for i in range(5)], "b": [f"b{i}" for i in range(5)]}
    for i in range(5):
        for g, bodies in order.items():
            producer.send(message(bodies[i].encode(), message_group=g))
    got = push_consume(node, endpoint, FIFO_GROUP, 10)
    assert {g: [m["body"] for m in got if m["messageGroup"] == g] for g in order} == order
    assert broker_pop(core).service.in_flight(FIFO_GROUP, TOPIC) == 0
