"""gRPC ReceiveMessage with a SQL92 FilterExpression: the official Python client
(rocketmq-python-client) gets only the matching messages; a bad expression is
ILLEGAL_FILTER_EXPRESSION at once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as svc
from rocketmq.grpc_protocol.service_pb2_grpc import MessagingServiceStub

from mqstore.grpc import GrpcEndpoint
from tests.grpc.conftest import GROUP, TOPIC, client_config, message
from tests.helpers import until

pytestmark = pytest.mark.integration


def test_the_python_client_receives_only_the_messages_its_sql_selects(
    endpoint: GrpcEndpoint, producer: Any
) -> None:
    from rocketmq import FilterExpression, SimpleConsumer
    from rocketmq.grpc_protocol import FilterType

    for i in range(10):
        m = message(f"m{i}".encode(), tag="TagA" if i % 2 else "TagB")
        m.add_property("a", str(i))
        producer.send(m)
    sql = FilterExpression("a >= 4 AND TAGS = 'TagA'", FilterType.SQL)
    c = SimpleConsumer(client_config(endpoint), GROUP, {TOPIC: sql}, await_duration=1)
    c.startup()
    got: dict[bytes, Any] = {}
    try:

        def the_three() -> bool:
            for m in c.receive(32, 10):
                got[m.body] = m
                c.ack(m)
            return len(got) >= 3

        until(the_three)
        assert sorted(got) == [b"m5", b"m7", b"m9"]
        assert not c.receive(32, 10)  # nothing else matches
    finally:
        c.shutdown()


@pytest.fixture
def stub(endpoint: GrpcEndpoint) -> Iterator[Any]:
    with grpc.insecure_channel(endpoint.address) as ch:
        yield MessagingServiceStub(ch)


@pytest.mark.parametrize("expression", ["a >", "a > 'x'", ""])
def test_a_bad_sql_expression_is_illegal_filter_expression(stub: Any, expression: str) -> None:
    req = svc.ReceiveMessageRequest(batch_size=1, auto_renew=True)
    req.group.name = GROUP
    req.message_queue.topic.name = TOPIC
    req.filter_expression.type = pb.FilterType.SQL
    req.filter_expression.expression = expression
    (r,) = list(stub.ReceiveMessage(req, timeout=3.0))
    assert r.status.code == pb.Code.ILLEGAL_FILTER_EXPRESSION
