"""A paced producer for the live-audit test, run as its own process so that the audit's
driver (in the test process) and the producer never share an interpreter lock.

``python -m tests.spark.live_producer ADDRESS RATE BATCH`` sends batches of ``BATCH``
keyed, tagged messages over three topics to the broker at ``ADDRESS``, paced to ``RATE``
messages per second (it never sends ahead of that pace; behind it, it sends at once).
After every acknowledged batch it prints one line ``MONOTONIC_NS TOTAL``: the
``CLOCK_MONOTONIC`` time the batch was answered (the same clock in every process of the
machine) and how many messages were acknowledged so far. It stops, and exits 0, when its
standard input reaches end-of-file; a refused batch raises (exit status 1).
"""

from __future__ import annotations

import sys
import threading
import time

TOPICS = ("orders", "payments", "audit")


def produce(address: str, rate: int, batch: int, stop: threading.Event) -> None:
    """Send until ``stop`` is set."""
    from mqstore.client.producer import Producer
    from mqstore.client.remote import RemoteTransport
    from mqstore.message import Message

    t0 = time.monotonic()
    n = 0
    with RemoteTransport(address) as t, Producer("live-audit", t) as p:
        while not stop.is_set():
            topic = TOPICS[n // batch % len(TOPICS)]
            msgs = [Message(topic, b"live %d " % (n + i) * 8, tags="T", keys=f"k{n + i}")
                    for i in range(batch)]  # fmt: skip
            p.send_batch(msgs)
            n += batch
            print(time.monotonic_ns(), n, flush=True)
            ahead = n / rate - (time.monotonic() - t0)
            if ahead > 0:
                stop.wait(ahead)


def main(argv: list[str]) -> int:
    address, rate, batch = argv[0], int(argv[1]), int(argv[2])
    stop = threading.Event()

    def until_eof() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=until_eof, daemon=True).start()
    produce(address, rate, batch, stop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
