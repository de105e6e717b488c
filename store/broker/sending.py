"""Storing what clients send: SEND_MESSAGE(_V2), SEND_BATCH_MESSAGE and
CONSUMER_SEND_MSG_BACK, with RocketMQ's topic and queue checks.

:class:`MessageSender` turns a send into store puts and the store's ``PutStatus`` into
the response code a RocketMQ client expects (``handlePutMessageResult``). Failures a
client must see come back as codes in :class:`SendOutcome` / :class:`Reply`, never as
exceptions. Thread-safe (the store and the managers are); a put may block on its
flush under SYNC_FLUSH.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mqstore.broker.bodies import inflates_within
from mqstore.broker.names import is_legal_group
from mqstore.broker.sendback import (
    DLQ_NUMS_PER_GROUP,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic,
    plan,
    retry_message,
)
from mqstore.broker.subscriptions import SubscriptionGroupManager
from mqstore.broker.topics import AUTO_CREATE_TOPIC_KEY, TopicConfigManager
from mqstore.broker.traffic import TrafficStats
from mqstore.errors import IllegalMessageError, IllegalTopicError
from mqstore.message import PROPERTY_RETRY_TOPIC, Message, validate_topic
from mqstore.property_format import PropertyFormat
from mqstore.put import PutResult
from mqstore.remoting.codes import ResponseCode
from mqstore.remoting.values import PERM_RW
from mqstore.status import PutStatus
from mqstore.store_view import StoreView
from mqstore.system_topics import refuses_client_sends, send_refusal
from mqstore.transaction import HALF_TOPIC, half_message, is_transactional

PUT_STATUS_CODES: dict[PutStatus, ResponseCode] = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.OS_PAGE_CACHE_BUSY: ResponseCode.SYSTEM_BUSY,
    PutStatus.WHEEL_TIMER_MSG_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
}
"""``SendMessageProcessor.handlePutMessageResult``; anything else is SYSTEM_ERROR."""


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """A send's answer: the response code and, when stored, one PutResult per message."""

    code: ResponseCode
    topic: str
    queue_id: int
    results: tuple[PutResult, ...] = ()
    remark: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """A plain answer: response code plus an optional remark."""

    code: ResponseCode
    remark: str | None = None


