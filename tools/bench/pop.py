"""``mqstore bench pop``: POP (message-level) consumption against queue-level pull.

In one run, on fresh stores under one temporary directory (64 MiB segments, 100-byte
bodies, 4 queues, one topic), measures:

* **receive+ack throughput**, messages / second to consume ``--messages`` messages:
  - embedded: a SimpleConsumer over a PopService in this process (receive 32, ack each:
    one checkpoint record per receive and queue, one ack record per message) against
    queue-level pull of the same messages with ``store.get_message`` (32 per call);
  - TCP: a SimpleConsumer over the broker's POP codes on 127.0.0.1 against a
    LitePullConsumer (rebalance, pull, offsets) of another group on the same topic;
  - both POP rows again with batch acks (``SimpleConsumer.ack_all``: one ack request and
    one ack record per received batch, ``*_pop_batch_ack``);
  each under ASYNC_FLUSH and SYNC_FLUSH (where an ack returns after its record is on
  disk);
* **redelivery delay**: a message popped and not acknowledged, for several invisible
  times: when it is received again (long polling), against the time asked for
  (``--rounds`` times each).

Figures vary with the load of the machine: compare within one run only.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from mqstore import FlushDiskType, Message, MessageStore, StoreConfig
from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.client.lite_pull_consumer import LitePullConsumer
from mqstore.client.pop_remote import RemotePop
from mqstore.client.remote import RemoteTransport
from mqstore.client.remoting_client import RemotingClient
from mqstore.client.simple_consumer import EmbeddedPop, PopTransport, SimpleConsumer
from mqstore.pop import PopService
from mqstore.tools.bench._harness import Benchmark, Option

TOPIC = "BenchPop"
QUEUES = 4
BODY = b"x" * 100

OPTIONS = (
    Option("--messages", int, 20_000, "messages consumed per contender", quick=2_000),
    Option("--rounds", int, 5, "redeliveries timed per invisible time", quick=3),
)


def open_store(root: Path, flush: FlushDiskType) -> MessageStore:
    """A fresh store of 64 MiB segments under ``root``."""
    return MessageStore.open(
        StoreConfig(
            root_dir=root, flush_disk_type=flush, commitlog_file_size=64 << 20,
            mapped_file_size_consume_queue=100_000 * 20, max_hash_slot_num=50_000,
            max_index_num=200_000,
        )
    )  # fmt: skip


def fill(store: MessageStore, n: int) -> None:
    """Put ``n`` messages spread over the topic's queues, and wait until dispatched."""
    store.put_messages([Message(topic=TOPIC, body=BODY, queue_id=i % QUEUES) for i in range(n)])
    assert store.wait_dispatched(60)


def pop_rate(transport: PopTransport, n: int, batch_ack: bool = False) -> float:
    """Messages per second to receive (32 at a time) and ack ``n`` messages by POP:
    each on its own, or each received batch in one request (``batch_ack``)."""
    group = "pop-batch-group" if batch_ack else "pop-group"
    c = SimpleConsumer(group, {TOPIC: "*"}, transport, await_duration=0.2)
    got, t0 = 0, time.perf_counter()
    while got < n:
        batch = c.receive(32, invisible_duration=60)
        if not batch:
            raise RuntimeError(f"POP stalled after {got} of {n}")
        if batch_ack:
            c.ack_all(batch)
        else:
            for m in batch:
                c.ack(m)
        got += len(batch)
    return n / (time.perf_counter() - t0)


def store_pull_rate(store: MessageStore, n: int) -> float:
    """Messages per second to read ``n`` messages with ``get_message`` (32 per call)."""
    got, t0 = 0, time.perf_counter()
    for q in range(QUEUES):
        offset = 0
        while True:
            r = store.get_message("pull-group", TOPIC, q, offset, 32)
            if not r.messages:
                break
            got += len(r.messages)
            offset = r.next_begin_offset
    assert got == n, got
    return n / (time.perf_counter() - t0)


