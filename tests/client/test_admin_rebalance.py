"""``mqstore admin rebalance --group GROUP``: an operator wakes a group's rebalance from outside.

The broker relays NOTIFY_CONSUMER_IDS_CHANGED to the group's members, which then
rebalance at once rather than at their timer: here a topic grown from 4 to 8 queues
is split over the group's two members right after the command, with the rebalance
timer and the route poll both a minute away.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.client.consumer import ConsumeConcurrentlyStatus, PushConsumer
from mqstore.client.remote import RemoteTransport
from tests.client.consumer_harness import FIRST, wait_until
from tests.interop.broker_harness import BrokerProcess, create_topic

pytestmark = pytest.mark.integration

CFG = dataclasses.replace(
    FIRST,
    rebalance_interval_ms=60_000,
    poll_name_server_interval_ms=60_000,
)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "store").start()
    try:
        yield b
    finally:
        b.stop()


def admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqstore.tools.cli", "admin", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def queue_ids(c: PushConsumer) -> set[int]:
    return {mq.queue_id for mq in c.owned() if mq.topic == "T"}


def test_admin_rebalance_makes_a_group_take_new_queues_before_its_timer(broker):
    create_topic(broker.address, "T", 4)
    transports = [RemoteTransport(broker.address) for _ in range(2)]
    consumers = []
    for t in transports:
        c = PushConsumer("g", t, CFG)
        c.subscribe("T")
        c.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        c.start()
        consumers.append(c)
    try:
        assert wait_until(lambda: [len(queue_ids(c)) for c in consumers] == [2, 2], 10)
        create_topic(broker.address, "T", 8)
        time.sleep(1.0)  # nothing moves by itself: the timers are a minute away
        assert [len(queue_ids(c)) for c in consumers] == [2, 2]
        out = admin("rebalance", "--group", "g", "--broker", broker.address, "--json")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert sorted(doc["clientIds"]) == sorted(c.client_id for c in consumers)
        assert wait_until(lambda: [len(queue_ids(c)) for c in consumers] == [4, 4], 5)
        assert queue_ids(consumers[0]) | queue_ids(consumers[1]) == set(range(8))
    finally:
        for c in consumers:
            c.shutdown()
        for t in transports:
            t.close()


def test_admin_rebalance_of_a_group_with_no_online_member_is_one_line_and_exit_2(broker):
    out = admin("rebalance", "--group", "nobody", "--broker", broker.address)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "mqstore admin: broker answered 206: the consumer group[nobody] not online"
    ]


def test_admin_rebalance_positional_group_still_works_with_a_deprecation_line(broker):
    out = admin("rebalance", "nobody", "--broker", broker.address)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "mqstore admin: rebalance GROUP is deprecated: use --group nobody",
        "mqstore admin: broker answered 206: the consumer group[nobody] not online",
    ]


def test_admin_rebalance_without_a_group_is_one_line_and_exit_2(broker):
    out = admin("rebalance", "--broker", broker.address)
    assert out.returncode == 2
    assert out.stderr.splitlines() == ["mqstore admin: rebalance needs --group GROUP"]
