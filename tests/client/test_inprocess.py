"""InProcessTransport: the Transport contract over a BrokerCore in the same process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.broker.core import BrokerCore
from mqstore.broker.inprocess import InProcessTransport
from mqstore.broker.topics import TopicConfig
from mqstore.client.allocate import MessageQueue
from mqstore.client.transport import (
    BrokerError,
    ConsumerData,
    Heartbeat,
    PullQuery,
    PullStatus,
    SendBack,
    SendStatus,
    Transport,
    TransportError,
)
from mqstore.message import Message
from mqstore.remoting.codes import ResponseCode
from tests.helpers import make_store


@pytest.fixture
def core(tmp_path: Path) -> Iterator[BrokerCore]:
    with make_store(tmp_path) as store, BrokerCore(store) as c:
        yield c


@pytest.fixture
def transport(core: BrokerCore) -> Iterator[InProcessTransport]:
    with InProcessTransport(core) as t:
        yield t


MQ = MessageQueue("T", "broker-a", 0)


def test_it_is_a_transport(core: BrokerCore) -> None:
    t: Transport = InProcessTransport(core)
    assert t.broker_name == "broker-a"


def test_send_then_pull_round_trips(transport: InProcessTransport) -> None:
    sent = transport.send("pg", MQ, [Message("T", b"hello", tags="A")])
    assert (sent.status, sent.queue, sent.queue_offset) == (SendStatus.SEND_OK, MQ, 0)
    transport.core.store.wait_dispatched(60)
    reply = transport.pull(PullQuery("g", MQ, 0, 32))
    assert reply.status is PullStatus.FOUND
    assert [m.body for m in reply.messages] == [b"hello"]
    assert reply.messages[0].uniq_key == sent.msg_id


def test_batch_send_joins_message_ids(transport: InProcessTransport) -> None:
    sent = transport.send("pg", MQ, [Message("T", b"a"), Message("T", b"b")])
    assert len(sent.msg_id.split(",")) == 2 and len(sent.offset_msg_id.split(",")) == 2


def test_topic_queues_after_auto_creation(transport: InProcessTransport) -> None:
    assert transport.topic_queues("T") == []
    transport.send("pg", MQ, [Message("T", b"a")])
    assert transport.topic_queues("T") == [MessageQueue("T", "broker-a", q) for q in range(4)]


def test_send_refused_raises_broker_error(transport: InProcessTransport) -> None:
    with pytest.raises(BrokerError) as e:
        transport.send("pg", MQ, [Message("T", b"")])
    assert e.value.code == ResponseCode.MESSAGE_ILLEGAL


def test_pull_with_suspend_blocks_until_a_send(transport: InProcessTransport) -> None:
    transport.core.create_topic(TopicConfig("T"))
    threading.Timer(0.2, lambda: transport.send("pg", MQ, [Message("T", b"x")])).start()
    t0 = time.monotonic()
    reply = transport.pull(PullQuery("g", MQ, 0, 32, suspend_ms=10_000))
    assert reply.status is PullStatus.FOUND
    assert time.monotonic() - t0 < 5


def test_pull_with_suspend_times_out_as_no_new_msg(transport: InProcessTransport) -> None:
    transport.core.create_topic(TopicConfig("T"))
    assert transport.pull(PullQuery("g", MQ, 0, 32, suspend_ms=100)).status is PullStatus.NO_NEW_MSG


def test_pull_offset_past_the_end_is_offset_illegal(transport: InProcessTransport) -> None:
    transport.send("pg", MQ, [Message("T", b"x")])
    transport.core.store.wait_dispatched(60)
    reply = transport.pull(PullQuery("g", MQ, 5, 32))
    assert (reply.status, reply.next_begin_offset) == (PullStatus.OFFSET_ILLEGAL, 1)


def test_offsets_commit_and_query(transport: InProcessTransport) -> None:
    transport.update_offset("g", MQ, 3)
    assert transport.query_offset("g", MQ) == 3


def test_commit_offset_piggy_backs_on_pull(transport: InProcessTransport) -> None:
    transport.core.create_topic(TopicConfig("T"))
    transport.pull(PullQuery("g", MQ, 0, 32, commit_offset=2))
    assert transport.query_offset("g", MQ) == 2


def test_second_consumer_notifies_the_first(core: BrokerCore) -> None:
    a, b = InProcessTransport(core), InProcessTransport(core)
    seen: list[str] = []
    a.set_consumer_ids_changed(seen.append)
    a.heartbeat(Heartbeat("A", (ConsumerData("g"),)))
    seen.clear()
    b.heartbeat(Heartbeat("B", (ConsumerData("g"),)))
    assert seen == ["g"]
    assert sorted(a.consumer_ids("g")) == ["A", "B"]
    b.close()
    assert a.consumer_ids("g") == ["A"]
    a.close()


def test_lock_batch_excludes_other_clients(transport: InProcessTransport) -> None:
    assert transport.lock_batch("g", "A", [MQ]) == {MQ}
    assert transport.lock_batch("g", "B", [MQ]) == set()
    transport.unlock_batch("g", "A", [MQ])
    assert transport.lock_batch("g", "B", [MQ]) == {MQ}


def test_send_back_moves_a_message_to_the_dlq_past_max(transport: InProcessTransport) -> None:
    transport.send("pg", MQ, [Message("T", b"x")])
    transport.core.store.wait_dispatched(60)
    msg = transport.pull(PullQuery("g", MQ, 0, 1)).messages[0]
    transport.send_back(SendBack("g", msg, max_reconsume_times=0))
    transport.core.store.wait_dispatched(60)
    dlq = MessageQueue("%DLQ%g", "broker-a", 0)
    assert transport.pull(PullQuery("g", dlq, 0, 1)).messages[0].body == b"x"


def test_max_min_and_search_offsets(transport: InProcessTransport) -> None:
    transport.send("pg", MQ, [Message("T", b"a"), Message("T", b"b")])
    transport.core.store.wait_dispatched(60)
    assert (transport.min_offset(MQ), transport.max_offset(MQ)) == (0, 2)
    assert transport.search_offset(MQ, 0) == 0


def test_closed_transport_refuses_calls(core: BrokerCore) -> None:
    t = InProcessTransport(core)
    t.close()
    with pytest.raises(TransportError):
        t.pull(PullQuery("g", MQ, 0, 1))
