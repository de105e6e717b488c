"""What the producer puts on the wire for a batch and for a compressed body, read back
from the frames a scripted peer (name server and broker on 127.0.0.1) receives.

A RocketMQ 4.9.x / 5.0-5.3.3 broker appends the SEND_BATCH_MESSAGE header's properties
to every message of the batch (``CommitLog.MessageExtEncoder.encode(batch)``,
docs/format.md §1.6): the header must carry only what the Java client's ``MessageBatch`` has
(``WAIT``), or every message inherits the first one's UNIQ_KEY and KEYS.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqstore.client.producer import Producer
from mqstore.client.remote import RemoteTransport
from mqstore.compression import decompress
from mqstore.message import Message, java_hashmap_order, string_to_properties
from mqstore.remoting.batch import decode_batch
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode
from tests.client.test_remote_codes import Broker

pytestmark = pytest.mark.integration


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = Broker()
    yield b
    b.peer.stop()


def _sent(broker: Broker, code: int) -> RemotingCommand:
    while True:
        req = broker.peer.received.get(timeout=10)
        if req.code == code:
            return req


def _stored_by_rocketmq_498(inner: str, header: str, cluster: str) -> str:
    """The properties RocketMQ 4.9.8 stores for one message of a batch: the message's
    own string, then the batch's (header map plus CLUSTER, serialised from a
    HashMap(16) without a trailing separator), one separator between them."""
    batch_map = [*string_to_properties(header).items(), ("CLUSTER", cluster)]
    batch = "\x02".join(f"{k}\x01{v}" for k, v in java_hashmap_order(batch_map, 16))
    if inner and not inner.endswith("\x02"):
        inner += "\x02"
    return inner + batch


def test_batch_header_carries_only_wait(broker: Broker):
    msgs = [Message("T", b"body %d" % i, tags="Batch", keys=f"bkey-{i}") for i in range(32)]
    with Producer("pg", RemoteTransport(broker.peer.address)) as producer:
        producer.send_batch(msgs)
    req = _sent(broker, RequestCode.SEND_BATCH_MESSAGE)
    assert req.ext_fields["i"] == "WAIT\x01true\x02"
    assert (req.ext_fields["f"], req.ext_fields["h"], req.ext_fields["m"]) == ("0", "0", "true")


def test_every_message_keeps_its_own_keys_through_a_broker_that_appends_the_header(
    broker: Broker,
):
    msgs = [Message("T", b"body %d" % i, tags="Batch", keys=f"bkey-{i}") for i in range(32)]
    with Producer("pg", RemoteTransport(broker.peer.address)) as producer:
        result = producer.send_batch(msgs)
    req = _sent(broker, RequestCode.SEND_BATCH_MESSAGE)
    entries = decode_batch(req.body)
    assert len(entries) == 32
    uniq_keys = result.msg_id.split(",")
    for i, (_flag, body, inner) in enumerate(entries):
        stored = string_to_properties(_stored_by_rocketmq_498(inner, req.ext_fields["i"], "c"))
        assert body == b"body %d" % i
        assert stored["KEYS"] == f"bkey-{i}" and stored["UNIQ_KEY"] == uniq_keys[i]
        assert stored["TAGS"] == "Batch" and stored["WAIT"] == "true"
    assert len(set(uniq_keys)) == 32


def test_batch_of_messages_that_disagree_on_waiting_is_refused(broker: Broker):
    from mqstore.errors import IllegalMessageError

    msgs = [Message("T", b"a"), Message("T", b"b", wait_store_msg_ok=False)]
    with (
        Producer("pg", RemoteTransport(broker.peer.address)) as producer,
        pytest.raises(IllegalMessageError, match="wait_store_msg_ok"),
    ):
        producer.send_batch(msgs)


def test_zlib_body_is_sent_with_the_compressed_bit_and_zlib_type_bits(broker: Broker):
    body = b"compress me " * 1000
    with Producer("pg", RemoteTransport(broker.peer.address), compress_over=1024) as producer:
        producer.send(Message("T", body))
    req = _sent(broker, RequestCode.SEND_MESSAGE_V2)
    assert int(req.ext_fields["f"]) == 0x301  # what the Java client writes for ZLIB
    assert req.body != body and decompress(req.body, 0x301) == body
