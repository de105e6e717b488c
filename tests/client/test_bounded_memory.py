"""Bounded memory: a slow consumer over a large backlog holds at most the flow-control
limit per queue, and its RSS stays flat while the backlog is 200x that limit."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from mqstore.broker.inprocess import InProcessTransport
from mqstore.client.consumer import ConsumeConcurrentlyStatus, PushConsumer
from mqstore.message import Message
from tests.client.consumer_harness import FIRST, broker, create_topic, wait_dispatched

pytestmark = [pytest.mark.slow, pytest.mark.integration]

BACKLOG = 200_000
QUEUES = 2


def rss_bytes() -> int:
    """Resident set size from /proc/self/status (VmRSS, kB)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def fill(core, qs, n):
    t = InProcessTransport(core)
    per = n // len(qs)
    for mq in qs:
        for start in range(0, per, 256):
            t.send(
                "pg",
                mq,
                [
                    Message(mq.topic, b"%08d" % i, queue_id=mq.queue_id)
                    for i in range(start, min(per, start + 256))
                ],
            )
    wait_dispatched(core, {mq: per for mq in qs}, timeout=60)


def test_a_slow_consumer_holds_at_most_the_flow_control_limit(tmp_path):
    with broker(tmp_path, file_size=16 * 1024 * 1024) as core:
        qs = create_topic(core, "T", QUEUES)
        fill(core, qs, BACKLOG)
        consumed = 0
        lock = threading.Lock()

        def slow(msgs, ctx):
            nonlocal consumed
            time.sleep(0.002)
            with lock:
                consumed += len(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        cfg = dataclasses.replace(
            FIRST,
            consume_thread_max=2,
        )
        c = PushConsumer("g", InProcessTransport(core), cfg)
        c.subscribe("T")
        c.register_message_listener(slow)
        rss0 = rss_bytes()
        c.start()
        try:
            peak_held = peak_rss = 0
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                table = c.rebalance.process_queue_table()
                held = [pq.msg_count for mq, pq in table.items() if mq.topic == "T"]
                peak_held = max([peak_held, *held])
                peak_rss = max(peak_rss, rss_bytes())
                time.sleep(0.01)
            paused = c.flow_control_times
        finally:
            c.shutdown()
        limit = cfg.pull_threshold_for_queue + cfg.pull_batch_size
        print(
            f"\nbacklog={BACKLOG} consumed={consumed} peak held/queue={peak_held} "
            f"(limit {limit}) flow-control pauses={paused} "
            f"RSS growth={(peak_rss - rss0) / 2**20:.1f} MiB"
        )
        assert peak_held <= limit
        assert paused > 0
        assert consumed < BACKLOG // 10  # the backlog really outran the consumer
        assert peak_rss - rss0 < 64 * 2**20
