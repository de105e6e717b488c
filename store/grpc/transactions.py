"""Transactional messages over gRPC: EndTransaction and the check-back on the Telemetry
stream, over the broker's :class:`~mqstore.broker.transactions.TransactionService`
(docs/transactions.md §6).

What the proxy does and this module does alike (``SendMessageActivity``,
``EndTransactionActivity``, ``TransactionService``, ``ClientActivity`` of
``apache/rocketmq``'s proxy):

- A TRANSACTION send (``mqstore.grpc.convert``) is a half message whose producer group
  (``PGROUP``) is the topic's name: a gRPC producer has no group, and the check-back goes
  to any producer that publishes to the topic. ``CHECK_IMMUNITY_TIME_IN_SECONDS`` is
  the message's ``orphaned_transaction_recovery_duration`` in seconds.
- The send's ``transaction_id`` is the message id (UNIQ_KEY). EndTransaction names the
  half record by ``message_id``: the newest half record of that UNIQ_KEY whose real topic
  is the request's topic (a check-back copy is newer than its original, and the answer
  to a check names the copy). Found through the index, so it works after a restart.
- A producer's Telemetry stream whose settings publish to topics is a producer
  connection of each of those topics (``mqstore.broker.connections``): CHECK_TRANSACTION_STATE
  for one of them goes down the stream as a ``RecoverOrphanedTransactionCommand`` with
  the half message and its transaction id. The producer's checker answers with
  EndTransaction, ``source`` SOURCE_SERVER_CHECK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mqstore.commitlog import format as fmt
from mqstore.compression import decompress
from mqstore.grpc.convert import SYSTEM_PROPERTIES, body_digest
from mqstore.grpc.protocol import Code, MessageType, ok, pb, status, svc
from mqstore.grpc.streams import LoopOutbox
from mqstore.remoting.codes import RequestCode, ResponseCode
from mqstore.transaction import HALF_TOPIC, EndTransaction, TransactionState, real_queue

if TYPE_CHECKING:
    from mqstore.broker.core import BrokerCore

_RESOLUTIONS = {
    pb.TransactionResolution.COMMIT: TransactionState.COMMIT,
    pb.TransactionResolution.ROLLBACK: TransactionState.ROLLBACK,
}
INDEX_WAIT_S = 3.0
"""How long EndTransaction waits for the index to take a half record just sent."""


def find_half(core: BrokerCore, topic: str, message_id: str) -> fmt.MessageRecord | None:
    """The newest half record of UNIQ_KEY ``message_id`` bound for ``topic``."""
    store = core.store
    store.wait_dispatched(INDEX_WAIT_S)
    found = store.query_by_key(HALF_TOPIC, message_id).messages
    for phys in sorted((m.physical_offset for m in found), reverse=True):
        rec = store.look_message_by_offset(phys)
        if rec is None or rec.uniq_key != message_id:
            continue
        target = real_queue(rec)
        if target is not None and target[0] == topic:
            return rec
    return None


def end_transaction(core: BrokerCore, request: Any) -> Any:
    """The EndTransactionResponse for ``request``."""
    state = _RESOLUTIONS.get(request.resolution)
    if state is None:
        return svc.EndTransactionResponse(
            status=status(Code.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK")
        )
    message_id = request.message_id or request.transaction_id
    rec = find_half(core, request.topic.name, message_id)
    if rec is None:
        return svc.EndTransactionResponse(status=status(
            Code.INVALID_TRANSACTION_ID,
            f"no open transaction of message {message_id} in topic {request.topic.name}",
        ))  # fmt: skip
    header = EndTransaction(
        producer_group=rec.properties.get("PGROUP", ""),
        tran_state_table_offset=rec.queue_offset,
        commit_log_offset=rec.physical_offset,
        state=state,
        from_transaction_check=request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
        msg_id=message_id,
        transaction_id=request.transaction_id,
    )
    reply = core.transactions.end(header, slave=core.is_slave)
    if reply.code is not ResponseCode.SUCCESS:
        return svc.EndTransactionResponse(
            status=status(Code.INTERNAL_SERVER_ERROR, reply.remark or reply.code.name)
        )
    return svc.EndTransactionResponse(status=ok())


def check_message(rec: fmt.MessageRecord) -> Any:
    """The protobuf ``Message`` a RecoverOrphanedTransactionCommand carries for the
    check-back record ``rec`` (real topic and queue, as the broker encodes it)."""
    body = decompress(rec.body, rec.sys_flag)
    msg = pb.Message()
    msg.topic.name = rec.topic
    msg.body = body
    props = rec.properties
    msg.user_properties.update({k: v for k, v in props.items() if k not in SYSTEM_PROPERTIES})
    sp = msg.system_properties
    if rec.tags:
        sp.tag = rec.tags
    sp.keys.extend(rec.keys)
    sp.message_id = rec.uniq_key or ""
    sp.body_digest.type = pb.DigestType.MD5
    sp.body_digest.checksum = body_digest(body)
    sp.body_encoding = pb.Encoding.IDENTITY
    sp.message_type = MessageType.TRANSACTION
    sp.born_timestamp.FromMilliseconds(rec.born_timestamp)
    sp.born_host = f"{rec.born_host[0]}:{rec.born_host[1]}"
    sp.store_timestamp.FromMilliseconds(rec.store_timestamp)
    sp.store_host = f"{rec.store_host[0]}:{rec.store_host[1]}"
    sp.queue_id = rec.queue_id
    sp.queue_offset = rec.queue_offset
    return msg


class TelemetryChannel:
    """A gRPC producer's Telemetry stream as the broker's client channel: the broker's
    CHECK_TRANSACTION_STATE becomes a RecoverOrphanedTransactionCommand queued for the
    stream (``outbox``), anything else is dropped."""

    def __init__(self, outbox: LoopOutbox) -> None:
        self.outbox = outbox

    def notify_consumer_ids_changed(self, group: str) -> None:
        """gRPC clients are not told (they ask for assignments)."""

    def send_oneway(self, code: int, ext: dict[str, str], body: bytes) -> None:
        """Queue the check-back command (never raises)."""
        if code != RequestCode.CHECK_TRANSACTION_STATE:
            return
        found = fmt.decode(body)
        if not isinstance(found, fmt.Record):
            return
        rec = found.record
        command = svc.RecoverOrphanedTransactionCommand(
            message=check_message(rec), transaction_id=ext.get("transactionId") or ""
        )
        self.outbox.put(svc.TelemetryCommand(recover_orphaned_transaction_command=command))
