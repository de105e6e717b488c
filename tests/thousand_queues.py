"""The topic of 1,000 queues that the pull-service and interop tests consume from a
``mqstore broker`` process (the module fixture ``thousand_queues`` of tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

from tests.interop.broker_harness import BrokerProcess, broker_with_topic

TOPIC = "Thousand"
QUEUES = 1000
MESSAGES = 3000
"""Three in each queue: bodies ``m-0`` to ``m-2999``, tag ``T``, sent round-robin."""


def start(root: Path) -> BrokerProcess:
    """``mqstore broker`` on ``root`` holding :data:`TOPIC` (stopped again if filling it
    fails)."""
    return broker_with_topic(root, TOPIC, QUEUES, MESSAGES, tags="T")
