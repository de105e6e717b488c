"""In-flight POP state survives a restart and a SIGKILL (at least once: nothing acked
comes back, nothing is lost)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqstore import FlushDiskType
from mqstore.pop import AckStatus, PopConfig, PopService
from tests.helpers import make_store
from tests.pop.conftest import put

REPO = Path(__file__).resolve().parents[2]


def collect(
    pop: PopService, group: str, topic: str, expect: set[str], settle: float = 1.0
) -> list[str]:
    """Pop and ack until every body of ``expect`` came (a revive is the revive thread's,
    so it may take a while on a busy machine: deadline 60 s), then until nothing more
    came for ``settle`` seconds (what should not come back would show there)."""
    got: list[str] = []
    deadline = time.monotonic() + 60.0
    quiet_until = time.monotonic() + settle
    while not expect <= set(got) or time.monotonic() < quiet_until:
        assert time.monotonic() < deadline, f"still missing {sorted(expect - set(got))}"
        r = pop.pop(group, topic, 32, 60_000, wait_ms=100)
        for m in r.messages:
            got.append(m.body.decode())
            assert pop.ack(group, topic, m.receipt_handle) is AckStatus.OK
            quiet_until = time.monotonic() + settle
    return got


def test_in_flight_messages_come_back_after_a_clean_restart(tmp_path: Path) -> None:
    store = make_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    put(store, "T", [b"a", b"b", b"c"])
    pop = PopService(store)
    pop.start()
    r = pop.pop("g", "T", 32, 600)
    assert pop.ack("g", "T", r.messages[0].receipt_handle) is AckStatus.OK
    pop.stop()
    store.close()

    store = make_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    pop = PopService(store)
    pop.start()
    assert pop.pop("g", "T", 32, 5000).messages == ()  # still invisible after restart
    assert sorted(collect(pop, "g", "T", {"b", "c"})) == ["b", "c"]
    pop.stop()
    store.close()


@pytest.mark.slow
def test_sigkill_loses_nothing_and_returns_no_acked_message(tmp_path: Path) -> None:
    store = make_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    bodies = [f"m{i}" for i in range(40)]
    put(store, "T", [b.encode() for b in bodies])
    store.close()

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.pop.pop_child", str(tmp_path)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )  # fmt: skip
    acked, held = set(), set()
    assert child.stdout is not None
    for line in child.stdout:
        kind, _, body = line.strip().partition(" ")
        if kind == "READY":
            break
        (acked if kind == "ACKED" else held).add(body)
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    assert acked and held

    store = make_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    pop = PopService(store, PopConfig())
    pop.start()
    # what was never popped comes from the queue, nothing acked or held comes back yet
    never_popped = set(bodies) - acked - held
    got = collect(pop, "g", "T", never_popped, settle=1.5)  # held: invisible for 60 s
    assert set(got) == never_popped
    pop.stop()
    store.close()

    # the held checkpoints due now: a clock 61 s ahead
    store = make_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    pop = PopService(store, PopConfig(), clock=lambda: time.time() + 61)
    pop.start()
    redelivered = collect(pop, "g", "T", held, settle=1.5)
    assert set(redelivered) == held  # nothing lost, no acked message comes back
    pop.stop()
    store.close()


class FakeClock:
    """Milliseconds that move only when a test says so."""

    def __init__(self) -> None:
        self.ms = 1_000_000_000_000

    def __call__(self) -> float:
        return self.ms / 1000


def test_changed_message_revived_before_its_batch_is_not_revived_again_after_restart(
    tmp_path: Path,
) -> None:
    # The change writes a checkpoint after the batch's; it is revived first, while the
    # batch's checkpoint (b still in flight) keeps the saved revive offset before it.
    clock = FakeClock()
    config = PopConfig(max_attempts=3, persist_interval_ms=10**9)
    store = make_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    put(store, "T", [b"a", b"b"])
    pop = PopService(store, config, clock=clock)
    pop.start()
    a, _b = pop.pop("g", "T", 2, 100).messages
    assert pop.change_invisible_time("g", "T", a.receipt_handle, 50).status is AckStatus.OK
    clock.ms += 60
    assert pop._revive_locked() == 1  # a is visible again, b is not yet
    pop.stop()
    store.close()

    store = make_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    pop = PopService(store, config, clock=clock)
    pop.start()
    pop._revive_locked()
    assert store.wait_dispatched(60)
    got = [(m.body, m.delivery_attempt) for m in pop.pop("g", "T", 2, 100).messages]
    pop.stop()
    store.close()
    assert got == [(b"a", 2)]
