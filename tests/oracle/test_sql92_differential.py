"""SQL92 subscriptions and the 4.x delay level's delivered properties, differential
against the real RocketMQ 4.9.8 broker (``enablePropertyFilter=true``) and, with the 5.3.3
client, the real 5.3.3 broker: the same Java program (``java/SqlSelect.java``: push
consumers with ``MessageSelector.bySql`` over 42 messages of mixed properties, and one
message with delay level 1) runs against the real broker and against ``mqstore broker
--enable-property-filter``; each expression's delivered keys must be the same, and so must
the delayed message's properties as delivered (docs/sql92.md, docs/timer.md). Skipped
without Java or the oracles."""

from __future__ import annotations

import pytest

from mqstore.sql92 import compile_filter
from tests.oracle.harness import JAVA_DIR, Fleet, Proc, create_topic, route, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROGRAM = JAVA_DIR / "SqlSelect.java"
EXPRESSIONS = (
    "a > 3",
    "a BETWEEN 2 AND 4 AND s = 'x'",
    "s IN ('y', 'z') OR TAGS = 'TagA'",
    "a IS NULL",
    "NOT (s = 'x')",
    "TAGS = 'TagB' AND n >= 20",
    "a = 5 OR TAGS = 'TagA'",
    "s <> 'x'",
)
VOLATILE = {"UNIQ_KEY", "MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME", "REAL_QID"}
"""Delivered properties whose values differ from run to run (REAL_QID: the queue the
producer picked)."""
SEND_PATH = {"CLUSTER", "MSG_REGION", "TRACE_ON"}
"""Properties a real broker's ordinary send path adds and ``mqstore broker`` (5.x property
format) does not (``--property-format 4.9`` adds CLUSTER): not the delay level's doing."""


def sent_properties(i: int) -> dict[str, str]:
    """The properties SqlSelect.java gives message ``k{i}`` (the ones the expressions read)."""
    props = {"n": str(i)}
    if i % 3 < 2:
        props["TAGS"] = ("TagA", "TagB")[i % 3]
    if i % 5 != 4:
        props["a"] = str(i % 7)
    if i % 4 != 3:
        props["s"] = "xyz"[i % 3]
    if i == 40:
        props["a"] = "five"
    if i == 41:
        props["a"] = " 3 "
    return props


def expected(expression: str) -> str:
    """The keys mqstore.sql92 (4.x's language) delivers for ``expression``."""
    f = compile_filter(expression, string_tests=False)
    return ",".join(sorted(f"k{i}" for i in range(42) if f.matches(sent_properties(i))))


def scenario(fleet: Fleet, ns: str, broker: Proc, topic: str, java: str) -> tuple[list[str], str]:
    """Run SqlSelect.java against ``broker``: (GOT lines, the DELAYED line)."""
    for t in (topic, f"{topic}_d"):
        create_topic(broker.address, t)
        wait_until(lambda t=t: route(ns, t) is not None, timeout_s=60, step_s=0.5)
    args = [x for e in EXPRESSIONS for x in (str(expected(e).count("k")), e)]
    run = fleet.java_file if java == "4.9.8" else fleet.java533
    ran = run(PROGRAM, ns, topic, *args, timeout_s=300)
    assert ran.code == 0, ran.out[-2000:] + ran.err[-2000:]
    (delayed,) = ran.lines("DELAYED")
    return sorted(ran.lines("GOT ")), delayed


def delivered_properties(line: str) -> dict[str, str]:
    """``DELAYED name=value ...`` as a dict, the volatile values blanked, the send path's
    own properties left out."""
    props = dict(p.split("=", 1) for p in line.split()[1:])
    return {k: ("?" if k in VOLATILE else v) for k, v in props.items() if k not in SEND_PATH}


@pytest.fixture(scope="module")
def on_498(fleet: Fleet, real_ns: Proc, mq_ns: Proc) -> dict[str, tuple[list[str], str]]:
    real = fleet.real_broker("real-sql", real_ns.address, "enablePropertyFilter=true")
    mine = fleet.mq_broker("mq-sql", mq_ns.address, "--enable-property-filter")
    return {
        "real": scenario(fleet, real_ns.address, real, "TSqlDiff", "4.9.8"),
        "mqstore": scenario(fleet, mq_ns.address, mine, "TSqlDiff", "4.9.8"),
    }


@pytest.fixture(scope="module")
def on_533(fleet: Fleet, mq_ns: Proc) -> dict[str, tuple[list[str], str]]:
    ns, real, _store = fleet.real533("broker-sql", "enablePropertyFilter=true")
    mine = fleet.mq_broker("mq-sql5", mq_ns.address, "--enable-property-filter")
    return {
        "real": scenario(fleet, ns.address, real, "TSqlDiff5", "5.3.3"),
        "mqstore": scenario(fleet, mq_ns.address, mine, "TSqlDiff5", "5.3.3"),
    }


def test_bysql_consumers_get_the_same_messages_from_both_4_9_8_brokers(on_498):
    real, mine = on_498["real"][0], on_498["mqstore"][0]
    assert real == [f"GOT {j} {expected(e)}" for j, e in enumerate(EXPRESSIONS)]
    assert mine == real


def test_a_delay_level_message_arrives_with_the_same_properties_from_both_4_9_8_brokers(on_498):
    real = delivered_properties(on_498["real"][1])
    assert {"DELAY", "REAL_TOPIC", "REAL_QID"} <= set(real)
    assert delivered_properties(on_498["mqstore"][1]) == real


def test_bysql_consumers_get_the_same_messages_from_both_5_3_3_brokers(on_533):
    real, mine = on_533["real"][0], on_533["mqstore"][0]
    assert real == [f"GOT {j} {expected(e)}" for j, e in enumerate(EXPRESSIONS)]
    assert mine == real


def test_a_delay_level_message_arrives_with_the_same_properties_from_both_5_3_3_brokers(on_533):
    real = delivered_properties(on_533["real"][1])
    assert {"DELAY", "REAL_TOPIC", "REAL_QID"} <= set(real)
    assert delivered_properties(on_533["mqstore"][1]) == real
