"""Consumer settings and RocketMQ's client constants (docs/client.md §2, §3).

One frozen dataclass per consumer: the defaults are ``DefaultMQPushConsumer``'s, so a
group mixing our consumers and Java ones pulls, throttles and retries alike. Times are
milliseconds, as in RocketMQ, so values can be compared with the Java sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mqstore.client.transport import ConsumeFromWhere, MessageModel

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"

REBALANCE_LOCK_MAX_LIVE_TIME_MS: Final = 30_000
"""A process queue's local lock is trusted this long after the last successful lock."""
REBALANCE_LOCK_INTERVAL_MS: Final = 20_000
"""Orderly consumers re-lock every owned queue on this schedule (first run after 1 s)."""
PULL_MAX_IDLE_TIME_MS: Final = 120_000
POLL_NAME_SERVER_INTERVAL_MS: Final = 30_000
"""``ClientConfig.pollNameServerInterval``: how often routes are re-read."""
PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL: Final = 50
PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION: Final = 1000
PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL: Final = 20
BROKER_SUSPEND_MAX_TIME_MILLIS: Final = 15_000
CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND: Final = 30_000
SEND_BACK_FAILED_RETRY_MS: Final = 5000
"""A message whose send-back failed is consumed again locally after this delay."""
MAX_TIME_CONSUME_CONTINUOUSLY_MS: Final = 60_000
MIB: Final = 1024 * 1024


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: where a group's failed messages come back."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    """True for a ``%RETRY%`` topic (computePullFromWhere treats them specially)."""
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """Per-consumer knobs; defaults are RocketMQ 4.9/5.x ``DefaultMQPushConsumer``'s.

    ``pull_threshold_size_for_queue_mib`` is compared with the held body bytes in MiB,
    as RocketMQ does (``msgSize / 1 MiB > threshold``). ``suspend_ms`` is the long-poll
    hold; tests lower it so shutdown does not wait 15 s for a held pull.
    Orderly locks: ``lock_interval_ms`` renews every owned queue's broker lock;
    ``lock_max_live_ms`` is how long a queue is consumed after its last successful
    lock. Keep it below the broker's lease (``rebalance_lock_max_live_ms``, 60 s) so a
    member that cannot renew stops before another member may take the queue.
    ``poll_name_server_interval_ms`` is the route poll: a subscribed topic whose queue
    set changed since the last rebalance triggers a rebalance at once.
    ``pull_reply_margin_ms``: a pull not answered within ``suspend_ms`` plus this counts
    as failed and is sent again after ``exception_delay_ms`` (RocketMQ's
    ``consumerTimeoutMillisWhenSuspend``, 30 s, bounds the whole pull; here it is added
    to the suspend, so a long suspend never times out early).
    """

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp_ms: int | None = None  # None: now - 30 min at start
    consume_thread_max: int = 20
    consume_concurrently_max_span: int = 2000
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue_mib: int = 100
    pull_interval_ms: int = 0
    pull_batch_size: int = 32
    consume_message_batch_max_size: int = 1
    max_reconsume_times: int = 16
    suspend_current_queue_time_ms: int = 1000
    allocate_strategy: str = "AVG"
    rebalance_interval_ms: int = 20_000
    heartbeat_interval_ms: int = 30_000
    poll_name_server_interval_ms: int = POLL_NAME_SERVER_INTERVAL_MS
    persist_offset_interval_ms: int = 5000
    lock_interval_ms: int = REBALANCE_LOCK_INTERVAL_MS
    lock_max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS
    suspend_ms: int = BROKER_SUSPEND_MAX_TIME_MILLIS
    pull_reply_margin_ms: int = CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND
    flow_control_delay_ms: int = PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
    exception_delay_ms: int = PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION
    send_back_failed_retry_ms: int = SEND_BACK_FAILED_RETRY_MS
    instance_name: str | None = None  # None: "<pid>#<n>", unique in the process
