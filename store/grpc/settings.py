"""The settings exchange of the Telemetry stream (what clients need before they start).

A client writes its ``Settings`` (client type, access point, publishing topics or its
subscription) on the stream; the server answers with the settings it is to use
(proxy ``GrpcClientSettingsManager``, docs/grpc.md "Facts relied on"):

- producer: ``backoff_policy`` with ``max_attempts`` and an exponential backoff, and
  ``publishing.max_body_size`` (the store's maximum message size) and
  ``validate_message_type`` true;
- consumer: ``subscription.receive_batch_size``, ``long_polling_timeout``, ``fifo`` (the
  group consumes in order), and ``backoff_policy.max_attempts`` = the group's
  ``retryMaxTimes`` + 1 with a customized backoff of the store's delay levels (what
  a push consumer waits before a failed message comes again);
- ``metric.on`` false: the endpoint collects no client metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mqstore.grpc.protocol import ClientType, pb

PRODUCER_MAX_ATTEMPTS = 3
"""``grpcClientProducerMaxAttempts``."""


@dataclass(frozen=True, slots=True)
class GroupPolicy:
    """What a consumer's settings take from its group."""

    fifo: bool
    max_attempts: int


def answer(
    client: Any,
    *,
    max_body_size: int,
    long_polling_ms: int,
    receive_batch_size: int,
    backoff_ms: tuple[int, ...],
    group_policy: Callable[[str], GroupPolicy],
) -> Any:
    """The ``Settings`` to send back for the client's ``client`` settings."""
    out = pb.Settings()
    out.CopyFrom(client)
    out.metric.on = False
    if client.client_type == ClientType.PRODUCER or client.HasField("publishing"):
        bp = out.backoff_policy
        bp.max_attempts = PRODUCER_MAX_ATTEMPTS
        bp.exponential_backoff.initial.FromMilliseconds(10)
        bp.exponential_backoff.max.FromMilliseconds(1000)
        bp.exponential_backoff.multiplier = 2.0
        out.publishing.max_body_size = max_body_size
        out.publishing.validate_message_type = True
        return out
    if client.HasField("subscription"):
        policy = group_policy(client.subscription.group.name)
        sub = out.subscription
        sub.receive_batch_size = receive_batch_size
        sub.long_polling_timeout.FromMilliseconds(long_polling_ms)
        sub.fifo = policy.fifo
        out.backoff_policy.max_attempts = policy.max_attempts
        nxt = out.backoff_policy.customized_backoff.next
        del nxt[:]
        for ms in backoff_ms:
            d = nxt.add()
            d.FromMilliseconds(ms)
    return out
