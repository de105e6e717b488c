"""The endpoint in-process next to an embedded store: started and stopped with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mqstore.grpc import GrpcConfig, GrpcEndpoint
from tests.grpc.conftest import client_config, message, quick_service, simple_consumer, until
from tests.helpers import make_store


def test_endpoint_over_an_embedded_store_serves_and_keeps_state_across_restart(
    tmp_path: Path,
) -> None:
    from rocketmq import Producer

    store = make_store(tmp_path)
    with GrpcEndpoint(store, GrpcConfig(port=0, service=quick_service())) as ep:
        p: Any = Producer(client_config(ep), ("Embedded",))
        p.startup()
        ids = [p.send(message(f"e{i}".encode(), topic="Embedded")).message_id for i in range(3)]
        p.shutdown()
        c = simple_consumer(ep, "emb", topic="Embedded")
        got = c.receive(32, 2)
        c.ack(next(m for m in got if m.body == b"e0"))
        c.shutdown()
    store.close()
    assert len(set(ids)) == 3 and {m.body for m in got} == {b"e0", b"e1", b"e2"}
    store = make_store(tmp_path)  # the acked one stays acked; the held ones come back
    try:
        with GrpcEndpoint(store, GrpcConfig(port=0, service=quick_service())) as ep:
            c = simple_consumer(ep, "emb", topic="Embedded")
            back: list[Any] = []
            until(lambda: back.extend(c.receive(32, 30)) or len(back) >= 2)
            c.shutdown()
    finally:
        store.close()
    assert sorted((m.body, m.delivery_attempt) for m in back) == [(b"e1", 2), (b"e2", 2)]
