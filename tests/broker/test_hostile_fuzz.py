"""A seeded hostile-input run against a live broker: every request code, with valid
requests mutated field by field (surrogates, slashes, names at and past the length
limits, absurd numbers, random bodies) and frames cut or bit-flipped. Afterwards every
service is still running, a well-behaved client is still served, and every persisted
file reads back with ``json`` and with the fastjson rules."""

from __future__ import annotations

import json
import random
import re
import socket
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.broker.core import BrokerConfig, BrokerCore
from mqstore.broker.processors import NAME_SERVER_PROCESSORS, PROCESSORS
from mqstore.broker.server import BrokerServer
from mqstore.message_store import MessageStore
from mqstore.remoting.codes import RequestCode as Rq
from mqstore.remoting.codes import ResponseCode as Rs
from mqstore.remoting.fastjson import loads as fastjson_loads
from tests.broker.test_server import send_v2
from tests.broker.wire_client import WireClient
from tests.helpers import make_store

pytestmark = pytest.mark.integration

HOSTILE_NAMES = [
    "\ud800", "a\udfffb", "a/b", "../x", "..", ".", "", " ", "a b", "x\x00y", "é", "%RETRY%a/b",
    "g" * 120, "g" * 121, "t" * 127, "t" * 128, "t" * 10_000, "%DLQ%" + "g" * 123, "TBW102",
    "SCHEDULE_TOPIC_XXXX", "\\", "{}", '"', "\u202e",
]  # fmt: skip
HOSTILE_NUMBERS = ["-1", "0", "2147483647", "2147483648", "-2147483649", "9" * 40, "1e9",
                   "NaN", "", "0x10", " 7"]  # fmt: skip
GROUP_FIELDS = {"consumerGroup", "group", "a", "producerGroup"}
TOPIC_FIELDS = {"topic", "b", "c", "defaultTopic"}

