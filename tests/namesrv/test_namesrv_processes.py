"""``mqstore namesrv`` with two ``mqstore broker --namesrv`` processes, over real TCP."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.client.remoting_client import RemotingClient
from mqstore.remoting.codes import RequestCode, ResponseCode
from tests.namesrv.processes import (
    broker,
    call,
    create_topic,
    namesrv,
    route,
    route_brokers,
    two_brokers,
    wait_for,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    c = RemotingClient()
    yield c
    c.close()


def test_a_topic_on_two_brokers_routes_to_both(tmp_path: Path, client: RemotingClient):
    with (
        namesrv() as (_, ns),
        broker(tmp_path / "a", "broker-a", ns) as (_, a),
        broker(tmp_path / "b", "broker-b", ns) as (_, b),
    ):
        create_topic(client, a, "Orders", 4)
        create_topic(client, b, "Orders", 2)
        wait_for(lambda: route_brokers(client, ns, "Orders") == ["broker-a", "broker-b"])
        doc = route(client, ns, "Orders")
        assert doc is not None
        addrs = {d["brokerName"]: d["brokerAddrs"]["0"] for d in doc["brokerDatas"]}
        assert addrs == {"broker-a": a, "broker-b": b}
        queues = {q["brokerName"]: q["writeQueueNums"] for q in doc["queueDatas"]}
        assert queues == {"broker-a": 4, "broker-b": 2}


def test_cluster_info_lists_both_brokers(tmp_path: Path, client: RemotingClient):
    with (
        namesrv() as (_, ns),
        broker(tmp_path / "a", "broker-a", ns) as (_, a),
        broker(tmp_path / "b", "broker-b", ns) as (_, b),
    ):
        both = '"clusterAddrTable":{"DefaultCluster":["broker-a","broker-b"]}'

        def cluster_info() -> str:
            resp = call(client, ns, RequestCode.GET_BROKER_CLUSTER_INFO)
            assert resp.code == ResponseCode.SUCCESS
            return resp.body.decode()

        wait_for(lambda: both in cluster_info())
        body = cluster_info()
        assert f'{{0:"{a}"}}' in body and f'{{0:"{b}"}}' in body  # fastjson long keys


def test_a_silent_broker_is_dropped_after_the_expiry(tmp_path: Path, client: RemotingClient):
    with two_brokers(tmp_path, client, "T", expiry_s=2.0) as (ns, _, _, pb):
        pb.send_signal(signal.SIGSTOP)  # alive, connection open, but no registrations
        stopped = time.monotonic()
        wait_for(lambda: route_brokers(client, ns, "T") == ["broker-a"], timeout_s=8.0)
        silent = time.monotonic() - stopped
        assert 1.5 < silent < 4.0, silent  # expiry 2 s, scan every 0.2 s
        pb.send_signal(signal.SIGCONT)  # it registers again and is back
        wait_for(lambda: route_brokers(client, ns, "T") == ["broker-a", "broker-b"])


def test_a_killed_broker_is_dropped_when_its_connection_closes(
    tmp_path: Path, client: RemotingClient
):
    with two_brokers(tmp_path, client, "T") as (ns, _, _, pb):
        pb.kill()
        pb.wait()
        assert wait_for(lambda: route_brokers(client, ns, "T") == ["broker-a"]) < 2.0


def test_a_stopped_broker_unregisters(tmp_path: Path, client: RemotingClient):
    with namesrv(expiry_s=60.0) as (_, ns):
        with broker(tmp_path / "b", "broker-b", ns) as (_, b):
            create_topic(client, b, "OnlyB", 4)
            wait_for(lambda: route_brokers(client, ns, "OnlyB") == ["broker-b"])
        assert route(client, ns, "OnlyB") is None
        resp = call(client, ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert "OnlyB" not in json.loads(resp.body)["topicList"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_slave_is_routed_under_its_masters_name(tmp_path: Path, client: RemotingClient):
    ha = f"127.0.0.1:{_free_port()}"
    slave_args = ("--role", "SLAVE", "--master-ha", ha)
    with (
        namesrv(expiry_s=60.0) as (_, ns),
        broker(tmp_path / "m", "broker-a", ns, "--ha-port", ha.split(":")[1]) as (_, m),
        broker(tmp_path / "s", "broker-a", ns, *slave_args) as (_, s),
    ):
        create_topic(client, m, "T", 4)

        def addrs() -> dict[str, str]:
            doc = route(client, ns, "T")
            return {} if doc is None else dict(doc["brokerDatas"][0]["brokerAddrs"])

        wait_for(lambda: addrs() == {"0": m, "1": s})
