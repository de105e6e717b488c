"""Writes the POP service's messages into the store: checkpoints and acks to the revive
topic, redelivery copies to the POP retry topic or the dead-letter queue.

Everything goes through the store's ordinary ``put_message``, so it is in the
CommitLog with the same durability as any message (under SYNC_FLUSH a PUT_OK record is
on disk), is replicated, and survives a restart as RocketMQ's revive log does.
"""

from __future__ import annotations

from typing import Protocol

from mqstore.consumequeue.results import StoredMessage
from mqstore.message import Message
from mqstore.pop.records import (
    ACK_TIME_INTERVAL_MS,
    CK_TAG,
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_START_DELIVER_TIME,
    AckMsg,
    PopCheckPoint,
    ck_unique_id,
)
from mqstore.put import PutResult
from mqstore.retry import retry_properties


class Putter(Protocol):
    """The one store call the writer needs."""

    def put_message(self, msg: Message) -> PutResult: ...


class RecordWriter:
    """Builds and puts the POP service's records; stateless apart from its names."""

    def __init__(self, store: Putter, revive_topic: str) -> None:
        self._store = store
        self.revive_topic = revive_topic

    def put_checkpoint(self, ck: PopCheckPoint, revive_qid: int) -> PutResult:
        """A ``ck`` record, deliverable ``ACK_TIME_INTERVAL_MS`` before its revive time."""
        deliver = ck.revive_time - ACK_TIME_INTERVAL_MS
        return self._store.put_message(
            Message(
                topic=self.revive_topic, body=ck.to_json(), tags=CK_TAG,
                keys=[ck_unique_id(ck)], queue_id=revive_qid,
                properties={PROPERTY_START_DELIVER_TIME: str(deliver)},
            )
        )  # fmt: skip

    def put_ack(self, ack: AckMsg, revive_qid: int, deliver_ms: int) -> PutResult:
        """An ``ack`` / ``bAck`` record, deliverable at the acknowledged batch's revive time."""
        return self._store.put_message(
            Message(
                topic=self.revive_topic, body=ack.to_json(), tags=ack.tag,
                keys=[ack.unique_id()], queue_id=revive_qid,
                properties={PROPERTY_START_DELIVER_TIME: str(deliver_ms)},
            )
        )  # fmt: skip

    def put_copy(
        self, original: StoredMessage, target_topic: str, normal_topic: str, first_pop_time: int
    ) -> PutResult:
        """A redelivery copy of ``original`` (``PopReviveService.reviveRetry``): body,
        flag, tags, keys and UNIQ_KEY kept (the client's message id does not change),
        ``RETRY_TOPIC`` = the topic consumed, ``RECONSUME_TIME`` and the record's
        reconsume times one more than the original's, queue 0."""
        first_pop = {PROPERTY_FIRST_POP_TIME: str(first_pop_time)}
        props = retry_properties(original, normal_topic, original.msg_id, first_pop)
        return self._store.put_message(
            Message(
                topic=target_topic, body=original.body, properties=props, queue_id=0,
                flag=original.flag, born_timestamp=original.born_timestamp,
                born_host=original.born_host, reconsume_times=original.reconsume_times + 1,
            )
        )  # fmt: skip