@dataclass(eq=False)
class MessageSender:
    """Puts sent and sent-back messages into the store."""

    store: StoreView
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    traffic: TrafficStats
    """Where the sent messages stored are counted (the broker's put figures)."""
    default_topic_queue_nums: int = 4
    """The queue count of a topic a send auto-creates when the client names none."""

    def send(
        self,
        topic: str,
        queue_id: int,
        messages: Sequence[Message],
        *,
        default_topic: str = AUTO_CREATE_TOPIC_KEY,
        default_queue_nums: int | None = None,
        max_reconsume_times: int | None = None,
    ) -> SendOutcome:
        """SEND_MESSAGE(_V2) for one message, SEND_BATCH_MESSAGE for several.

        Every message is stored in ``topic``/``queue_id`` (a negative id picks a random
        writable queue); the topic is auto-created as RocketMQ allows. A message a
        client sends straight to ``%RETRY%<group>`` (its fallback when send-back
        failed) goes to ``%DLQ%<group>`` once its reconsume times reach the maximum
        (``handleRetryAndDLQ``). A body flagged compressed must inflate to at most the
        store's ``max_message_size`` (``mqstore.broker.bodies``), else MESSAGE_ILLEGAL.
        A topic only the broker writes (``mqstore.system_topics`` Rule 1) is
        NO_PERMISSION, "Sending message to topic[T] is forbidden.", as RocketMQ answers.
        """
        try:  # before anything is created under that name (msgCheck)
            validate_topic(topic)
        except IllegalTopicError as e:
            return SendOutcome(ResponseCode.SYSTEM_ERROR, topic, queue_id, remark=str(e))
        if refuses_client_sends(topic, self._is_group, self._is_topic):  # system topics
            return SendOutcome(ResponseCode.NO_PERMISSION, topic, queue_id,
                               remark=send_refusal(topic))  # fmt: skip
        limit = self.store.cfg.max_message_size
        if any(not inflates_within(m.body, m.sys_flag, limit) for m in messages):
            remark = f"a compressed body does not inflate to at most {limit} bytes"
            return SendOutcome(ResponseCode.MESSAGE_ILLEGAL, topic, queue_id, remark=remark)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and len(messages) == 1:
            topic, queue_id = self._retry_or_dlq(topic, queue_id, messages[0], max_reconsume_times)
        target = self._target_queue(topic, queue_id, default_topic, default_queue_nums)
        if isinstance(target, SendOutcome):
            return target
        queue_id = target
        if not messages:
            return SendOutcome(ResponseCode.MESSAGE_ILLEGAL, topic, queue_id, remark="no message")
        return self._put(topic, queue_id, messages)

    def _is_group(self, group: str) -> bool:
        return self.groups.known(group)

    def _is_topic(self, topic: str) -> bool:
        return self.topics.get(topic) is not None

    def _target_queue(
        self, topic: str, queue_id: int, default_topic: str, default_queue_nums: int | None
    ) -> int | SendOutcome:
        """The queue id to store in (auto-creating the topic), or the refusal to send."""
        nums = default_queue_nums or self.default_topic_queue_nums
        config = self.topics.create_in_send(topic, default_topic, nums)
        if config is None:
            return SendOutcome(
                ResponseCode.TOPIC_NOT_EXIST,
                topic,
                queue_id,
                remark=f"topic[{topic}] not exist, apply first please!",
            )
        if not config.writeable:
            return SendOutcome(
                ResponseCode.NO_PERMISSION,
                topic,
                queue_id,
                remark=f"the topic[{topic}] sending is forbidden",
            )
        if queue_id < 0:
            queue_id = random.randrange(max(1, config.write_queue_nums))
        elif queue_id >= max(config.write_queue_nums, config.read_queue_nums):
            return SendOutcome(
                ResponseCode.SYSTEM_ERROR,
                topic,
                queue_id,
                remark=f"request queueId[{queue_id}] is illegal, topic {config}",
            )
        return queue_id

    def _put(self, topic: str, queue_id: int, messages: Sequence[Message]) -> SendOutcome:
        """Store ``messages`` (non-empty) in ``topic``/``queue_id``; map the put status."""
        msgs = [
            m
            if m.topic == topic and m.queue_id == queue_id
            else dataclasses.replace(m, topic=topic, queue_id=queue_id)
            for m in messages
        ]
        if len(msgs) == 1 and self._is_half(msgs[0]):  # mqstore.broker.transactions Rule 1
            self.topics.create_system(HALF_TOPIC, 1)
            msgs = [half_message(msgs[0], PropertyFormat.parse(self.store.cfg.property_format))]
        started = time.monotonic()
        try:
            results = (
                [self.store.put_message(msgs[0])]
                if len(msgs) == 1
                else self.store.put_messages(msgs)
            )
        except (IllegalTopicError, IllegalMessageError) as e:
            return SendOutcome(ResponseCode.MESSAGE_ILLEGAL, topic, queue_id, remark=str(e))
        elapsed_ms = int((time.monotonic() - started) * 1000)
        status = results[0].status
        if status is PutStatus.PUT_OK and len(results) == 1:  # the usual answer: no enum hashing
            self.traffic.record_put(1, topic, size=results[0].size, elapsed_ms=elapsed_ms)
            return SendOutcome(ResponseCode.SUCCESS, topic, queue_id, (results[0],))
        stored = [r for r in results if r.status.stored]
        self.traffic.record_put(
            len(stored), topic, size=sum(r.size for r in stored),
            failed=len(results) - len(stored), elapsed_ms=elapsed_ms,
        )  # fmt: skip
        code = PUT_STATUS_CODES.get(status, ResponseCode.SYSTEM_ERROR)
        remark = results[0].error if not status.stored else None
        return SendOutcome(code, topic, queue_id, tuple(results), remark)

    @staticmethod
    def _is_half(msg: Message) -> bool:
        """A transactional send, not a delayed redelivery (``SendMessageProcessor``)."""
        redelivery = msg.reconsume_times > 0 and msg.delay_level > 0
        return is_transactional(msg.properties) and not redelivery

    def _retry_or_dlq(
        self, topic: str, queue_id: int, msg: Message, max_times: int | None
    ) -> tuple[str, int]:
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        sub = self.groups.find(group)
        if sub is None:
            return topic, queue_id
        self.topics.create_system(topic, sub.retry_queue_nums)
        limit = sub.retry_max_times if max_times is None else max_times
        if msg.reconsume_times < limit:
            return topic, queue_id
        dlq = dlq_topic(group)
        self.topics.create_system(dlq, DLQ_NUMS_PER_GROUP)
        return dlq, 0

    def send_back(
        self,
        group: str,
        physical_offset: int,
        delay_level: int = 0,
        origin_msg_id: str = "",
        max_reconsume_times: int | None = None,
        *,
        read_refusal: Callable[[str, str | None], str | None] | None = None,
    ) -> Reply:
        """CONSUMER_SEND_MSG_BACK: retry later or DLQ (rules in ``mqstore.broker.sendback``).

        The record is copied into the group's retry topic, which the sender then reads:
        ``read_refusal(topic, origin)`` (ACL) tells why the sender may not read the
        record (its topic, and the ``RETRY_TOPIC`` it was copied from), and such a
        record is NO_PERMISSION.

        A group name that :func:`~mqstore.broker.names.validate_group` refuses is
        SUBSCRIPTION_GROUP_NOT_EXIST: no such group can exist, and its retry topic
        could not be written.
        """
        if not is_legal_group(group):
            return Reply(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group!r}",
            )
        sub = self.groups.find(group)
        if sub is None:
            return Reply(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        original = self.store.stored_message_at(physical_offset, inflate=False)
        if original is None:
            return Reply(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {physical_offset}"
            )
        refusal = (
            None
            if read_refusal is None
            else read_refusal(original.topic, original.properties.get(PROPERTY_RETRY_TOPIC))
        )
        if refusal is not None:
            return Reply(ResponseCode.NO_PERMISSION, refusal)
        limit = sub.retry_max_times if max_reconsume_times is None else max_reconsume_times
        target = plan(group, original.reconsume_times, delay_level, limit)
        nums = DLQ_NUMS_PER_GROUP if target.dlq else sub.retry_queue_nums
        self.topics.create_system(target.topic, nums, PERM_RW)
        msg = retry_message(original, target, random.randrange(nums), origin_msg_id)
        try:
            result = self.store.put_message(msg)
        except (IllegalTopicError, IllegalMessageError) as e:
            return Reply(ResponseCode.MESSAGE_ILLEGAL, str(e))
        if result.status.stored:
            return Reply(ResponseCode.SUCCESS)
        return Reply(PUT_STATUS_CODES.get(result.status, ResponseCode.SYSTEM_ERROR), result.error)
