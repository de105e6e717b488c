"""GET_CONSUMER_RUNNING_INFO (307): a broker asks one client how a group of it runs
(``mqadmin consumerStatus``, relayed by the broker; docs/admin.md §16).

The answer body is a ``ConsumerRunningInfo`` in fastjson form: ``properties`` (the
``PROP_*`` keys ``consumerStatus`` reads: consume type, orderly, start time), the
``subscriptionSet``, and ``mqTable`` (``Map<MessageQueue, ProcessQueueInfo>``, bean
keys as in docs/admin.md §2) with each owned queue's committed offset and what its
process queue holds. ``statusTable`` (consume rates) is empty: the client keeps no
rates. A transport keeps one provider per group (:class:`RunningInfoProviders`); a
push consumer registers itself while running, and a group with none is SYSTEM_ERROR
``The Consumer Group <group> not exist in this consumer``, as the Java client answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mqstore.client.allocate import MessageQueue
from mqstore.client.by_group import ByGroup
from mqstore.client.process_queue import ProcessQueue
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import ResponseCode
from mqstore.remoting.fastjson import Bean, dumps

Provider = Callable[[], bytes]
"""Builds one group's ``ConsumerRunningInfo`` body (on a transport's reader thread:
it must only read memory)."""


@dataclass(frozen=True, slots=True)
class QueueState:
    """One owned queue: its process queue and committed offset (-1: none yet)."""

    queue: MessageQueue
    process_queue: ProcessQueue
    commit_offset: int


def _process_queue_info(state: QueueState) -> Bean:
    pq = state.process_queue
    held = pq.held()
    offsets = [m.queue_offset for m in held]
    return Bean(
        cachedMsgCount=pq.msg_count,
        cachedMsgMaxOffset=max(offsets, default=0),
        cachedMsgMinOffset=min(offsets, default=0),
        cachedMsgSizeInMiB=pq.msg_size // (1024 * 1024),
        commitOffset=state.commit_offset,
        droped=pq.dropped,
        lastConsumeTimestamp=pq.last_consume_timestamp,
        lastLockTimestamp=pq.last_lock_timestamp,
        lastPullTimestamp=pq.last_pull_timestamp,
        locked=pq.locked,
        transactionMsgCount=0,
        transactionMsgMaxOffset=0,
        transactionMsgMinOffset=0,
        tryUnlockTimes=pq.try_unlock_times,
    )


def running_info_body(
    *,
    properties: Mapping[str, str],
    subscriptions: Mapping[str, str],
    queues: list[QueueState],
) -> bytes:
    """The ``ConsumerRunningInfo`` JSON (fields alphabetical, MessageQueue bean keys).

    >>> running_info_body(properties={"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"},
    ...                   subscriptions={}, queues=[]).decode()
    '{"mqTable":{},"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},"statusTable":{},"subscriptionSet":[]}'
    """
    subs = [
        Bean(
            classFilterMode=False,
            expressionType="TAG",
            subString=expr,
            topic=topic,
        )
        for topic, expr in sorted(subscriptions.items())
    ]
    table = ",".join(
        dumps(Bean(brokerName=s.queue.broker_name, queueId=s.queue.queue_id, topic=s.queue.topic))
        + ":"
        + dumps(_process_queue_info(s))
        for s in sorted(
            queues, key=lambda s: (s.queue.topic, s.queue.broker_name, s.queue.queue_id)
        )
    )
    return (
        '{"mqTable":{' + table + '},"properties":' + dumps(dict(properties))
        + ',"statusTable":{},"subscriptionSet":' + dumps(subs) + "}"
    ).encode()  # fmt: skip


class RunningInfoProviders(ByGroup[Provider]):
    """The providers of one transport, by group. Thread-safe."""

    def answer(self, request: RemotingCommand) -> RemotingCommand:
        """The response to one GET_CONSUMER_RUNNING_INFO request."""
        group = request.ext_fields.get("consumerGroup", "")
        provider = self.get(group)
        if provider is None:
            remark = f"The Consumer Group <{group}> not exist in this consumer"
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        return request.make_response(ResponseCode.SUCCESS, body=provider())