def lite_pull_rate(address: str, n: int) -> float:
    """Messages per second for a LitePullConsumer over TCP to poll ``n`` messages."""
    with RemoteTransport(address) as t:
        c = LitePullConsumer("pull-group", t)
        c.subscribe(TOPIC)
        c.start()
        got, t0 = 0, time.perf_counter()
        while got < n:
            batch = c.poll(timeout=5.0)
            if not batch:
                raise RuntimeError(f"pull stalled after {got} of {n}")
            got += len(batch)
        rate = n / (time.perf_counter() - t0)
        c.shutdown()
    return rate


def throughput(root: Path, flush: FlushDiskType, n: int) -> dict[str, float]:
    """The receive rates (embedded and TCP; POP with single and batch acks, and pull)
    under ``flush``."""
    out: dict[str, float] = {}
    store = open_store(root / f"emb-{flush.name}", flush)
    fill(store, n)
    with PopService(store) as pop:
        out["embedded_pop"] = pop_rate(EmbeddedPop(pop), n)
        out["embedded_pop_batch_ack"] = pop_rate(EmbeddedPop(pop), n, batch_ack=True)
    out["embedded_pull"] = store_pull_rate(store, n)
    store.close()

    store = open_store(root / f"tcp-{flush.name}", flush)
    fill(store, n)
    core = BrokerCore(store, BrokerConfig())
    core.start()
    core.topics.learn(TOPIC, QUEUES)
    server = BrokerServer(core, host="127.0.0.1", port=0)
    server.start()
    client = RemotingClient()
    try:
        out["tcp_pop"] = pop_rate(RemotePop(client, server.address), n)
        out["tcp_pop_batch_ack"] = pop_rate(RemotePop(client, server.address), n, batch_ack=True)
        out["tcp_pull"] = lite_pull_rate(server.address, n)
    finally:
        client.close()
        server.stop()
        core.shutdown()
        store.close()
    return out


def redelivery(root: Path, invisible_ms: list[int], rounds: int) -> dict[int, list[float]]:
    """For each invisible time, ms until an unacknowledged message is received again."""
    store = open_store(root / "redelivery", FlushDiskType.ASYNC_FLUSH)
    delays: dict[int, list[float]] = {}
    with PopService(store) as pop:
        for inv in invisible_ms:
            for _ in range(rounds):
                store.put_message(Message(topic="Redeliver", body=BODY))
                assert store.wait_dispatched(10)
                first = pop.pop("g", "Redeliver", 1, inv, wait_ms=5000)
                t0 = time.perf_counter()
                again = pop.pop("g", "Redeliver", 1, 60_000, wait_ms=inv + 10_000)
                elapsed = (time.perf_counter() - t0) * 1000
                assert again.messages and again.messages[0].msg_id == first.messages[0].msg_id
                pop.ack("g", "Redeliver", again.messages[0].receipt_handle)
                delays.setdefault(inv, []).append(elapsed)
    store.close()
    return delays


INVISIBLE_MS = (200, 500, 1000, 2000)
"""The invisible times whose redelivery delay is measured."""


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Every figure: throughput under both flush modes, then the redelivery delays."""
    n = args.messages
    out: dict[str, Any] = {"messages": n}
    for flush in (FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH):
        out[flush.name] = throughput(work, flush, n)
    delays = redelivery(work, list(INVISIBLE_MS), args.rounds)
    out["redelivery_ms"] = {str(k): v for k, v in delays.items()}
    return out


def report(out: dict[str, Any], _args: argparse.Namespace) -> str:
    """The printed table."""
    lines = []
    for flush in (FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH):
        rates = out[flush.name]
        lines.append(f"{flush.name}: " + ", ".join(f"{k} {v:,.0f} msg/s" for k, v in rates.items()))
    lines.append("redelivery: invisible ms -> received again after ms (median, max; late by)")
    for key, v in out["redelivery_ms"].items():
        inv, med = int(key), statistics.median(v)
        late = med - inv
        lines.append(f"  {inv:5d} -> {med:7.1f} median, {max(v):7.1f} max; late by {late:5.1f}")
    return "\n".join(lines)


main = Benchmark("pop", __doc__, OPTIONS, measure, report).main


if __name__ == "__main__":
    raise SystemExit(main())
