"""Crash-test reporting: print the counters the trials collected (trials, acks, losses)."""

from __future__ import annotations

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.crash.workload import STATS

    if not STATS:
        return
    terminalreporter.section("crash trials")
    for name, counts in sorted(STATS.items()):
        fields = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        terminalreporter.write_line(f"{name}: {fields}")
