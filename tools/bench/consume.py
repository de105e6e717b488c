"""``mqstore bench consume``: produce-to-consume through a consumer group (one run, printed).

What it measures: a producer thread sends ``N`` 100-byte messages one at a time,
round-robin over an 8-queue topic, while a group of push consumers (CLUSTERING,
concurrent listener, RocketMQ defaults except a 1 s long-poll hold) consumes them.

- **Throughput**: messages consumed / (last consume - first send), messages per second.
  The producer is not throttled, so this is the rate of the slower side.
- **Latency**: measured twice, unpaced (queueing behind the backlog dominates) and
  paced at ``--rate`` messages per second (below saturation). For each message,
  the consume time minus the send time, both from ``time.perf_counter_ns`` in this
  process (the send time travels in the body);
  p50 / p99 / max in ms. Duplicates are counted, and only first deliveries are timed.

Modes: ``inprocess`` (consumers over :class:`InProcessTransport`, a BrokerCore in
this process), then (unless ``--tcp off``) the same runs over RemoteTransport to a
BrokerServer on 127.0.0.1 in this process (consumers, producer and broker share one
interpreter, so the TCP figures include the GIL contention of all three).
"""

from __future__ import annotations

import argparse
import functools
import os
import struct
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mqstore import MessageStore, StoreConfig, StoredMessage
from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.inprocess import InProcessTransport
from mqstore.broker.server import BrokerServer
from mqstore.broker.topics import TopicConfig
from mqstore.client.consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumerConfig,
    PushConsumer,
)
from mqstore.client.remote import RemoteTransport
from mqstore.client.transport import Transport
from mqstore.message import Message
from mqstore.tools.bench._harness import Benchmark, Option, percentile, wait_until

TOPIC = "BenchConsume"
QUEUES = 8

OPTIONS = (
    Option("--messages", int, 20_000, "messages per run", quick=1_000),
    Option("--consumers", int, 3, "push consumers in the group"),
    Option("--rate", float, 2000.0, "paced second run (msg/s): latency below saturation",
           quick=500.0),
    Option("--tcp", str, "auto", "the run over RemoteTransport: 'auto' serves this process's "
           "broker on 127.0.0.1 (BrokerServer), 'off' skips it, else a name server HOST:PORT "
           "whose broker already has the topics BenchConsume0 and BenchConsume<rate>"),
)  # fmt: skip


def run(
    make_transport: Callable[[], Transport],
    n: int,
    consumers: int,
    label: str,
    rate: float = 0,
    topic: str = TOPIC,
) -> dict[str, Any]:
    """One measured run on its own fresh ``topic`` (a new group on a topic that already
    holds messages would start at offset 0, RocketMQ's rule, and re-read them)."""
    cfg = ConsumerConfig(
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, suspend_ms=1000
    )
    lock = threading.Lock()
    lat: dict[int, int] = {}
    dups = 0
    done = threading.Event()
    last_consume = [0]

    def on_msgs(
        msgs: Sequence[StoredMessage], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        nonlocal dups
        now = time.perf_counter_ns()
        with lock:
            for m in msgs:
                seq, sent = struct.unpack_from(">qq", m.body)
                if seq in lat:
                    dups += 1
                    continue
                lat[seq] = now - sent
            last_consume[0] = now
            if len(lat) >= n:
                done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    group = f"bench-{label}-{int(rate)}-{os.getpid()}"
    cs = []
    for _ in range(consumers):
        c = PushConsumer(group, make_transport(), cfg)
        c.subscribe(topic)
        c.register_message_listener(on_msgs)
        c.start()
        cs.append(c)
    wait_until(
        lambda: sum(len([q for q in c.owned() if q.topic == topic]) for c in cs) == QUEUES,
        10,
        "the group to own every queue",
        poll=0.05,
    )
    time.sleep(0.5)  # let every pull loop reach its first long poll
    producer: Transport = make_transport()
    queues = producer.topic_queues(topic)
    pad = b"x" * 84
    t0 = time.perf_counter_ns()
    for i in range(n):
        if rate:
            wait = t0 + i * 1e9 / rate - time.perf_counter_ns()
            if wait > 0:
                time.sleep(wait / 1e9)
        mq = queues[i % len(queues)]
        body = struct.pack(">qq", i, time.perf_counter_ns()) + pad
        producer.send("bench-pg", mq, [Message(topic, body, queue_id=mq.queue_id)])
    t_sent = time.perf_counter_ns()
    ok = done.wait(120)
    for c in cs:
        c.shutdown()
    producer.close()
    row: dict[str, Any] = {"mode": label, "rate": rate, "consumers": consumers, "messages": n,
                           "consumed": len(lat), "duplicates": dups}  # fmt: skip
    if not ok:
        print(f"{label}: only {len(lat)}/{n} consumed in time")
        return row
    ms = sorted(v / 1e6 for v in lat.values())
    wall = (last_consume[0] - t0) / 1e9
    row.update(produce_per_s=n / ((t_sent - t0) / 1e9), end_to_end_per_s=n / wall,
               p50_ms=percentile(ms, 50), p99_ms=percentile(ms, 99), max_ms=ms[-1])  # fmt: skip
    print(
        f"{label:10s} rate={'max' if not rate else f'{rate:.0f}/s'} "
        f"consumers={consumers} messages={n} "
        f"produce={row['produce_per_s']:,.0f}/s end-to-end={row['end_to_end_per_s']:,.0f}/s "
        f"latency p50={row['p50_ms']:.2f} ms p99={row['p99_ms']:.2f} ms "
        f"max={ms[-1]:.2f} ms dups={dups}"
    )
    return row


def run_mode(
    work: Path, mode: str, tcp: str | None, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Both runs (unpaced, paced) of one mode on a fresh store and broker core."""
    store = MessageStore.open(StoreConfig(root_dir=work / mode, commitlog_file_size=256 << 20))
    core = BrokerCore(store, BrokerConfig())
    core.start()
    rates = (0, args.rate)
    for rate in rates:
        core.create_topic(TopicConfig(f"{TOPIC}{int(rate)}", QUEUES, QUEUES))
    srv = None
    try:
        make: Callable[[], Transport]
        if mode == "inprocess":
            make = functools.partial(InProcessTransport, core)
        else:
            addr = tcp or "auto"
            if addr == "auto":  # a BrokerServer in this process on 127.0.0.1
                srv = BrokerServer(core, "127.0.0.1", 0)
                addr = f"127.0.0.1:{srv.start()}"
            make = functools.partial(RemoteTransport, addr)
        return [
            run(make, args.messages, args.consumers, mode, rate, f"{TOPIC}{int(rate)}")
            for rate in rates
        ]
    finally:
        if srv is not None:
            srv.stop()
        core.shutdown()
        store.close()


def measure(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Every run of every mode; one line is printed per run."""
    print(f"loadavg {os.getloadavg()[0]:.2f}, cpus {os.cpu_count()}")
    rows: list[dict[str, Any]] = []
    for mode in ("inprocess",) if args.tcp == "off" else ("inprocess", "tcp"):
        rows += run_mode(work, mode, args.tcp, args)
    return {"runs": rows}


main = Benchmark("consume", __doc__, OPTIONS, measure).main


if __name__ == "__main__":
    raise SystemExit(main())
