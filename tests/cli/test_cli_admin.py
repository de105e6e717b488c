"""``mqstore admin progress`` (issue 25) as a subprocess: a consumer group's lag per
queue from a running broker over TCP (GET_CONSUME_STATS) and, read-only, from the
store directory; both match the offsets the group committed."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from mqstore.broker.core import BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from tests.broker.fixtures import core, server, store
from tests.broker.wire_client import WireClient

__all__ = ["core", "server", "store"]

pytestmark = pytest.mark.integration


def admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqstore.tools.cli", "admin", "progress", *args],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def consume_part(server: BrokerServer) -> None:
    """7 messages in queue 0 and 2 in queue 1 of T; group g committed 4 and 2."""
    with WireClient(server.address) as c:
        for qid, n in ((0, 7), (1, 2)):
            for i in range(n):
                ext = {
                    "a": "pg",
                    "b": "T",
                    "c": "TBW102",
                    "d": 2,
                    "e": qid,
                    "f": 0,
                    "g": int(time.time() * 1000),
                    "h": 0,
                    "i": "",
                    "j": 0,
                    "k": "false",
                }
                assert c.call(Rq.SEND_MESSAGE_V2, ext, b"m%d" % i).code == Rs.SUCCESS
        for qid, off in ((0, 4), (1, 2)):
            ext = {"consumerGroup": "g", "topic": "T", "queueId": qid, "commitOffset": off}
            assert c.call(Rq.UPDATE_CONSUMER_OFFSET, ext).code == Rs.SUCCESS
    assert server.core.store.wait_dispatched(60)


def test_progress_from_a_running_broker_shows_the_lag(server: BrokerServer) -> None:
    consume_part(server)
    out = admin("--broker", server.address, "--group", "g", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    lag = {r["queue_id"]: (r["broker_offset"], r["consumer_offset"], r["diff"])
           for r in doc["rows"]}  # fmt: skip
    assert lag == {0: (7, 4, 3), 1: (2, 2, 0)}
    assert doc["diffTotal"] == 3
    assert doc["rows"][0]["last_timestamp"] > 0


def test_progress_table_ends_with_the_total(server: BrokerServer) -> None:
    consume_part(server)
    out = admin("--broker", server.address, "--group", "g", "--topic", "T")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("#Topic")
    assert out.stdout.rstrip().endswith("Diff Total: 3")


def test_progress_from_the_store_directory(server: BrokerServer, core: BrokerCore) -> None:
    consume_part(server)
    core.offsets.persist(force=True)
    core.store.flush()
    out = admin("--store", str(core.store.root), "--group", "g", "--json")
    assert out.returncode == 0, out.stderr
    lag = {r["queue_id"]: r["diff"] for r in json.loads(out.stdout)["rows"] if r["topic"] == "T"}
    assert lag == {0: 3, 1: 0}


def test_progress_from_no_broker_is_one_line_and_exit_2() -> None:
    out = admin("--broker", "127.0.0.1:1", "--group", "g")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "mqstore admin:" in out.stderr


def view(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqstore.tools.cli", "admin", *args],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_topic_status_view_lists_each_queue(server: BrokerServer) -> None:
    consume_part(server)
    out = view("topic-status", "--broker", server.address, "--topic", "T", "--json")
    assert out.returncode == 0, out.stderr
    queues = json.loads(out.stdout)["queues"]
    assert [(q["queueId"], q["maxOffset"]) for q in queues] == [(0, 7), (1, 2)]


def test_broker_status_view_prints_the_runtime_table(server: BrokerServer) -> None:
    out = view("broker-status", "--broker", server.address)
    assert out.returncode == 0, out.stderr
    assert any(line.startswith("bootTimestamp") for line in out.stdout.splitlines())


def test_consumer_connections_of_an_offline_group_is_one_line(server: BrokerServer) -> None:
    out = view("consumer-connections", "--broker", server.address, "--group", "none")
    assert out.returncode == 2
    assert "not online" in out.stderr and out.stderr.count("\n") == 1
