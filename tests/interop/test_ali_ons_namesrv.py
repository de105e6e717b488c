"""node ali-ons against ``mqstore namesrv`` with two broker processes behind it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from mqstore.client.remoting_client import RemotingClient
from tests.interop.broker_harness import run_node
from tests.namesrv.processes import broker, create_topic, namesrv, route_brokers, wait_for

pytestmark = [pytest.mark.interop, pytest.mark.integration]


def test_ali_ons_routes_through_mqstore_namesrv_to_both_brokers(node: str, tmp_path: Path):
    client = RemotingClient()
    with (
        namesrv(expiry_s=60.0) as (_, ns),
        broker(tmp_path / "a", "broker-a", ns) as (_, a),
        broker(tmp_path / "b", "broker-b", ns) as (_, b),
    ):
        create_topic(client, a, "OnsNs", 4)
        create_topic(client, b, "OnsNs", 4)
        wait_for(lambda: route_brokers(client, ns, "OnsNs") == ["broker-a", "broker-b"])
        sent = [{"tags": "T", "keys": [f"k{i}"], "body": f"m{i}"} for i in range(16)]
        opts = {"nameSrv": ns, "group": "ons-pg", "topic": "OnsNs", "messages": sent}
        results = run_node(node, "ons_produce.js", opts)
        assert [r["sendStatus"] for r in results] == ["SEND_OK"] * 16
        assert Counter(r["brokerName"] for r in results) == {"broker-a": 8, "broker-b": 8}
        opts = {"nameSrv": ns, "group": "ons-cg", "topic": "OnsNs", "expect": 16}
        lines = run_node(node, "ons_consume.js", opts)
        assert lines[-1] == {"done": True, "count": 16}
        assert sorted(m["body"] for m in lines[:-1]) == sorted(m["body"] for m in sent)
    client.close()
