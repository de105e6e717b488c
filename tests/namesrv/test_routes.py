"""RouteInfoManager: registration, slaves, data versions and expiry (a fake clock)."""

from __future__ import annotations

from mqstore.broker.topics import TopicConfig
from mqstore.namesrv.bodies import parse_register_body, register_body
from mqstore.namesrv.routes import DataVersion, Registration, RouteInfoManager


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reg(name: str, addr: str, bid: int = 0, version: int = 1, *topics: str) -> Registration:
    configs = tuple(TopicConfig(t, 4, 4) for t in topics)
    return Registration("C", name, addr, bid, f"{addr}-ha", DataVersion(1, version), configs)


def test_a_slave_is_listed_under_its_masters_name_and_learns_the_master():
    routes = RouteInfoManager()
    routes.register(reg("b", "m:1", 0, 1, "T"))
    result = routes.register(reg("b", "s:1", 1, 1, "Other"))
    assert (result.master_addr, result.ha_server_addr) == ("m:1", "m:1-ha")
    route = routes.route("T")
    assert route is not None and dict(route.broker_datas[0].addrs) == {0: "m:1", 1: "s:1"}
    assert routes.route("Other") is None  # a slave's topics do not make routes


def test_a_body_is_read_only_when_the_data_version_changes():
    routes = RouteInfoManager()
    routes.register(reg("b", "m:1", 0, 1, "T"))
    routes.register(reg("b", "m:1", 0, 1, "U"))  # same version: ignored
    assert routes.topics() == ["T"]


def test_an_incremental_registration_merges_into_the_brokers_topics():
    # a 4.9.8 broker's UPDATE_AND_CREATE_TOPIC: only the new topic, a bumped version;
    # the full registrations after it carry that same version
    routes = RouteInfoManager()
    routes.register(reg("b", "m:1", 0, 1, "T", "TBW102"))
    routes.register(reg("b", "m:1", 0, 2, "U"))
    routes.register(reg("b", "m:1", 0, 2, "T", "TBW102", "U"))
    assert routes.topics() == ["T", "TBW102", "U"]


def test_an_address_silent_past_the_expiry_is_dropped_with_its_queues():
    clock = Clock()
    routes = RouteInfoManager(expiry_s=120.0, clock=clock)
    routes.register(reg("a", "a:1", 0, 1, "T"))
    routes.register(reg("b", "b:1", 0, 1, "T"))
    clock.now += 100
    routes.register(reg("a", "a:1", 0, 1, "T"))
    clock.now += 30  # b silent 130 s, a 30 s
    assert routes.scan_not_active() == ["b:1"]
    route = routes.route("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["a"]
    _, clusters = routes.cluster_info()
    assert clusters == {"C": ["a"]}


def test_register_body_round_trips():
    topics = [TopicConfig("T", 2, 3, 6), TopicConfig("U", 8, 8, 4, order=True)]
    version, parsed = parse_register_body(register_body(topics, DataVersion(7, 3)))
    assert version == DataVersion(7, 3) and list(parsed) == topics
