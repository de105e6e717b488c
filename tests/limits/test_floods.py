"""Floods against real server processes on 127.0.0.1 (issue 39, "one request, all the
memory or all the workers"): while each runs, the server's peak resident memory grows
by at most 128 MiB and a well-behaved client is answered within 1 s."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from mqstore.client.acl_hook import AclSigner
from mqstore.client.remoting_client import RemotingClient
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from tests.broker.wire_client import WireClient
from tests.floods import ANSWER_S, MIB, RSS_BUDGET, connect, half_frame, peak_rss, rss, threads
from tests.grpc.conftest import TOPIC
from tests.grpc.test_acl import ACL_DOC, AK, SK, signed
from tests.helpers import SMALL_STORE_FLAGS, cli_process
from tests.namesrv.processes import namesrv

pytestmark = pytest.mark.integration


def test_name_server_half_frame_flood_is_capped_and_routes_stay_answered() -> None:
    with namesrv() as (proc, address), WireClient(address) as client:
        route = partial(client.call, Rq.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert route().code == Rs.TOPIC_NOT_EXIST
        base = rss(proc.pid)
        stop = threading.Event()
        socks = [connect(address) for _ in range(48)]
        with threads([partial(half_frame, s, 16 * MIB, stop) for s in socks], stop):
            waits = [_timed_route(route) for _ in range(10) if not stop.wait(0.2)]
            peak = peak_rss(proc.pid)
        for s in socks:
            s.close()
    assert max(waits) < ANSWER_S, waits
    assert peak - base < RSS_BUDGET, (base // MIB, peak // MIB)


def _timed_route(route: partial[object]) -> float:
    import time

    t0 = time.monotonic()
    resp = route()
    assert getattr(resp, "code", None) == Rs.TOPIC_NOT_EXIST
    return time.monotonic() - t0


class Broker:
    """A broker process with ``--acl`` and gRPC: its pid and both addresses."""

    def __init__(self, pid: int, remoting: str, grpc: str) -> None:
        self.pid, self.remoting, self.grpc = pid, remoting, grpc


@contextmanager
def acl_broker(tmp_path: Path, *flags: str) -> Iterator[Broker]:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(yaml.safe_dump(ACL_DOC))
    args = ["broker", "--store", str(tmp_path / "s"), "--port", "0", *SMALL_STORE_FLAGS,
            "--grpc-port", "0", "--acl", str(acl), *flags]  # fmt: skip
    with cli_process(args, "grpc on") as started:
        remoting = next(ln for ln in started.lines if "remoting on" in ln)
        yield Broker(started.proc.pid, remoting.rsplit(" ", 1)[1], started.address)


def _stub(address: str) -> Any:
    import grpc
    from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

    return MessagingServiceStub(grpc.insecure_channel(address))


def _timed_signed_route(stub: Any) -> float:
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as svc

    t0 = time.monotonic()
    r = stub.QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name=TOPIC)),
                        metadata=signed(), timeout=10)  # fmt: skip
    assert r.status.code == pb.Code.OK, r.status.message
    return time.monotonic() - t0


def test_grpc_gzip_bomb_is_refused_without_inflating_it(tmp_path: Path) -> None:
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as svc

    bomb = gzip.compress(bytes(MIB), 9) * 1000  # 1000 members: 1 MB inflating to 1000 MiB
    assert len(bomb) < 2 * MIB
    req = svc.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=TOPIC), body=bomb)])
    req.messages[0].system_properties.message_id = "bomb-1"
    req.messages[0].system_properties.body_encoding = pb.Encoding.GZIP
    with acl_broker(tmp_path) as b:
        stub = _stub(b.grpc)
        _timed_signed_route(stub)
        base = rss(b.pid)
        answers: list[Any] = []
        stop = threading.Event()
        send = partial(lambda: answers.append(stub.SendMessage(req, metadata=signed(), timeout=60)))
        with threads([send], stop):
            waits = [_timed_signed_route(stub) for _ in range(5) if not stop.wait(0.1)]
        peak = peak_rss(b.pid)
    assert answers[0].status.code == pb.Code.MESSAGE_BODY_TOO_LARGE, answers[0].status
    assert max(waits) < ANSWER_S, waits
    assert peak - base < RSS_BUDGET, (base // MIB, peak // MIB)


def _send_cmd(topic: str) -> RemotingCommand:
    ext = {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": "", "j": "0", "k": "false"}  # fmt: skip
    return RemotingCommand(code=Rq.SEND_MESSAGE_V2, ext_fields=ext, body=b"m")


def _pop_cmd(topic: str, poll_ms: int) -> RemotingCommand:
    ext = {"consumerGroup": "popg", "topic": topic, "queueId": "-1", "maxMsgNums": "1",
           "invisibleTime": "60000", "pollTime": str(poll_ms),
           "bornTime": str(int(time.time() * 1000)),
           "initMode": "0", "expType": "TAG", "exp": "*"}  # fmt: skip
    return RemotingCommand(code=200050, ext_fields=ext)


def test_pop_long_poll_flood_holds_no_worker_on_a_sync_flush_broker(tmp_path: Path) -> None:
    with acl_broker(tmp_path, "--flush", "SYNC_FLUSH") as b:
        client = RemotingClient(rpc_hook=AclSigner(AK, SK))
        try:
            send = partial(client.invoke, b.remoting, _send_cmd(TOPIC), 10.0)
            assert send().code == Rs.SUCCESS  # creates the topic
            assert client.invoke(b.remoting, _pop_cmd(TOPIC, 0), 10.0).code == Rs.SUCCESS
            base = rss(b.pid)
            answers: list[int] = []
            calls = [client.invoke_async(b.remoting, _pop_cmd(TOPIC, 5000),
                                         lambda r, e: answers.append(-1 if r is None else r.code))
                     for _ in range(40)]  # fmt: skip
            time.sleep(0.5)  # all 40 reached the broker and found nothing
            waits = []
            for _ in range(3):
                t0 = time.monotonic()
                assert send().code == Rs.SUCCESS
                waits.append(time.monotonic() - t0)
            deadline = time.monotonic() + 15
            while len(answers) < len(calls) and time.monotonic() < deadline:
                time.sleep(0.1)
            peak = peak_rss(b.pid)
        finally:
            client.close()
    assert max(waits) < ANSWER_S, waits
    assert sorted(set(answers)) == [Rs.SUCCESS, Rs.PULL_NOT_FOUND], answers
    assert answers.count(Rs.SUCCESS) == 3  # each send woke a held POP that took it
    assert peak - base < RSS_BUDGET, (base // MIB, peak // MIB)


def _silent(stop: threading.Event) -> Iterator[Any]:
    """A request stream that sends nothing until ``stop``."""
    stop.wait(60)
    return
    yield  # a generator


def test_grpc_telemetry_flood_of_silent_streams_leaves_workers_for_signed_calls(
    tmp_path: Path,
) -> None:
    import grpc

    with acl_broker(tmp_path) as b:
        stub = _stub(b.grpc)
        _timed_signed_route(stub)
        base = rss(b.pid)
        stop = threading.Event()
        channels = [grpc.insecure_channel(b.grpc) for _ in range(4)]
        calls = [
            _stub_of(ch).Telemetry(_silent(stop), timeout=60) for ch in channels for _ in range(20)
        ]
        try:
            time.sleep(1.0)  # every call reached the broker
            waits = [_timed_signed_route(stub) for _ in range(5)]
            peak = peak_rss(b.pid)
        finally:
            stop.set()
            for c in calls:
                c.cancel()
            for ch in channels:
                ch.close()
    assert max(waits) < ANSWER_S, waits
    assert peak - base < RSS_BUDGET, (base // MIB, peak // MIB)


def _stub_of(channel: Any) -> Any:
    from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

    return MessagingServiceStub(channel)
