"""Timer messages, differential against the real RocketMQ 5.3.3 broker (timer wheel on):
the same Java 5.3.3 client scenario (``java/TimerScenario.java``: setDeliverTimeMs,
setDelayTimeSec, setDelayTimeMs, ``__STARTDELIVERTIME``, a past time, a 4.x delay level,
one beyond the 3-day maximum) against it and against ``mqstore broker`` gives the same
answers, the same delivered set with the same timer properties, the same precision, and
the same files on disk (docs/timer.md §5). Skipped without Java or the oracle."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.remoting.errors import TransportError
from mqstore.timer import format as tf
from mqstore.timer.files import TimerLog
from tests.oracle.conftest import Side
from tests.oracle.harness import JAVA_DIR, Fleet, create_topic, route, wait_until

SCENARIO = JAVA_DIR / "TimerScenario.java"
TIMED = ("deliver2500", "delaysec2", "delayms1500")
"""The messages that go through the wheel (the others are delivered as sent)."""
PRECISION_MS = 1000
LOADED_SLACK_MS = 4000


def run(fleet: Fleet, ns: str, topic: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    ran = fleet.java533(SCENARIO, ns, topic, timeout_s=300)
    assert ran.code == 0 and "DONE" in ran.out, ran.out[-2000:] + ran.err[-2000:]
    answers = sorted(ran.lines("SENT ") + ran.lines("REFUSED "))
    got: dict[str, dict[str, str]] = {}
    for line in ran.lines("GOT "):
        _, key, due, arrived, *props = line.split()
        assert key not in got, f"{key} delivered twice"
        got[key] = {"due": due, "arrived": arrived}
        got[key].update(p.split("=", 1) for p in props if not p.endswith("=null"))
    return answers, got


def _created(broker: str, topic: str) -> bool:
    try:
        create_topic(broker, topic)
    except (TransportError, AssertionError):
        return False
    return True


@pytest.fixture(scope="module")
def both(
    fleet: Fleet, mq_side: Side
) -> dict[str, tuple[list[str], dict[str, dict[str, str]], Path]]:
    real_ns, _broker, real_store = fleet.real533("broker-timer")
    mq = fleet.mq_broker("mq-timer", mq_side.ns)
    create_topic(mq.address, "TTimerDiff")
    # the topic and its route exist on the real side too before the scenario starts, so
    # neither its producer nor its consumer waits for a route (a loaded machine is slow)
    wait_until(lambda: _created(_broker.address, "TTimerDiff"), timeout_s=120, step_s=1)
    wait_until(lambda: route(real_ns.address, "TTimerDiff") is not None, timeout_s=120, step_s=1)
    out = {"real": (*run(fleet, real_ns.address, "TTimerDiff"), real_store)}
    out["mqstore"] = (*run(fleet, mq_side.ns, "TTimerDiff"), mq.log.parent / "store")
    return out


def test_the_same_sends_are_accepted_and_the_same_one_refused(both):
    assert both["mqstore"][0] == both["real"][0]
    assert any(a.startswith("REFUSED toofar 13 timer message illegal") for a in both["real"][0])


def test_the_same_messages_arrive_once_with_the_same_timer_properties(both):
    real, mine = both["real"][1], both["mqstore"][1]
    assert set(mine) == set(real) == {*TIMED, "start2000", "past", "level1"}
    for key in real:
        names = {n for n in real[key] if n != "DELAY"} - {"due", "arrived"}
        # DELAY: a 4.x delay level's re-put keeps it in 5.3.3, not in mqstore (docs/timer.md)
        assert {n for n in mine[key] if n != "DELAY"} - {"due", "arrived"} == names, key


def test_timer_messages_are_put_when_due_within_the_precision_on_both(both):
    for side in ("real", "mqstore"):
        got = both[side][1]
        for key in TIMED:
            p = got[key]
            # "due" is the client's clock at the send: a relative delay is counted from
            # the broker's arrival, a little later
            due, out, dequeued = int(p["due"]), int(p["TIMER_OUT_MS"]), int(p["TIMER_DEQUEUE_MS"])
            assert abs(out - due) <= PRECISION_MS + 500, (side, key, p)
            assert out + PRECISION_MS <= dequeued + 5, (side, key, p)  # the slot has passed
            # late by the precision at most, plus what a loaded 2-core machine delays a
            # thread by (the 5.3.3 broker itself was 2.3 s late at load 21)
            assert dequeued - due < PRECISION_MS + LOADED_SLACK_MS, (side, key, p)
        deliver = got["deliver2500"]  # an absolute time: floored to the precision
        assert int(deliver["TIMER_OUT_MS"]) == int(deliver["due"]) // 1000 * 1000


def units(store: Path) -> list[tf.Unit]:
    tlog = TimerLog(store / "timerlog", 100 * 1024 * 1024)
    tlog.load()
    try:
        return [u for _pos, u in tlog.recover_from(0)]
    finally:
        tlog.close()


def test_both_stores_hold_the_same_timer_files_and_units(both):
    real_store, mine_store = both["real"][2], both["mqstore"][2]
    for store in (real_store, mine_store):
        assert (store / "timerwheel").stat().st_size == tf.WHEEL_BYTES
        assert (store / "config" / "timercheck").stat().st_size == tf.CHECKPOINT_BYTES
        assert [p.name for p in (store / "timerlog").iterdir()] == ["00000000000000000000"]
        assert (store / "consumequeue" / "rmq_sys_wheel_timer" / "0").is_dir()
    real_units, mine_units = units(real_store), units(mine_store)
    assert len(real_units) == len(mine_units) == len(TIMED)
    for u in (*real_units, *mine_units):
        assert u.magic == tf.MAGIC_DEFAULT and u.topic_hash == tf.java_string_hash("TTimerDiff")
        assert u.write_ms % PRECISION_MS == 0 and u.due_ms % PRECISION_MS == 0
    for side in (real_units, mine_units):  # each unit names the last before it in its slot
        last: dict[int, int] = {}
        for i, u in enumerate(side):
            assert u.prev_pos == last.get(u.due_ms, -1)
            last[u.due_ms] = i * tf.UNIT_SIZE
