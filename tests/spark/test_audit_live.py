"""An audit beside a running broker (``mqstore broker`` subprocess, a producer sending
over TCP for the whole audit): no error finding, the in-flight tail named in the report."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.helpers import cli_process

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.integration]

RATE = 5000
"""Messages per second the producer aims at (batches of BATCH, paced)."""
BATCH = 50


def _produce(address: str, stop: threading.Event, sent: list[int]) -> None:
    from mqstore.client.producer import Producer
    from mqstore.client.remote import RemoteTransport
    from mqstore.message import Message

    t0 = time.monotonic()
    with RemoteTransport(address) as t, Producer("live-audit", t) as p:
        n = 0
        while not stop.is_set():
            topic = ("orders", "payments", "audit")[n // BATCH % 3]
            msgs = [Message(topic, b"live %d " % (n + i) * 8, tags="T", keys=f"k{n + i}")
                    for i in range(BATCH)]  # fmt: skip
            p.send_batch(msgs)
            n += BATCH
            sent[0] = n
            ahead = n / RATE - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)


def test_audit_of_a_store_its_broker_is_writing_has_no_error_and_names_the_tail(
    spark, tmp_path: Path
):
    from mqstore.tools.spark.audit import run_audit

    root = tmp_path / "store"
    flags = ["--file-size", "1M", "--index-slots", "1000", "--index-num", "40000"]
    with cli_process(["broker", "--store", str(root), "--port", "0", *flags]) as broker:
        stop, sent = threading.Event(), [0]
        producer = threading.Thread(target=_produce, args=(broker.address, stop, sent))
        producer.start()
        try:
            deadline = time.monotonic() + 60
            while sent[0] < 2000 and time.monotonic() < deadline and producer.is_alive():
                time.sleep(0.1)
            before = sent[0]
            report = run_audit(root)
            during = sent[0] - before
            time.sleep(0.5)
            assert producer.is_alive() and sent[0] > before + during // 2
        finally:
            stop.set()
            producer.join(60)
    assert before >= 2000 and during > 0, (before, during)
    assert report.errors == [], report.summary(60)
    assert report.cut is not None, report.summary()
    assert report.cut.log_end > 0 and "in-flight tail left out" in report.checks["cut"]
    assert report.cut.tail_file.startswith("commitlog/")
