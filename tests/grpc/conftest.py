"""Fixtures for the gRPC endpoint tests: a small store, a broker core and an endpoint on
a free port, and the official Python 5.x client (``rocketmq-python-client``) against it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mqstore import MessageStore
from mqstore.broker.core import BrokerCore
from mqstore.broker.subscriptions import SubscriptionGroupConfig
from mqstore.broker.topics import TopicConfig
from mqstore.grpc import GrpcConfig, GrpcEndpoint, ServiceConfig
from tests.broker import fixtures
from tests.helpers import until  # noqa: F401  re-exported for the tests

rmq = pytest.importorskip("rocketmq")

logging.getLogger("rocketmq-python-client").setLevel(logging.CRITICAL)

TOPIC = "GrpcTopic"
GROUP = "GrpcGroup"
FIFO_GROUP = "GrpcFifoGroup"


store = fixtures.store


def quick_service(**kw: Any) -> ServiceConfig:
    """A ServiceConfig whose long polls and invisible times may be short (the proxy's
    5 s / 10 s minimums lowered), for tests of other behaviour; the limits themselves are
    tested on the defaults (test_proxy_limits.py)."""
    kw.setdefault("long_polling_ms", 1000)
    return ServiceConfig(min_long_polling_ms=0, min_invisible_ms=1000, **kw)


@pytest.fixture
def core(store: MessageStore) -> Iterator[BrokerCore]:
    c = BrokerCore(store)
    c.start()
    c.create_topic(TopicConfig(TOPIC, 4, 4, attributes=(("message.type", "MIXED"),)))
    c.groups.put(SubscriptionGroupConfig(GROUP, retry_max_times=1))
    c.groups.put(SubscriptionGroupConfig(FIFO_GROUP, retry_max_times=16))
    yield c
    c.shutdown()


@pytest.fixture
def endpoint(core: BrokerCore) -> Iterator[GrpcEndpoint]:
    cfg = GrpcConfig(
        port=0,
        service=ServiceConfig(
            long_polling_ms=1000,
            min_long_polling_ms=0,
            min_invisible_ms=1000,
            fifo_groups=frozenset({FIFO_GROUP}),
        ),
    )
    ep = GrpcEndpoint(core, cfg)
    ep.start()
    yield ep
    ep.stop(grace=0.2)


def client_config(ep: GrpcEndpoint) -> Any:
    from rocketmq import ClientConfiguration, Credentials

    return ClientConfiguration(ep.address, Credentials(), request_timeout=3)


@pytest.fixture
def producer(endpoint: GrpcEndpoint) -> Iterator[Any]:
    from rocketmq import Producer

    p = Producer(client_config(endpoint), (TOPIC,))
    p.startup()
    yield p
    p.shutdown()


def simple_consumer(ep: GrpcEndpoint, group: str = GROUP, topic: str = TOPIC, wait: int = 1) -> Any:
    from rocketmq import FilterExpression, SimpleConsumer

    c = SimpleConsumer(client_config(ep), group, {topic: FilterExpression()}, await_duration=wait)
    c.startup()
    return c


@contextmanager
def consuming(
    ep: GrpcEndpoint, group: str = GROUP, topic: str = TOPIC, wait: int = 1
) -> Iterator[Any]:
    """A started :func:`simple_consumer`, shut down when the block ends."""
    c = simple_consumer(ep, group, topic, wait)
    try:
        yield c
    finally:
        c.shutdown()


def message(body: bytes, topic: str = TOPIC, **kw: Any) -> Any:
    from rocketmq import Message

    m = Message()
    m.topic = topic
    m.body = body
    for k, v in kw.items():
        setattr(m, k, v)
    return m
