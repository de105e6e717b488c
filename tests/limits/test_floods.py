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
    assert sorted(set(answers)) == [Rs.SUCCESS, Rs.POLLING_TIMEOUT], answers
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


def _receive_request(poll_s: int) -> Any:
    from rocketmq.grpc_protocol import service_pb2 as svc

    req = svc.ReceiveMessageRequest(batch_size=1)
    req.group.name = "floodg"
    req.message_queue.topic.name = TOPIC
    req.long_polling_timeout.FromSeconds(poll_s)
    req.invisible_duration.FromSeconds(30)
    return req


def _send_request() -> Any:
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as svc

    msg = pb.Message(topic=pb.Resource(name=TOPIC), body=b"wake one")
    msg.system_properties.message_id = "flood-send-1"
    msg.system_properties.message_type = pb.MessageType.NORMAL
    return svc.SendMessageRequest(messages=[msg])


class _Flood:
    """What the receive flood saw: receives answered before the send, the signed
    calls' times, the receives the send woke (their status codes)."""

    early: int
    waits: list[float]
    woken: list[list[int]]
    peak: int


async def _receive_flood(address: str, pid: int, waiting: int) -> _Flood:
    import asyncio

    import grpc.aio
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as svc
    from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

    # a connection of its own each (channels to one address share one by default),
    # under the server's 100 concurrent streams per connection
    own = [("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(address, options=own) for _ in range(waiting // 50)]
    probe = grpc.aio.insecure_channel(address, options=own)
    stub, req = MessagingServiceStub(probe), _receive_request(20)

    async def receive(ch: Any) -> list[int]:
        call = MessagingServiceStub(ch).ReceiveMessage(req, metadata=signed(), timeout=30)
        return [r.status.code async for r in call if r.HasField("status")]

    async def timed(call: Any) -> float:
        t0 = time.monotonic()
        r = await call
        assert r.status.code == pb.Code.OK, r.status.message
        return time.monotonic() - t0

    out = _Flood()
    tasks = [asyncio.ensure_future(receive(ch)) for ch in channels for _ in range(50)]
    try:
        await asyncio.sleep(1.5)  # every receive reached the broker and found nothing
        out.early = sum(t.done() for t in tasks)
        route = svc.QueryRouteRequest(topic=pb.Resource(name=TOPIC))
        out.waits = [await timed(stub.SendMessage(_send_request(), metadata=signed())),
                     await timed(stub.QueryRoute(route, metadata=signed()))]  # fmt: skip
        await asyncio.wait(tasks, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        await asyncio.sleep(0.2)  # a second receive woken by mistake would end by now
        out.woken = [t.result() for t in tasks if t.done()]
        out.peak = peak_rss(pid)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for ch in [*channels, probe]:
            await ch.close()
    return out


def test_grpc_receive_flood_waits_past_the_old_worker_count_and_signed_calls_are_answered(
    tmp_path: Path,
) -> None:
    import asyncio

    from rocketmq.grpc_protocol import definition_pb2 as pb

    waiting = 300  # more than the 128 worker threads the endpoint once had
    with acl_broker(tmp_path) as b:
        _timed_signed_route(_stub(b.grpc))  # creates the topic
        base = rss(b.pid)
        flood = asyncio.run(_receive_flood(b.grpc, b.pid, waiting))
    assert flood.early == 0, f"{flood.early} of {waiting} receives did not wait"
    assert max(flood.waits) < ANSWER_S, flood.waits
    assert flood.woken == [[pb.Code.OK]]  # the send woke one receive, which took it
    assert flood.peak - base < RSS_BUDGET, (base // MIB, flood.peak // MIB)


def _hold_ha_slot(address: str, first: bytes, stop: threading.Event) -> None:
    """Connect to the HA port, send ``first`` (nothing, or part of a report) and hold
    the connection; when the master closes it, connect again, until ``stop``."""
    while not stop.is_set():
        try:
            with connect(address) as sock:
                sock.sendall(first)
                sock.settimeout(0.2)
                while not stop.is_set():
                    try:
                        if sock.recv(1 << 16) == b"":
                            break  # closed by the master: take another slot
                    except TimeoutError:
                        continue
        except OSError:
            pass
        stop.wait(0.05)


def test_ha_flood_of_silent_and_half_written_connections_leaves_slaves_replicating(
    tmp_path: Path,
) -> None:
    from tests.ha.procs import HAProcess

    # Housekeeping (the idle bound) long enough that only the slot rules can let the
    # second slave in while the flood holds every slot.
    master = HAProcess("master", tmp_path / "m", tmp_path, "master", "--produce", "-1",
                       "--rate", "2000", "--after-connect", "--housekeeping-ms", "60000")  # fmt: skip
    procs = [master]
    try:
        port = master.wait_for(lambda s: s.get("port"), 20, "listening")["port"]
        address = f"127.0.0.1:{port}"
        slave = HAProcess("slave", tmp_path / "s", tmp_path, "slave1", "--master", address)
        procs.append(slave)
        slave.wait_for(lambda s: s.get("connected") and s["max_offset"] > 0, 20, "replicating")
        base = rss(master.proc.pid)
        stop = threading.Event()
        floods = [partial(_hold_ha_slot, address, b"", stop) for _ in range(32)]
        floods += [partial(_hold_ha_slot, address, bytes(7), stop) for _ in range(8)]
        floods += [lambda: half_frame(connect(address), 16 * MIB, stop) for _ in range(2)]
        with threads(floods, stop):
            master.wait_for(lambda s: s["accepted"] >= 32, 20, "the flood took every slot")
            before = slave.status()["max_offset"]  # type: ignore[index]
            slave.wait_for(lambda s: s["max_offset"] > before, 10, "still replicating")
            # A slave that reconnects now finds every slot held by the flood.
            slave.kill()
            again = HAProcess("slave", tmp_path / "s", tmp_path, "slave2", "--master", address)
            procs.append(again)
            again.wait_for(lambda s: s.get("connected"), 15, "reconnected during the flood")
            target = master.status()["max_offset"]  # type: ignore[index]
            again.wait_for(lambda s: s["max_offset"] >= target, 20, f"caught up to {target}")
            peak = peak_rss(master.proc.pid)
    finally:
        for p in procs:
            p.cleanup()
    assert peak - base < RSS_BUDGET, (base // MIB, peak // MIB)
