"""Limits of the gRPC endpoint (issue 17): at most ``max_long_polls`` receives wait at
once, so a flood of long-polling receives keeps another client's latency and memory
bounded; idle connections are closed; Telemetry streams are capped and a silent one is
ended."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

from mqstore.broker.core import BrokerCore
from mqstore.grpc import GrpcConfig, GrpcEndpoint, ServiceConfig
from mqstore.limits import ServerLimits
from tests.grpc.conftest import GROUP, TOPIC, until

LONG_POLLS = 8


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / (1 << 20)


@pytest.fixture
def small(core: BrokerCore) -> Iterator[GrpcEndpoint]:
    cfg = GrpcConfig(
        port=0, limits=ServerLimits(idle_timeout_s=0.8),
        service=ServiceConfig(long_polling_ms=4000, max_long_polls=LONG_POLLS),
    )  # fmt: skip
    ep = GrpcEndpoint(core, cfg)
    ep.start()
    yield ep
    ep.stop(grace=0.2)


def _receive(stub: MessagingServiceStub, poll_ms: int = 4000) -> list[int]:
    req = svc.ReceiveMessageRequest(batch_size=8)
    req.group.name = GROUP
    req.message_queue.topic.name = TOPIC
    req.long_polling_timeout.FromMilliseconds(poll_ms)
    req.invisible_duration.FromMilliseconds(30_000)
    stream = stub.ReceiveMessage(req, timeout=poll_ms / 1000 + 30)
    return [r.status.code for r in stream if r.HasField("status")]


def _route(stub: MessagingServiceStub) -> float:
    req = svc.QueryRouteRequest()
    req.topic.name = TOPIC
    t0 = time.monotonic()
    assert stub.QueryRoute(req, timeout=10).status.code == pb.Code.OK
    return time.monotonic() - t0


def test_receive_flood_does_not_starve_another_client_and_memory_stays_bounded(
    small: GrpcEndpoint,
):
    stop = threading.Event()
    codes: list[int] = []
    lock = threading.Lock()
    channels = [grpc.insecure_channel(small.address) for _ in range(4)]

    def flood(ch: grpc.Channel) -> None:
        stub = MessagingServiceStub(ch)
        while not stop.is_set():
            got = _receive(stub)
            with lock:
                codes.extend(got)

    victim_ch = grpc.insecure_channel(small.address)
    victim = MessagingServiceStub(victim_ch)
    _route(victim)
    rss0 = _rss_mib()
    flooders = [threading.Thread(target=flood, args=(ch,)) for ch in channels for _ in range(12)]
    for t in flooders:
        t.start()
    try:
        time.sleep(0.5)
        latencies = []
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            latencies.append(_route(victim))
            time.sleep(0.1)
        rss1 = _rss_mib()
    finally:
        stop.set()
        for t in flooders:
            t.join(15)
        for ch in [*channels, victim_ch]:
            ch.close()
    assert max(latencies) < 1.0, f"max {max(latencies):.3f} s over {len(latencies)} calls"
    assert pb.Code.TOO_MANY_REQUESTS in codes
    assert small.service is not None and small.service.polls_refused > 0
    assert rss1 - rss0 < 64, f"RSS {rss0:.1f} -> {rss1:.1f} MiB"


def test_receive_past_the_bound_answers_at_once(small: GrpcEndpoint):
    bound = LONG_POLLS
    with grpc.insecure_channel(small.address) as ch:
        stub = MessagingServiceStub(ch)
        holders = [threading.Thread(target=_receive, args=(stub, 10_000)) for _ in range(bound)]
        for t in holders:
            t.start()
        service = small.service
        assert service is not None
        until(lambda: service.long_polls == bound, what=f"{bound} receives long polling")
        # refused: a receive that waited would end its 4 s poll with MESSAGE_NOT_FOUND
        assert _receive(stub) == [pb.Code.TOO_MANY_REQUESTS]
        for t in holders:
            t.join(60)
        assert _receive(stub, 200) == [pb.Code.MESSAGE_NOT_FOUND]


def test_idle_connection_is_closed_by_the_server(small: GrpcEndpoint):
    states: list[grpc.ChannelConnectivity] = []
    with grpc.insecure_channel(small.address) as ch:
        _route(MessagingServiceStub(ch))
        ch.subscribe(states.append, try_to_connect=False)
        until(lambda: grpc.ChannelConnectivity.IDLE in states[1:], what="the channel idle")
        assert states[0] is grpc.ChannelConnectivity.READY


@pytest.fixture
def streams_small(core: BrokerCore) -> Iterator[GrpcEndpoint]:
    limits = ServerLimits(first_message_s=0.5, max_streams_total=2)
    ep = GrpcEndpoint(core, GrpcConfig(port=0, limits=limits))
    ep.start()
    yield ep
    ep.stop(grace=0.2)


def _silent(stop: threading.Event) -> Iterator[svc.TelemetryCommand]:
    stop.wait(30)
    return
    yield


def _settings() -> svc.TelemetryCommand:
    cmd = svc.TelemetryCommand()
    cmd.settings.publishing.topics.add().name = TOPIC
    return cmd


def test_a_silent_telemetry_stream_is_cancelled_after_the_first_message_time(
    streams_small: GrpcEndpoint,
) -> None:
    stop = threading.Event()
    with grpc.insecure_channel(streams_small.address) as ch:
        call = MessagingServiceStub(ch).Telemetry(_silent(stop), timeout=20)
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as e:
            list(call)
        stop.set()
    assert e.value.code() == grpc.StatusCode.CANCELLED
    assert time.monotonic() - t0 < 10  # the client's own deadline is 20 s
    assert streams_small.streams is not None and streams_small.streams.cancelled == 1


def test_a_telemetry_stream_that_sent_its_settings_stays_open(
    streams_small: GrpcEndpoint,
) -> None:
    def commands() -> Iterator[svc.TelemetryCommand]:
        yield _settings()
        time.sleep(1.5)  # three times the first-message time
        yield _settings()

    with grpc.insecure_channel(streams_small.address) as ch:
        answers = list(MessagingServiceStub(ch).Telemetry(commands(), timeout=20))
    assert [a.status.code for a in answers] == [pb.Code.OK, pb.Code.OK]


def test_telemetry_streams_past_the_bound_are_refused_at_once(
    streams_small: GrpcEndpoint,
) -> None:
    stop = threading.Event()
    with grpc.insecure_channel(streams_small.address) as ch:
        stub = MessagingServiceStub(ch)
        held = [stub.Telemetry(_settings_then_wait(stop), timeout=20) for _ in range(2)]
        for call in held:
            assert next(call).status.code == pb.Code.OK  # both open and served
        with pytest.raises(grpc.RpcError) as e:
            list(stub.Telemetry(iter([_settings()]), timeout=20))
        stop.set()
        for call in held:
            list(call)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def _settings_then_wait(stop: threading.Event) -> Iterator[svc.TelemetryCommand]:
    yield _settings()
    stop.wait(20)


def test_a_receive_the_client_cancels_while_waiting_gives_its_hold_back(
    small: GrpcEndpoint, core: BrokerCore
) -> None:
    polling = core.pop.polling
    with grpc.insecure_channel(small.address) as ch:
        req = svc.ReceiveMessageRequest(batch_size=1)
        req.group.name = GROUP
        req.message_queue.topic.name = TOPIC
        req.long_polling_timeout.FromMilliseconds(4000)
        req.invisible_duration.FromMilliseconds(30_000)
        call = MessagingServiceStub(ch).ReceiveMessage(req, timeout=10)
        until(lambda: polling.held_count == 1, 5, what="the receive held")
        call.cancel()
        until(lambda: polling.held_count == 0, 2, what="the hold given back")  # not 4 s on
