"""gRPC ``delivery_timestamp`` goes to the timer wheel (docs/timer.md §1): up to the proxy's
one-day maximum, waiting in ``rmq_sys_wheel_timer`` with its time in ``TIMER_DELIVER_MS``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

from mqstore import MessageStore
from mqstore.grpc import GrpcEndpoint
from mqstore.timer.transform import TIMER_TOPIC
from tests.grpc.test_unsupported import DEADLINE, send_request


@pytest.fixture
def stub(endpoint: GrpcEndpoint) -> Iterator[Any]:
    with grpc.insecure_channel(endpoint.address) as ch:
        yield MessagingServiceStub(ch)


def delayed(ahead_ms: int) -> tuple[Any, int]:
    req = send_request(message_type=pb.MessageType.DELAY)
    at = time.time_ns() // 1_000_000 + ahead_ms
    req.messages[0].system_properties.delivery_timestamp.FromMilliseconds(at)
    return req, at


def test_a_delivery_time_hours_ahead_waits_in_the_timer_wheel(stub: Any, store: MessageStore):
    req, at = delayed(23 * 3600 * 1000)  # beyond the 2 h of the highest 4.x delay level
    r = stub.SendMessage(req, timeout=DEADLINE)
    assert r.status.code == pb.Code.OK, r.status.message
    store.wait_dispatched(60)
    (m,) = store.get_message("g", TIMER_TOPIC, 0, 0, 8).messages
    assert m.properties["TIMER_DELIVER_MS"] == str(at)
    assert int(m.properties["TIMER_OUT_MS"]) == at // 1000 * 1000


def test_a_delivery_time_over_a_day_ahead_is_refused_as_the_proxy_does(stub: Any):
    req, _ = delayed(24 * 3600 * 1000 + 60_000)
    r = stub.SendMessage(req, timeout=DEADLINE)
    assert r.status.code == pb.Code.ILLEGAL_DELIVERY_TIME
    assert r.status.message == "the max delay time of message is too large, max is 86400000"
