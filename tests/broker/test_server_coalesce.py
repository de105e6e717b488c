"""Rule 2 of ``mqstore.broker.server``: a response's buffers are joined into one write
below ``COPY_LIMIT`` bytes and handed over as views above it; either way the bytes on
the wire are the frames, in order."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from mqstore.broker.server import COPY_LIMIT, BrokerServer, coalesce
from mqstore.message_store import MessageStore
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from tests.broker.test_server import pull_ext, records, send_v2
from tests.broker.wire_client import WireClient

buffers = st.lists(st.binary(max_size=300), max_size=40)


@given(buffers, st.integers(0, 4096))
def test_coalesced_buffers_hold_the_same_bytes_in_order(bufs: list[bytes], limit: int) -> None:
    items: list[bytes | memoryview] = [memoryview(b) for b in bufs]
    size = sum(len(b) for b in bufs)
    assert b"".join(coalesce(items, size, limit)) == b"".join(bufs)


@given(buffers.filter(lambda b: len(b) > 1))
def test_several_buffers_within_the_limit_become_one(bufs: list[bytes]) -> None:
    size = sum(len(b) for b in bufs)
    out = coalesce(list(bufs), size, limit=size)
    assert out == [b"".join(bufs)]


def test_buffers_past_the_limit_are_kept_as_views_without_a_copy() -> None:
    record = bytearray(COPY_LIMIT)
    views: list[bytes | memoryview] = [b"head", memoryview(record)]
    out = coalesce(views, 4 + len(record))
    assert out is views
    assert out[1].obj is record  # type: ignore[union-attr]


def test_a_pull_larger_than_the_copy_limit_carries_the_raw_records(
    server: BrokerServer, store: MessageStore
) -> None:
    rng = random.Random(36)  # incompressible bodies: the records stay past the limit
    bodies = [rng.randbytes(COPY_LIMIT // 2) for _ in range(3)]
    with WireClient(server.address) as client:
        for body in bodies:
            assert send_v2(client, body).code == Rs.SUCCESS
        store.wait_dispatched(60)
        r = client.call(Rq.PULL_MESSAGE, pull_ext(0))
    stored = store.get_message_raw("g", "T", 0, 0)
    assert r.code == Rs.SUCCESS
    assert len(r.body) > COPY_LIMIT
    assert r.body == b"".join(bytes(b) for b in stored.buffers)
    assert len(records(r.body)) == 3


def test_pipelined_small_requests_are_answered_in_order(server: BrokerServer) -> None:
    with WireClient(server.address) as client:
        ext = {"a": "pg", "b": "T", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0,
               "i": "", "j": 0, "k": "false"}  # fmt: skip
        opaques = [client.request(Rq.SEND_MESSAGE_V2, ext, b"m%d" % i) for i in range(20)]
        answers = [client.wait_response(o) for o in opaques]
    assert [a.code for a in answers] == [Rs.SUCCESS] * 20
    assert [int(a.ext_fields["queueOffset"]) for a in answers] == list(range(20))
