"""End-to-end produce-to-consume benchmark for a consumer group (one run, printed)::

    python benchmarks/bench_consume.py [--messages N] [--consumers 3] [--tcp HOST:PORT]

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
this process); ``--tcp auto`` adds the same run over RemoteTransport to a BrokerServer
on 127.0.0.1 in this process (consumers, producer and broker share one interpreter,
so the TCP figures include the GIL contention of all three).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mqstore.client.consumer import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumerConfig,
    PushConsumer,
)
from mqstore.client.transport import Transport
from mqstore.message import Message

TOPIC = "BenchConsume"
QUEUES = 8


def run(
    make_transport, n: int, consumers: int, label: str, rate: float = 0, topic: str = TOPIC
) -> None:
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

    def on_msgs(msgs, ctx):
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
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        owned = sum(len([q for q in c.owned() if q.topic == topic]) for c in cs)
        if owned == QUEUES:
            break
        time.sleep(0.05)
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
    if not ok:
        print(f"{label}: only {len(lat)}/{n} consumed in time")
        return
    ms = sorted(v / 1e6 for v in lat.values())
    wall = (last_consume[0] - t0) / 1e9
    q = statistics.quantiles(ms, n=100)
    print(
        f"{label:10s} rate={'max' if not rate else f'{rate:.0f}/s'} "
        f"consumers={consumers} messages={n} "
        f"produce={n / ((t_sent - t0) / 1e9):,.0f}/s end-to-end={n / wall:,.0f}/s "
        f"latency p50={q[49]:.2f} ms p99={q[98]:.2f} ms max={ms[-1]:.2f} ms dups={dups}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--consumers", type=int, default=3)
    ap.add_argument("--rate", type=float, default=2000,
                    help="paced second run (msg/s): latency below saturation")
    ap.add_argument("--tcp", help="also run over RemoteTransport: 'auto' serves this "
                    "process's broker on 127.0.0.1 (BrokerServer), else a name server "
                    "HOST:PORT whose broker already has the topics BenchConsume0 and "
                    "BenchConsume<rate>")
    args = ap.parse_args()
    print(f"loadavg {os.getloadavg()[0]:.2f}, cpus {os.cpu_count()}")

    from mqstore.broker.core import BrokerConfig, BrokerCore
    from mqstore.broker.inprocess import InProcessTransport
    from mqstore.broker.topics import TopicConfig
    from mqstore.config import StoreConfig
    from mqstore.message_store import MessageStore

    for mode in ("inprocess", "tcp") if args.tcp else ("inprocess",):
        with tempfile.TemporaryDirectory() as d:
            store = MessageStore.open(StoreConfig(root_dir=d, commitlog_file_size=256 * 2**20))
            core = BrokerCore(store, BrokerConfig())
            core.start()
            rates = (0, args.rate)
            for rate in rates:
                core.create_topic(TopicConfig(f"{TOPIC}{int(rate)}", QUEUES, QUEUES))
            srv = None
            try:
                if mode == "inprocess":
                    make = functools.partial(InProcessTransport, core)
                else:
                    from mqstore.client.remote import RemoteTransport

                    addr = args.tcp
                    if addr == "auto":  # a BrokerServer in this process on 127.0.0.1
                        from mqstore.broker.server import BrokerServer

                        srv = BrokerServer(core, "127.0.0.1", 0)
                        addr = f"127.0.0.1:{srv.start()}"

                    make = functools.partial(RemoteTransport, addr)
                for rate in rates:
                    run(make, args.messages, args.consumers, mode, rate, f"{TOPIC}{int(rate)}")
            finally:
                if srv is not None:
                    srv.stop()
                core.shutdown()


if __name__ == "__main__":
    main()
