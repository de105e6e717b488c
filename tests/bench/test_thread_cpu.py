"""``mqstore.tools.bench.queues.thread_cpu``: a named thread's CPU time, from /proc."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from mqstore.tools.bench.queues import thread_cpu

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/task")


def test_a_spinning_thread_shows_the_cpu_it_used() -> None:
    stop = threading.Event()
    spun = threading.Event()

    def spin() -> None:
        start = time.thread_time()
        while not stop.is_set():
            if time.thread_time() - start >= 0.3:  # many clock ticks of its own CPU
                spun.set()

    t = threading.Thread(target=spin, name="bench-spinner", daemon=True)
    t.start()
    try:
        assert spun.wait(60), "the spinning thread got no CPU for a minute"
        user, system = thread_cpu("bench-spinner")
        assert user + system > 0
    finally:
        stop.set()
        t.join(30)


def test_a_thread_that_is_not_there_used_nothing() -> None:
    assert thread_cpu("no-such-thread") == (0.0, 0.0)
