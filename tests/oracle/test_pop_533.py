"""POP over remoting, differential against the real RocketMQ 5.3.3 broker
(``shared/oracles/rocketmq-5.3.3``): the same raw POP_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME frames go to it and to ``mqstore broker``, and the answers
(response codes, the echoed invisible time, which messages come back) must be equal
(docs/pop.md §10). Skipped without Java or the oracle."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from mqstore.client.remoting_client import RemotingClient
from mqstore.remoting.codec import RemotingCommand
from tests.conftest import SHARED
from tests.helpers import until
from tests.oracle.conftest import Side
from tests.oracle.harness import Fleet

ORACLE_533 = SHARED / "oracles" / "rocketmq-5.3.3"
SEND_MESSAGE, GET_MAX_OFFSET, POP_MESSAGE, CHANGE_INVISIBLE = 10, 30, 200050, 200053
INVISIBLE_TIMES = ["-100000", "0", str(2**63 - 1), str(10**20)]
"""Each popped once; 5.3.3 takes the last as 0 (it does not parse as a long)."""


@pytest.fixture(scope="module")
def real533(fleet: Fleet) -> str:
    """A real 5.3.3 name server and broker; the broker's address."""
    _ns, broker, _store = fleet.real533("broker-a")
    return broker.address


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    c = RemotingClient()
    yield c
    c.close()


def _call(c: RemotingClient, addr: str, code: int, ext: dict[str, Any]) -> RemotingCommand:
    fields = {k: str(v) for k, v in ext.items() if v is not None}
    return c.invoke(addr, RemotingCommand(code, ext_fields=fields, body=b""), 30)


def _send(c: RemotingClient, addr: str, topic: str, body: bytes) -> None:
    ext = {"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102",
           "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": 0, "flag": 0,
           "bornTimestamp": int(time.time() * 1000), "properties": "", "reconsumeTimes": 0,
           "unitMode": "false", "batch": "false"}  # fmt: skip
    r = c.invoke(addr, RemotingCommand(SEND_MESSAGE, ext_fields={k: str(v) for k, v in
                                                                 ext.items()}, body=body), 30)  # fmt: skip
    assert r.code == 0, r.remark


def _pop(c: RemotingClient, addr: str, topic: str, group: str, **kw: Any) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": 0, "maxMsgNums": 1,
           "invisibleTime": 60_000, "pollTime": 0, "bornTime": int(time.time() * 1000),
           "initMode": 1, "expType": "TAG", "exp": "*", "order": "false", **kw}  # fmt: skip
    return _call(c, addr, POP_MESSAGE, ext)


def _offsets(r: RemotingCommand) -> str:
    """``msgOffsetInfo`` of a pop: ``<retry flag> <queue id> <offset>``."""
    return (r.ext_fields or {}).get("msgOffsetInfo", "")


def pop_answers(c: RemotingClient, addr: str, topic: str, group: str) -> dict[str, Any]:
    """The scenario: what a broker answers, with nothing that differs by nature (times,
    addresses, revive queue ids) in it."""
    for i in range(len(INVISIBLE_TIMES) + 1):
        _send(c, addr, topic, b"m%d" % i)
    _wait_dispatched(c, addr, topic, len(INVISIBLE_TIMES) + 1)
    out: dict[str, Any] = {}
    for inv in INVISIBLE_TIMES:
        r = _pop(c, addr, topic, group, invisibleTime=inv)
        out[f"pop {inv}"] = (r.code, (r.ext_fields or {}).get("invisibleTime"), _offsets(r))
    r = _pop(c, addr, topic, group, maxMsgNums=33)
    out["pop maxMsgNums=33"] = (r.code, (r.remark or "").replace(addr.rpartition(":")[0], "IP"))
    back: set[str] = set()  # the four popped first, revived into the retry topic
    for _ in range(20):  # a pop may take a revived one first (RocketMQ mixes the retry
        held = _pop(c, addr, topic, group)  # topic in at random): hold one of the topic's
        if not _offsets(held).startswith("1 "):
            break
        back.add(_offsets(held))
    h = held.ext_fields or {}
    start, offset = h["startOffsetInfo"].split()[2], h["msgOffsetInfo"].split()[2]
    name = h.get("brokerName", "broker-a")
    extra = f"{start} {h['popTime']} {h['invisibleTime']} {h['reviveQid']} 0 {name} 0 {offset}"
    for inv in ("-5", str(10**20)):
        r = _call(c, addr, CHANGE_INVISIBLE, {"consumerGroup": group, "topic": topic,
                                              "queueId": 0, "extraInfo": extra,
                                              "offset": offset, "invisibleTime": inv})  # fmt: skip
        out[f"change {inv}"] = r.code
    deadline = time.monotonic() + 90  # revive runs on its own period; slow on a loaded machine
    while len(back) < len(INVISIBLE_TIMES) and time.monotonic() < deadline:
        r = _pop(c, addr, topic, group)
        if r.code == 0 and _offsets(r).startswith("1 "):
            back.add(_offsets(r))
        elif r.code != 0:
            time.sleep(0.5)
    out["came back"] = len(back)
    return out


