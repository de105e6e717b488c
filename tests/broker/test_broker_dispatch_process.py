"""``mqstore broker --dispatch-process``: a broker whose consume queues and index are
built by a child process, over real TCP, stopped by signals to its process group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mqstore.consumequeue.shared import supported
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from tests.broker.test_server import pull_ext, records, send_v2
from tests.broker.test_server_robustness import start_broker as start_robust_broker
from tests.broker.wire_client import WireClient

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not supported(), reason="dispatch_process needs Linux x86-64"),
]

REPO = Path(__file__).resolve().parents[2]


def start_broker(store_dir: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """A dispatch-process broker in its own process group (a "Ctrl-C" reaches it and
    its child only)."""
    return start_robust_broker(store_dir, "--dispatch-process", *extra, new_session=True)


def create_topic(c: WireClient, topic: str = "T") -> None:
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
           "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"}  # fmt: skip
    assert c.call(Rq.UPDATE_AND_CREATE_TOPIC, ext).code == Rs.SUCCESS


def test_long_poll_is_woken_by_a_send_when_a_child_dispatches(tmp_path: Path) -> None:
    # the re-check of held pulls and the suspend are 120 s away: within the WireClient's
    # 60 s only the child's arrival notice can answer the pull
    proc, address = start_broker(tmp_path / "store", "--hold-check-interval-ms", "120000")
    try:
        with WireClient(address) as consumer, WireClient(address) as producer:
            create_topic(producer)
            opaque = consumer.request(Rq.PULL_MESSAGE, pull_ext(0, sys_flag=0x2, suspend=120_000))
            time.sleep(0.3)  # usually held by now; if not, the pull finds the message itself
            assert send_v2(producer, b"wake", props="TAGS\x01A\x02").code == Rs.SUCCESS
            r = consumer.wait_response(opaque)
            assert r.code == Rs.SUCCESS, r
            assert [m.body for m in records(r.body or b"")] == [b"wake"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(30) == 0


def test_ctrl_c_to_the_process_group_stops_broker_and_child_cleanly(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    proc, address = start_broker(store_dir)
    try:
        with WireClient(address) as c:
            create_topic(c)
            for i in range(200):
                assert send_v2(c, f"m{i}".encode()).code == Rs.SUCCESS
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        assert proc.wait(30) == 0
    # A clean stop: no abort file (the child drained and flushed), and nothing of
    # the group is left running.
    assert not (store_dir / "abort").exists()
    assert not (store_dir / "dispatch.state").exists()
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)

    proc, address = start_broker(store_dir)
    try:
        with WireClient(address) as c:
            r = c.call(Rq.PULL_MESSAGE, pull_ext(0))
            assert r.code == Rs.SUCCESS
            assert [m.body for m in records(r.body or b"")][:3] == [b"m0", b"m1", b"m2"]
            assert (
                c.call(Rq.GET_MAX_OFFSET, {"topic": "T", "queueId": 0}).ext_fields["offset"]
                == "200"
            )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(30) == 0
