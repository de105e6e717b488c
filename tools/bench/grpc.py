"""``mqstore bench grpc``: the RocketMQ 5.x client over gRPC against the remoting path.

One broker core over one ASYNC_FLUSH store serves both protocols in this process: the
remoting server (``BrokerServer``) and the gRPC endpoint (``GrpcEndpoint``). Measured in
the same run, each on its own topic of 4 queues, 100-byte bodies with a tag:

1. **send, 5.x client**: ``rocketmq-python-client``'s ``Producer.send`` (synchronous,
   one message per call) over gRPC;
2. **send, remoting**: the project's ``Producer.send`` over TCP remoting;
3. **receive+ack, 5.x client**: ``SimpleConsumer.receive(32, 30 s)`` then ``ack`` of
   each message, until every sent message is acknowledged (POP underneath);
4. **receive+ack, remoting POP**: the project's ``SimpleConsumer`` over remoting
   (POP_MESSAGE + ACK_MESSAGE), the same work on the other protocol;
5. **pull, remoting**: a ``LitePullConsumer`` reading the topic (queue-level pull: no
   per-message ack), for scale.

Rates are messages per second over the wall time of the whole walk, one thread each,
client and server in one process (the client's own threads included). The phases run
``--repeat`` times interleaved; the table shows medians. The load average before and
after is printed: compare figures only within one run.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from mqstore import Message, MessageStore, StoreConfig
from mqstore.tools.bench._harness import Benchmark, Option, median

QUEUES = 4
BODY = b"x" * 100

OPTIONS = (
    Option("--messages", int, 3000, "messages per phase", quick=300),
    Option("--repeat", int, 3, "interleaved repetitions", quick=1),
)


def _grpc_send(endpoint: Any, topic: str, n: int) -> float:
    from rocketmq import ClientConfiguration, Credentials, Producer
    from rocketmq import Message as GrpcMessage

    p = Producer(ClientConfiguration(endpoint.address, Credentials()), (topic,))
    p.startup()
    try:
        t = time.perf_counter()
        for _ in range(n):
            m = GrpcMessage()
            m.topic = topic
            m.body = BODY
            m.tag = "TagA"
            p.send(m)
        return time.perf_counter() - t
    finally:
        p.shutdown()


def _remoting_send(address: str, topic: str, n: int) -> float:
    from mqstore.client.producer import Producer
    from mqstore.client.remote import RemoteTransport

    with RemoteTransport(address) as tr, Producer("bench-producer", tr) as p:
        t = time.perf_counter()
        for _ in range(n):
            p.send(Message(topic, BODY, tags="TagA"))
        return time.perf_counter() - t


def _grpc_receive_ack(endpoint: Any, topic: str, n: int) -> float:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    cfg = ClientConfiguration(endpoint.address, Credentials())
    c = SimpleConsumer(cfg, "bench-grpc", {topic: FilterExpression()}, await_duration=5)
    c.startup()
    try:
        done = 0
        t = time.perf_counter()
        while done < n:
            for m in c.receive(32, 30):
                c.ack(m)
                done += 1
        return time.perf_counter() - t
    finally:
        c.shutdown()


def _remoting_receive_ack(address: str, topic: str, n: int) -> float:
    from mqstore.client.pop_remote import RemotePop
    from mqstore.client.remoting_client import RemotingClient
    from mqstore.client.simple_consumer import SimpleConsumer

    client = RemotingClient()
    try:
        c = SimpleConsumer("bench-pop", {topic: "*"}, RemotePop(client, address),
                           await_duration=1)  # fmt: skip
        done = 0
        t = time.perf_counter()
        while done < n:
            for m in c.receive(32, invisible_duration=30):
                c.ack(m)
                done += 1
        return time.perf_counter() - t
    finally:
        client.close()


def _remoting_pull(address: str, topic: str, n: int, group: str) -> float:
    from mqstore.client.lite_pull_consumer import LitePullConsumer
    from mqstore.client.remote import RemoteTransport

    with RemoteTransport(address) as tr:
        c = LitePullConsumer(group, tr)
        c.subscribe(topic)
        c.start()
        try:
            got = 0
            t = time.perf_counter()
            while got < n:
                got += len(c.poll(timeout=1.0))
            return time.perf_counter() - t
        finally:
            c.shutdown()


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Serve both protocols over one store; time each phase ``--repeat`` times."""
    from mqstore.broker.core import BrokerCore
    from mqstore.broker.server import BrokerServer
    from mqstore.broker.topics import TopicConfig
    from mqstore.grpc import GrpcConfig, GrpcEndpoint

    logging.getLogger("rocketmq-python-client").setLevel(logging.CRITICAL)
    n = args.messages
    out: dict[str, Any] = {"loadavg": list(os.getloadavg()), "messages": n}
    cfg = StoreConfig(root_dir=work / "grpc", commitlog_file_size=64 << 20)
    runs: dict[str, list[float]] = {}
    with MessageStore.open(cfg) as store:
        core = BrokerCore(store)
        core.start()
        remoting = BrokerServer(core, host="127.0.0.1", port=0)
        remoting.start()
        endpoint = GrpcEndpoint(core, GrpcConfig(port=0))
        endpoint.start()
        try:
            for rep in range(args.repeat):
                g_topic, r_topic = f"BenchGrpc{rep}", f"BenchRemoting{rep}"
                for t in (g_topic, r_topic):
                    core.create_topic(TopicConfig(t, QUEUES, QUEUES))
                phases: dict[str, Callable[[], float]] = {
                    "send_grpc": partial(_grpc_send, endpoint, g_topic, n),
                    "send_remoting": partial(_remoting_send, remoting.address, r_topic, n),
                    "receive_ack_grpc": partial(_grpc_receive_ack, endpoint, g_topic, n),
                    "receive_ack_remoting_pop": partial(
                        _remoting_receive_ack, remoting.address, r_topic, n),
                    "pull_remoting": partial(
                        _remoting_pull, remoting.address, r_topic, n, f"bench-pull{rep}"),
                }  # fmt: skip
                for name, phase in phases.items():
                    runs.setdefault(name, []).append(n / phase())
        finally:
            endpoint.stop()
            remoting.stop()
            core.shutdown()
    out["per_second"] = {k: round(median(v)) for k, v in runs.items()}
    out["runs"] = {k: [round(x) for x in v] for k, v in runs.items()}
    out["loadavg_after"] = list(os.getloadavg())
    return out


def report(out: dict[str, Any], _args: argparse.Namespace) -> str:
    """The printed table."""
    r = out["per_second"]
    lines = [f"load average before/after: {out['loadavg']} / {out['loadavg_after']}",
             f"{out['messages']} messages of 100 bytes per phase; medians of "
             f"{len(out['runs']['send_grpc'])} runs"]  # fmt: skip
    labels = {
        "send_grpc": "send, 5.x client (gRPC)",
        "send_remoting": "send, remoting",
        "receive_ack_grpc": "receive+ack, 5.x client (gRPC)",
        "receive_ack_remoting_pop": "receive+ack, remoting POP",
        "pull_remoting": "pull, remoting (no acks)",
    }
    for key, label in labels.items():
        lines.append(f"{label:34s} {r[key]:>9,d} msg/s")
    send = r["send_grpc"] / r["send_remoting"]
    receive_ack = r["receive_ack_grpc"] / r["receive_ack_remoting_pop"]
    lines.append(f"gRPC / remoting: send {send:.2f}x, receive+ack {receive_ack:.2f}x")
    return "\n".join(lines)


main = Benchmark("grpc", __doc__, OPTIONS, measure, report).main


if __name__ == "__main__":
    raise SystemExit(main())
