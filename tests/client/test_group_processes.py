"""A consumer group of real processes on 127.0.0.1: one SIGKILLed, one joins.

The broker (BrokerServer over a BrokerCore) runs in the test process; three consumer
processes (tests/client/group_member.py) share an 8-queue topic over TCP.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.client.consumer_harness import broker, create_topic, produce, wait_until

server = pytest.importorskip("mqstore.broker.server")

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.crash]

ROOT = Path(__file__).resolve().parents[2]
N = 4000


def spawn(namesrv: str, name: str, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.client.group_member", namesrv, name, str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def lines(out: Path) -> list[tuple[str, str, int, int]]:
    rows = []
    for p in out.glob("*.log"):
        for line in p.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4:
                rows.append((parts[0], parts[1], int(parts[2]), int(parts[3])))
    return rows


def owned(out: Path, names: list[str]) -> list[set[int]]:
    result = []
    for n in names:
        try:
            result.append(set(json.loads((out / f"{n}.owned").read_text())))
        except (OSError, ValueError):
            result.append(set())
    return result


def test_group_survives_a_sigkill_and_a_join(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with broker(tmp_path / "store") as core:
        srv = server.BrokerServer(core, "127.0.0.1", 0)
        port = srv.start()
        namesrv = f"127.0.0.1:{port}"
        qs = create_topic(core, "T", 8)
        procs = {n: spawn(namesrv, n, out) for n in ("c0", "c1", "c2")}
        try:
            assert wait_until(lambda: sum(map(len, owned(out, ["c0", "c1", "c2"]))) == 8, 20)
            bodies: list[str] = []

            def produce_in_waves() -> None:
                for i in range(8):  # ~2 s of traffic spanning the kill and the join
                    bodies.extend(produce(core, qs, N // 8, prefix=f"p{i}"))
                    time.sleep(0.25)

            producer = threading.Thread(target=produce_in_waves)
            producer.start()
            time.sleep(0.8)
            procs["c0"].send_signal(signal.SIGKILL)
            procs["c0"].wait()
            # Offsets at the crash: everything below a committed offset was consumed.
            committed = {q: core.queries.query_offset("g", "T", q) or 0 for q in range(8)}
            seen_at_kill = {(q, o) for _, _, q, o in lines(out)}
            for q, off in committed.items():
                missing = [o for o in range(off) if (q, o) not in seen_at_kill]
                assert not missing, f"queue {q}: offset {off} passed unconsumed {missing[:5]}"
            time.sleep(0.5)
            procs["c3"] = spawn(namesrv, "c3", out)
            producer.join()
            live = ["c1", "c2", "c3"]
            assert wait_until(lambda: set(bodies) <= {b for _, b, _, _ in lines(out)}, 40)

            def settled():
                sets = owned(out, live)
                return sum(map(len, sets)) == 8 and set().union(*sets) == set(range(8))

            assert wait_until(settled, 20), owned(out, live)
            rows = lines(out)
            counts = Counter(b for _, b, _, _ in rows)
            dups = {b: c for b, c in counts.items() if c > 1}
            by_body: dict[str, set[str]] = {}
            for who, b, _, _ in rows:
                by_body.setdefault(b, set()).add(who)
            print(
                f"\nproduced={len(bodies)} delivered={len(rows)} duplicates={len(dups)} "
                f"owned after settle={owned(out, live)}"
            )
            # A duplicate only comes from a queue changing hands: two consumers saw it.
            assert all(len(by_body[b]) >= 2 for b in dups)
            assert len(dups) < len(bodies) // 4
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs.values():
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
            srv.stop()