BASE_EXT: dict[int, dict[str, object]] = {
    Rq.SEND_MESSAGE: {"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102",
                      "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": 0,
                      "bornTimestamp": 0, "flag": 0, "properties": "", "reconsumeTimes": 0},
    Rq.SEND_MESSAGE_V2: {"a": "pg", "b": "T", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0,
                         "h": 0, "i": "TAGS\x01A\x02", "j": 0, "k": "false"},
    Rq.SEND_BATCH_MESSAGE: {"a": "pg", "b": "T", "c": "TBW102", "d": 4, "e": 0, "f": 0,
                            "g": 0, "h": 0, "i": "", "j": 0, "k": "false", "m": "true"},
    Rq.PULL_MESSAGE: {"consumerGroup": "g", "topic": "T", "queueId": 0, "queueOffset": 0,
                      "maxMsgNums": 32, "sysFlag": 3, "commitOffset": 1,
                      "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0},
    Rq.UPDATE_AND_CREATE_TOPIC: {"topic": "Created", "readQueueNums": 4, "writeQueueNums": 4,
                                 "perm": 6, "topicFilterType": "SINGLE_TAG"},
    Rq.CONSUMER_SEND_MSG_BACK: {"group": "g", "offset": 0, "delayLevel": 1,
                                "originMsgId": "", "maxReconsumeTimes": 16},
    Rq.QUERY_MESSAGE: {"topic": "T", "key": "k", "maxNum": 32, "beginTimestamp": 0,
                       "endTimestamp": 2**62},
}  # fmt: skip
DEFAULT_EXT: dict[str, object] = {"consumerGroup": "g", "topic": "T", "queueId": 0,
                                  "commitOffset": 1, "timestamp": 0, "offset": 0,
                                  "clientID": "c1", "key": "k"}  # fmt: skip


def base_body(code: int, rng: random.Random) -> bytes:
    if code == Rq.HEART_BEAT:
        return json.dumps({"clientID": "c1", "consumerDataSet": [
            {"groupName": "g", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
             "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
             "subscriptionDataSet": [{"topic": "T", "subString": "*"}]}],
            "producerDataSet": [{"groupName": "pg"}]}).encode()  # fmt: skip
    if code in (Rq.LOCK_BATCH_MQ, Rq.UNLOCK_BATCH_MQ):
        return json.dumps({"consumerGroup": "g", "clientId": "c1", "mqSet": [
            {"topic": "T", "brokerName": "broker-a", "queueId": 0}]}).encode()  # fmt: skip
    if code == Rq.SEND_BATCH_MESSAGE:
        from mqstore.remoting.batch import encode_batch

        return encode_batch([(0, b"m%d" % i, "TAGS\x01A\x02") for i in range(3)])
    return rng.randbytes(rng.randrange(1, 64))


def mutate_json_body(body: bytes, rng: random.Random) -> bytes:
    """Replace one string value of a JSON body with a hostile name."""
    text = body.decode("utf-8", "replace")
    strings = list(re.finditer(r'"([^"\\]*)"', text))
    if not strings:
        return body
    m = rng.choice(strings)
    hostile = json.dumps(rng.choice(HOSTILE_NAMES))  # \\ud800 escapes, as a client writes
    return (text[: m.start()] + hostile + text[m.end() :]).encode()


def frame(code: int, opaque: int, ext: dict[str, object], body: bytes) -> bytes:
    header = json.dumps(
        {"code": code, "extFields": {k: str(v) for k, v in ext.items()}, "flag": 0,
         "language": "JAVA", "opaque": opaque, "serializeTypeCurrentRPC": "JSON",
         "version": 0}
    ).encode("ascii")  # fmt: skip
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def hostile_request(code: int, opaque: int, rng: random.Random) -> bytes:
    ext = dict(BASE_EXT.get(code, DEFAULT_EXT))
    body = base_body(code, rng)
    for _ in range(rng.randrange(1, 3)):
        roll = rng.random()
        key = rng.choice(sorted(ext))
        if roll < 0.45 or key in GROUP_FIELDS | TOPIC_FIELDS:
            ext[key] = rng.choice(HOSTILE_NAMES)
        elif roll < 0.75:
            ext[key] = rng.choice(HOSTILE_NUMBERS)
        elif roll < 0.85:
            del ext[key]
        elif body[:1] == b"{":
            body = mutate_json_body(body, rng)
        elif roll < 0.92:
            body = zlib.compress(b"\0" * (8 << 20), 9)  # a compression bomb
            ext["f" if "f" in ext else "sysFlag"] = 1
        else:
            body = rng.randbytes(rng.randrange(0, 4096))
    data = frame(code, opaque, ext, body)
    if rng.random() < 0.1:  # a damaged frame: the connection is dropped, that is all
        i = rng.randrange(len(data))
        data = data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
        if rng.random() < 0.5:
            data = data[: rng.randrange(len(data))]
    return data


def drive(address: str, requests: list[bytes]) -> None:
    """Send ``requests`` pipelined on one connection and read whatever comes back."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        try:
            s.sendall(b"".join(requests))
            s.shutdown(socket.SHUT_WR)
            s.settimeout(0.5)
            while s.recv(1 << 20):
                pass
        except OSError:
            pass


@pytest.fixture
def hostile_store(tmp_path: Path) -> Iterator[MessageStore]:
    store = make_store(tmp_path, message_delay_level="1s 2s")
    yield store
    store.close()


def read_config(path: Path) -> object:
    """``path`` parsed by the fastjson rules, and by ``json`` once its unquoted integer
    map keys (fastjson's form, as RocketMQ writes them) are quoted."""
    text = path.read_text(encoding="utf-8")  # strict: no surrogates, valid UTF-8
    parsed = fastjson_loads(text)
    json.loads(re.sub(r"([{,]\s*)(-?\d+):", r'\1"\2":', text))
    return parsed


@pytest.mark.slow
def test_a_seeded_hostile_run_leaves_every_service_running(hostile_store: MessageStore) -> None:
    core = BrokerCore(hostile_store, BrokerConfig(consumer_offset_persist_interval_ms=100))
    core.start()
    server = BrokerServer(core, host="127.0.0.1", port=0)
    server.start()
    rng = random.Random(1717)
    codes = sorted(set(PROCESSORS) | set(NAME_SERVER_PROCESSORS) | {Rq.PULL_MESSAGE})
    try:
        with WireClient(server.address) as good:
            assert send_v2(good, b"seed").code == Rs.SUCCESS
        opaque = 1
        for _ in range(6):
            batch = []
            for code in codes:
                for _ in range(8):
                    batch.append(hostile_request(code, opaque, rng))
                    opaque += 1
            drive(server.address, batch)
        time.sleep(2.5)  # due delayed messages, a few housekeeping rounds
        schedule = hostile_store.logics.schedule
        assert schedule is not None and schedule.running
        assert core._housekeeping.running and core.hold.running
        with WireClient(server.address) as good:
            assert send_v2(good, b"after").code == Rs.SUCCESS
            ext = {"consumerGroup": "g", "topic": "T", "queueId": 0, "commitOffset": 1}
            assert good.call(Rq.UPDATE_CONSUMER_OFFSET, ext).code == Rs.SUCCESS
            route = good.call(Rq.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
            assert route.code == Rs.SUCCESS
        assert core.offsets.persist(force=True)
        core.topics.persist()
        schedule.persist()
    finally:
        server.stop()
        core.shutdown()
    config = Path(hostile_store.root) / "config"
    files = sorted(p for p in config.glob("*.json"))
    assert {p.name for p in files} >= {"consumerOffset.json", "topics.json", "delayOffset.json"}
    for path in files:
        read_config(path)
    offsets = read_config(config / "consumerOffset.json")
    assert isinstance(offsets, dict) and offsets["offsetTable"]["T@g"] == {0: 1}
