"""SIGKILL a process while its timer messages are being delivered; after reopening,
every timer is delivered exactly once, none before its time (docs/timer.md §4).

The child (tests/crash/timer_child.py) puts timers due over the next 2.5 s and reports
how many were delivered; the test kills it once a random share of them was, so the kill
falls between timer checkpoints (every second) with puts made after the last one, which
a recovery that only replays from the checkpoint would make again. The timer log spans
several files (100 units each), so the recovery also crosses a blank. One trial kills the
process a second time while its recovery is catching up.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqstore import GetStatus, MessageStore
from tests.crash.killed import REPO
from tests.crash.timer_workload import timer_config
from tests.helpers import until

pytestmark = [pytest.mark.crash]
COUNT = 300


def kill_mid_delivery(root: Path, seed: int, after: int, count: int = COUNT) -> list[str]:
    """Run the child (putting ``count`` timers) until ``after`` timers were delivered,
    SIGKILL it; the acked uniq keys."""
    argv = [sys.executable, "-m", "tests.crash.timer_child", str(root), str(count), str(seed)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert proc.stdout is not None
    acked: list[str] = []
    deadline = time.monotonic() + 60
    try:
        assert proc.stdout.readline() == b"READY\n", proc.stderr.read() if proc.stderr else ""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            word, value = line.split()
            if word == b"PUT":
                acked.append(value.decode())
            elif int(value) >= after:
                break
        else:
            raise AssertionError("the child did not deliver in time")
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert len(acked) == count
    return acked


def delivered(store: MessageStore) -> list:
    """Every message of topic T (a pull returns at most 32: page through)."""
    out = []
    for qid in range(4):
        offset = 0
        while True:
            g = store.get_message("g", "T", qid, offset, 32)
            if g.status is not GetStatus.FOUND:
                break
            out.extend(g.messages)
            offset = g.next_begin_offset
    return out


@pytest.mark.parametrize(("seed", "twice"), [(1, False), (2, True)])
def test_timers_in_flight_at_a_sigkill_are_delivered_exactly_once(
    tmp_path: Path, seed: int, twice: bool
):
    root = tmp_path / "s"
    after = random.Random(seed).randrange(COUNT // 5, COUNT * 4 // 5)
    acked = kill_mid_delivery(root, seed, after)
    if twice:  # killed again while the recovery catches up (a timer put or skipped)
        kill_mid_delivery(root, seed, 1, count=0)
    with MessageStore.open(timer_config(str(root))) as store:
        until(lambda: store.wait_dispatched(60) and len(delivered(store)) >= COUNT, 60, 0.05)
        time.sleep(0.3)  # a duplicate put late would show here
        got = delivered(store)
        keys = [m.uniq_key for m in got]
        assert sorted(keys) == sorted(acked), (len(keys), len(set(keys)), len(acked))
        assert all(m.store_timestamp >= int(m.properties["TIMER_OUT_MS"]) for m in got)
