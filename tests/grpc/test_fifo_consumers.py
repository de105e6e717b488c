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


def _send_interleaved(producer: Any) -> None:
    """``PER_GROUP`` messages ``<group>:<i>`` of each message group, the groups
    interleaved."""
    for i in range(PER_GROUP):
        for g in GROUPS:
            producer.send(message(f"{g}:{i}".encode(), message_group=g))


def test_fifo_groups_stay_in_order_across_two_consumers_with_failures(
    producer: Any, endpoint: GrpcEndpoint
) -> None:
    _send_interleaved(producer)
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


def test_push_consumer_of_a_fifo_group_consumes_each_group_in_order(
    producer: Any, endpoint: GrpcEndpoint
) -> None:
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    from tests.grpc.conftest import TOPIC, client_config, until

    _send_interleaved(producer)
    seen: dict[str, list[int]] = {g: [] for g in GROUPS}
    lock = threading.Lock()
    failed: set[bytes] = set()

    class Listener(MessageListener):  # type: ignore[misc]
        def consume(self, msg: Any) -> Any:
            g, i = msg.body.decode().split(":")
            with lock:
                if i == "2" and msg.body not in failed:  # one failure per group
                    failed.add(msg.body)
                    return ConsumeResult.FAILURE
                seen[g].append(int(i))
            return ConsumeResult.SUCCESS

    pc = PushConsumer(client_config(endpoint), FIFO_GROUP, Listener(),
                      {TOPIC: FilterExpression()}, consumption_thread_count=4)  # fmt: skip
    pc.startup()
    try:
        until(lambda: all(len(v) >= PER_GROUP for v in seen.values()), timeout=30)
    finally:
        pc.shutdown()
    assert seen == {g: list(range(PER_GROUP)) for g in GROUPS}
