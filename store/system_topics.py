"""Topics only the broker writes, and whether a record read back from one is the broker's.

The broker keeps its own state in topics of the CommitLog: delayed messages wait in
``SCHEDULE_TOPIC_XXXX`` (naming, in ``REAL_TOPIC``, the topic they will be delivered
to), POP checkpoints and acks are records of ``rmq_sys_REVIVE_LOG_<cluster>`` (naming
the offsets the reviver copies into a group's retry topic), POP redeliveries wait in
``%RETRY%<group>_<topic>``. A client record in one of them would be obeyed as the
broker's own: a delayed "message" delivered into a topic the client may not write, a
checkpoint that copies a topic the client may not read into its own group's retry
topic, an ack that drops another group's message.

Rules
-----
Rule 1 (no client sends). A client may not send to: RocketMQ's
``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`` (``SCHEDULE_TOPIC_XXXX``,
``SCHEDULE_TOPIC_XXXX_V2``, ``RMQ_SYS_TRANS_HALF_TOPIC``, ``RMQ_SYS_TRANS_OP_HALF_TOPIC``,
``TRANS_CHECK_MAX_TIME_TOPIC``, ``SELF_TEST_TOPIC``, ``OFFSET_MOVED_EVENT``); any topic
with the system prefix ``rmq_sys_`` (the revive topics among them; RocketMQ lists
them as system topics but does not refuse sends to them); a POP retry topic
``%RETRY%<group>_<topic>`` of a known group and a known topic. The last is a name
that a group called ``<group>_<topic>`` would also have as its retry topic (RocketMQ's
names collide the same way): such a group's consumers cannot re-send to it straight,
and send back (CONSUMER_SEND_MSG_BACK) instead, as they normally do. The answer is
RocketMQ's: NO_PERMISSION, "Sending message to topic[T] is forbidden." It holds with
and without ACL, for every send code and gRPC.

Rule 2 (read back). A record read back from a revive topic is the broker's only if
nothing of a client send is on it: no ``CLUSTER`` property (the broker stamps it on
every client send, as RocketMQ's ``SendMessageProcessor`` does) and a born host that
is the record's store host (RocketMQ's checkpoints) or has port 0 (ours); a TCP
client's born host has the client's port. A record of ``SCHEDULE_TOPIC_XXXX`` is
delivered only if it carries the ``DELAY`` level its queue stands for (the broker's
redirect writes it; a client record sent straight to the topic has none) and a
``REAL_TOPIC`` a client could send to (Rule 1). Records that fail are skipped and
logged: they were written by a broker without Rule 1.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from mqstore.message import PROPERTY_CLUSTER, PROPERTY_DELAY_TIME_LEVEL, PROPERTY_REAL_TOPIC

SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
"""``TopicValidator.RMQ_SYS_SCHEDULE_TOPIC``: where delayed messages wait for their level."""

NOT_ALLOWED_SEND_TOPICS: Final = frozenset({
    "SCHEDULE_TOPIC_XXXX", "SCHEDULE_TOPIC_XXXX_V2", "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
})  # fmt: skip
"""``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`` (RocketMQ 4.9 and 5.x)."""
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
"""``TopicValidator.SYSTEM_TOPIC_PREFIX``: the revive topics, among others."""
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"


def send_refusal(topic: str) -> str:
    """RocketMQ's remark for a refused send (``TopicValidator.isNotAllowedSendTopic``)."""
    return f"Sending message to topic[{topic}] is forbidden."


def refuses_client_sends(
    topic: str,
    is_group: Callable[[str], bool] = lambda g: False,
    is_topic: Callable[[str], bool] = lambda t: False,
) -> bool:
    """Rule 1: whether a client may not send to ``topic``; ``is_group`` / ``is_topic``
    tell which groups and topics the broker knows (for POP retry topics).

    >>> [refuses_client_sends(t) for t in ("SCHEDULE_TOPIC_XXXX", "rmq_sys_REVIVE_LOG_c", "T")]
    [True, True, False]
    >>> refuses_client_sends("%RETRY%g_T", lambda g: g == "g", lambda t: t == "T")
    True
    >>> [refuses_client_sends(t, lambda g: g == "g", lambda t: t == "T")
    ...  for t in ("%RETRY%g", "%RETRY%g_U", "%RETRY%h_T")]
    [False, False, False]
    """
    if topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX):
        return True
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return False
    name = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
    at = name.find("_")
    while at > 0:
        if is_group(name[:at]) and is_topic(name[at + 1 :]):
            return True
        at = name.find("_", at + 1)
    return False


def broker_written_revive_record(
    properties: Mapping[str, str], born_host: tuple[str, int], store_host: tuple[str, int]
) -> bool:
    """Rule 2 for a record of a revive topic.

    >>> broker_written_revive_record({}, ("127.0.0.1", 0), ("10.0.0.1", 10911))
    True
    >>> broker_written_revive_record({"CLUSTER": "c"}, ("127.0.0.1", 0), ("10.0.0.1", 10911))
    False
    >>> broker_written_revive_record({}, ("127.0.0.1", 53211), ("10.0.0.1", 10911))
    False
    """
    if PROPERTY_CLUSTER in properties:
        return False
    return born_host[1] == 0 or born_host == store_host


def broker_written_schedule_record(properties: Mapping[str, str], queue_id: int) -> bool:
    """Rule 2 for a record of ``SCHEDULE_TOPIC_XXXX`` queue ``queue_id`` (level - 1).

    >>> broker_written_schedule_record({"DELAY": "3", "REAL_TOPIC": "T"}, 2)
    True
    >>> broker_written_schedule_record({"REAL_TOPIC": "T"}, 2)
    False
    >>> broker_written_schedule_record({"DELAY": "3", "REAL_TOPIC": "rmq_sys_REVIVE_LOG_c"}, 2)
    False
    """
    if properties.get(PROPERTY_DELAY_TIME_LEVEL) != str(queue_id + 1):
        return False
    real = properties.get(PROPERTY_REAL_TOPIC, "")
    return bool(real) and not refuses_client_sends(real)
