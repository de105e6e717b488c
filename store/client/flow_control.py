"""Pull flow control: when a queue's pulls pause (docs/client.md §2.2).

A pull loop asks :func:`check` before each pull. Anything but ``None`` means "wait
``delay_ms`` and ask again" -- the pause is what bounds a slow consumer's memory to
about ``pull_threshold_for_queue + pull_batch_size`` messages per owned queue.
"""

from __future__ import annotations

import enum

from mqstore.client.consumer_config import MIB, ConsumerConfig
from mqstore.client.process_queue import ProcessQueue


class FlowControl(enum.Enum):
    """Why a pull was paused (RocketMQ's log lines name the same three cases)."""

    CACHE_COUNT = "CACHE_COUNT"  # msgCount > pullThresholdForQueue
    CACHE_SIZE = "CACHE_SIZE"  # msgSize MiB > pullThresholdSizeForQueue
    SPAN = "SPAN"  # concurrent: last - first > consumeConcurrentlyMaxSpan


def check(pq: ProcessQueue, config: ConsumerConfig, *, orderly: bool) -> FlowControl | None:
    """The first limit ``pq`` exceeds, in RocketMQ's order, or ``None`` to pull now.

    The span check applies to concurrent consumption only: one stuck message must not
    let the window behind it grow without bound, since the commit offset cannot pass
    it (orderly queues consume in order, so their span is their count).
    """
    if pq.msg_count > config.pull_threshold_for_queue:
        return FlowControl.CACHE_COUNT
    if pq.msg_size // MIB > config.pull_threshold_size_for_queue_mib:
        return FlowControl.CACHE_SIZE
    if not orderly and pq.max_span() > config.consume_concurrently_max_span:
        return FlowControl.SPAN
    return None
