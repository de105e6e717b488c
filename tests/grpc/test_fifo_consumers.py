"""FIFO order per message group holds across two consumers of one group, with failures.

The group allows 17 attempts: a FIFO batch is redelivered whole (the acknowledged
messages left out), so every failure costs its later messages one attempt too."""

from __future__ import annotations

import random
import threading
from typing import Any

from mqstore.grpc import GrpcEndpoint
from tests.grpc.conftest import FIFO_GROUP, message, simple_consumer

GROUPS = ("gA", "gB", "gC")
PER_GROUP = 6


def test_fifo_groups_stay_in_order_across_two_consumers_with_failures(
    producer: Any, endpoint: GrpcEndpoint
) -> None:
    for i in range(PER_GROUP):
        for g in GROUPS:
            producer.send(message(f"{g}:{i}".encode(), message_group=g))
    acked: dict[str, list[int]] = {g: [] for g in GROUPS}
    failed_once: set[bytes] = set()
    lock = threading.Lock()
    done = threading.Event()
    errors: list[BaseException] = []

    def run(seed: int) -> None:
        rnd = random.Random(seed)
        c = simple_consumer(endpoint, FIFO_GROUP, wait=1)
        try:
            while not done.is_set():
                blocked: set[str] = set()
                for m in c.receive(32, 1):
                    g, i = m.body.decode().split(":")
                    if g in blocked:
                        continue  # a later message of a failed group waits for it
                    with lock:
                        fail = m.body not in failed_once and rnd.random() < 0.25
                        if fail:
                            failed_once.add(m.body)
                    if fail:
                        blocked.add(g)
                        continue
                    c.ack(m)
                    with lock:
                        acked[g].append(int(i))
                        if all(len(v) == PER_GROUP for v in acked.values()):
                            done.set()
        except BaseException as e:
            errors.append(e)
            done.set()
        finally:
            c.shutdown()

    threads = [threading.Thread(target=run, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    done.wait(30)
    done.set()
    for t in threads:
        t.join(10)
    assert not errors, errors
    assert acked == {g: list(range(PER_GROUP)) for g in GROUPS}
    assert failed_once  # the failures happened and were redelivered in order