def test_pop_invisible_time_answers_equal_the_real_533_broker(
    real533: str, mq_side: Side, client: RemotingClient, unique: str
) -> None:
    real = pop_answers(client, real533, unique, "G" + unique)
    ours = pop_answers(client, mq_side.brokers[0].address, unique, "G" + unique)
    assert ours == real
    assert real["pop 100000000000000000000"][1] == "0"  # what the oracle showed


def _pop_settled(
    c: RemotingClient, addr: str, topic: str, group: str, **kw: Any
) -> RemotingCommand:
    """A pop, again when the broker found it late ("timeout too much": a cold JVM on a
    loaded machine reached the request after its born time + poll time)."""
    for _ in range(5):
        r = _pop(c, addr, topic, group, **kw)
        if "timeout too much" not in (r.remark or ""):
            return r
    return r


def _wait_dispatched(c: RemotingClient, addr: str, topic: str, count: int) -> None:
    """Wait until queue 0 of ``topic`` holds ``count`` messages: both brokers dispatch
    a send to its queue after answering it, and a pop's restNum counts what is there."""

    def holds() -> bool:
        r = _call(c, addr, GET_MAX_OFFSET, {"topic": topic, "queueId": 0})
        return r.code == 0 and int((r.ext_fields or {}).get("offset", "0")) >= count

    until(holds, 60, 0.05, f"{addr}: {topic} to hold {count}")


def found_answers(c: RemotingClient, addr: str, topic: str, group: str) -> list[tuple[Any, ...]]:
    """Four messages in queue 0, popped one, one, none (maxMsgNums 0), the rest, then
    nothing: code, remark, restNum and the offset infos of each answer."""
    for i in range(4):
        _send(c, addr, topic, b"m%d" % i)
    _wait_dispatched(c, addr, topic, 4)
    out = []
    for kw in ({}, {"queueId": -1}, {"maxMsgNums": 0}, {"maxMsgNums": 32}, {}, {"queueId": 1},
               {"queueId": -1, "pollTime": 300}):  # fmt: skip
        r = _pop_settled(c, addr, topic, group, **kw)
        h = r.ext_fields or {}
        out.append((kw, r.code, r.remark, h.get("restNum"), h.get("startOffsetInfo"),
                    h.get("msgOffsetInfo"), "invisibleTime" in h, "reviveQid" in h))  # fmt: skip
    return out


def test_pop_found_and_not_found_answers_equal_the_real_533_broker(
    real533: str, mq_side: Side, client: RemotingClient, unique: str
) -> None:
    real = found_answers(client, real533, unique, "G" + unique)
    ours = found_answers(client, mq_side.brokers[0].address, unique, "G" + unique)
    assert ours == real
    # what the oracle showed: FOUND with what is left, and nothing is POLLING_TIMEOUT (210)
    assert real[0][1:4] == (0, "FOUND", "3")
    assert real[2][1:6] == (210, "NO_MESSAGE_IN_QUEUE", "2", "", "")
