"""The project's broker with ``property_format="4.9"`` stores what RocketMQ 4.9.8 stores:
CLUSTER on every message, no WAIT on a single one, a batch's header properties appended
to each of its messages (WAIT kept), HashMap(16) order without a trailing separator.
The producer sends over TCP on 127.0.0.1; the records are read back from the store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.server import BrokerServer
from mqstore.client.producer import Producer
from mqstore.client.remote import RemoteTransport
from mqstore.commitlog import format as fmt
from mqstore.message import Message, string_to_properties
from mqstore.message_store import MessageStore
from mqstore.remoting.batch import encode_batch
from mqstore.remoting.codes import RequestCode
from tests.broker.wire_client import WireClient
from tests.helpers import make_store

pytestmark = pytest.mark.integration


def _serve(tmp_path: Path, property_format: str) -> Iterator[tuple[MessageStore, str]]:
    store = make_store(tmp_path, property_format=property_format, broker_cluster="c1")
    core = BrokerCore(store, BrokerConfig())
    core.start()
    srv = BrokerServer(core, host="127.0.0.1", port=0)
    srv.start()
    try:
        yield store, srv.address
    finally:
        srv.stop()
        core.shutdown()
        store.close()


@pytest.fixture
def broker49(tmp_path: Path) -> Iterator[tuple[MessageStore, str]]:
    yield from _serve(tmp_path, "4.9")


@pytest.fixture
def broker5(tmp_path: Path) -> Iterator[tuple[MessageStore, str]]:
    yield from _serve(tmp_path, "5")


def _stored(store: MessageStore, msg_ids: str) -> list[fmt.MessageRecord]:
    """The records of a send result's offset message ids, in order."""
    from mqstore.message import decode_offset_msg_id

    out = []
    for mid in msg_ids.split(","):
        rec = store.look_message_by_offset(decode_offset_msg_id(mid)[1])
        assert rec is not None
        out.append(rec)
    return out


def test_batch_messages_keep_their_own_keys_and_get_wait_and_cluster(broker49):
    store, address = broker49
    msgs = [Message("T", b"b%d" % i, tags="Batch", keys=f"bkey-{i}") for i in range(32)]
    with RemoteTransport(address) as t, Producer("pg", t) as producer:
        result = producer.send_batch(msgs)
    records = _stored(store, result.offset_msg_id)
    assert [r.body for r in records] == [m.body for m in msgs]
    for i, (rec, uniq) in enumerate(zip(records, result.msg_id.split(","), strict=True)):
        props = string_to_properties(rec.properties_string)
        assert props["KEYS"] == f"bkey-{i}" and props["UNIQ_KEY"] == uniq
        assert props["WAIT"] == "true" and props["CLUSTER"] == "c1"
        own = f"UNIQ_KEY\x01{uniq}\x02TAGS\x01Batch\x02KEYS\x01bkey-{i}\x02"  # as sent
        assert rec.properties_string == own + "CLUSTER\x01c1\x02WAIT\x01true"


def test_a_header_with_one_messages_keys_spreads_them_as_on_rocketmq(broker49):
    """The old producer's header (message 1's properties), sent by hand: 4.9.8 gives
    every message of the batch message 1's UNIQ_KEY and KEYS, and so does this mode."""
    store, address = broker49
    inner = [f"UNIQ_KEY\x01U{i}\x02KEYS\x01k{i}\x02" for i in range(3)]
    body = encode_batch([(0, b"x%d" % i, p) for i, p in enumerate(inner)])
    header = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1",
              "h": "0", "i": inner[0], "j": "0", "k": "false", "m": "true", "n": "b"}  # fmt: skip
    with WireClient(address) as c:
        resp = c.call(RequestCode.SEND_BATCH_MESSAGE, header, body)
    assert resp.code == 0, resp.remark
    records = _stored(store, resp.ext_fields["msgId"])
    assert [string_to_properties(r.properties_string)["KEYS"] for r in records] == ["k0"] * 3
    assert records[1].properties_string == (
        "UNIQ_KEY\x01U1\x02KEYS\x01k1\x02KEYS\x01k0\x02UNIQ_KEY\x01U0\x02CLUSTER\x01c1"
    )  # 4.9.8's bytes: the message's string, then the batch's (HashMap(16), no last \x02)


def test_a_single_message_gets_cluster_and_no_wait(broker49):
    store, address = broker49
    with RemoteTransport(address) as t, Producer("pg", t) as producer:
        result = producer.send(Message("T", b"one", tags="A", keys="k1"))
    (rec,) = _stored(store, result.offset_msg_id)
    assert (
        rec.properties_string
        == f"KEYS\x01k1\x02UNIQ_KEY\x01{result.msg_id}\x02CLUSTER\x01c1\x02TAGS\x01A"
    )


def test_the_default_format_stores_what_it_always_did(broker5):
    store, address = broker5
    with RemoteTransport(address) as t, Producer("pg", t) as producer:
        result = producer.send_batch([Message("T", b"a", keys="k0"), Message("T", b"b", keys="k1")])
    records = _stored(store, result.offset_msg_id)
    for i, rec in enumerate(records):
        props = string_to_properties(rec.properties_string)
        assert "CLUSTER" not in props and "WAIT" not in props and props["KEYS"] == f"k{i}"
        assert rec.properties_string.endswith("\x02")
