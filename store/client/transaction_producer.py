"""TransactionProducer: RocketMQ's ``TransactionMQProducer`` over any transport that
carries END_TRANSACTION and the broker's check-back.

A transactional send is two steps around the application's own transaction::

    def execute(msg, arg):            # runs after the half message is stored
        db.insert_order(arg)          # the local transaction
        return LocalTransactionState.COMMIT_MESSAGE

    def check(msg):                   # the broker asks again about an open one
        return COMMIT_MESSAGE if db.has_order(msg.keys) else ROLLBACK_MESSAGE

    with TransactionProducer("pg", transport, execute, check) as producer:
        producer.send_in_transaction(Message("orders", b"..."), arg=order)

What it does, as the Java producer does (``DefaultMQProducerImpl.sendMessageInTransaction``):

1. Mark the message ``TRAN_MSG=true`` and ``PGROUP=<group>`` and send it: the broker
   stores it as a half message, invisible to consumers (``mqstore.transaction``).
2. Run ``execute(msg, arg)``; an exception counts as UNKNOW.
3. Send END_TRANSACTION (oneway) with the outcome, naming the half record by the send
   result's offset message id and queue offset. UNKNOW (or a lost END_TRANSACTION)
   leaves the message to check-back.
4. On CHECK_TRANSACTION_STATE the broker sends to a producer of the group (it must
   have heard this producer's HEART_BEAT: :meth:`start` sends one and then one every
   ``heartbeat_interval_s``), ``check(record)`` runs on the producer's own thread
   and its answer goes back as END_TRANSACTION with ``fromTransactionCheck=true``.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol

from mqstore.client.producer import Producer
from mqstore.client.transport import SendResult, Transport
from mqstore.commitlog import format as fmt
from mqstore.errors import IllegalMessageError
from mqstore.message import PROPERTY_PRODUCER_GROUP, PROPERTY_TRANSACTION_PREPARED, Message
from mqstore.remoting.values import Heartbeat, MessageQueue
from mqstore.transaction import CheckHandler, EndTransaction, TransactionState

log = logging.getLogger(__name__)


class LocalTransactionState(enum.Enum):
    """``LocalTransactionState`` (RocketMQ's spelling of UNKNOW kept)."""

    COMMIT_MESSAGE = TransactionState.COMMIT
    ROLLBACK_MESSAGE = TransactionState.ROLLBACK
    UNKNOW = TransactionState.UNKNOWN


LocalTransaction = Callable[[Message, Any], LocalTransactionState]
"""``(message, arg) -> state``: ``TransactionListener.executeLocalTransaction``."""
TransactionChecker = Callable[[fmt.MessageRecord], LocalTransactionState]
"""``(record) -> state``: ``TransactionListener.checkLocalTransaction``. The record has
the real topic and queue, its UNIQ_KEY and properties (``TRANSACTION_CHECK_TIMES``)."""


class TransactionTransport(Transport, Protocol):
    """A :class:`~mqstore.client.transport.Transport` with the two calls a transactional
    producer needs on top of sending."""

    def end_transaction(self, broker_name: str, header: EndTransaction) -> None:
        """END_TRANSACTION (37), oneway, to the master of ``broker_name``."""
        ...

    def set_transaction_check_handler(self, handler: CheckHandler | None) -> None:
        """Install the CHECK_TRANSACTION_STATE handler (one per transport)."""
        ...


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """A transactional send's answer: the half message's send result and the local
    transaction's outcome (``TransactionSendResult``)."""

    send: SendResult
    local_state: LocalTransactionState


def commit_log_offset(offset_msg_id: str) -> int:
    """The physical offset in an offset message id (``MessageDecoder.decodeMessageId``:
    its last 16 hex digits).

    >>> commit_log_offset("7F00000100002A9F0000000000000105")
    261
    """
    return int(offset_msg_id[-16:], 16)


class TransactionProducer:
    """Sends transactional messages and answers the broker's check-back.

    Args:
        group: producer group: the broker checks back with a live producer of it.
        transport: a transport that carries END_TRANSACTION and check-back
            (``RemoteTransport``, ``InProcessTransport``); the caller's, left open.
        execute: the local transaction (``executeLocalTransaction``).
        check: the check-back answer (``checkLocalTransaction``).
        client_id: this producer's id in its heartbeats (default host@pid#n).
        heartbeat_interval_s: how often HEART_BEAT announces the group (the Java
            client's ``heartbeatBrokerInterval``, 30 s).
        **producer_options: passed on to the :class:`Producer` that sends.
    """

    _ids = iter(range(1 << 62))

    def __init__(
        self,
        group: str,
        transport: TransactionTransport,
        execute: LocalTransaction,
        check: TransactionChecker,
        *,
        client_id: str | None = None,
        heartbeat_interval_s: float = 30.0,
        **producer_options: Any,
    ) -> None:
        self.group = group
        self.transport = transport
        self.execute = execute
        self.check = check
        self.client_id = client_id or f"{socket.gethostname()}@{os.getpid()}#tx{next(self._ids)}"
        self.heartbeat_interval_s = heartbeat_interval_s
        self.producer = Producer(group, transport, **producer_options)
        self._checks: ThreadPoolExecutor | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> TransactionProducer:
        """Announce the group (HEART_BEAT), take check-backs, allow sends.

        Raises:
            BrokerError / TransportError: the first heartbeat failed.
        """
        self._checks = ThreadPoolExecutor(1, thread_name_prefix=f"tx-check-{self.group}")
        self.transport.set_transaction_check_handler(self._on_check)
        self._stop.clear()
        self._heartbeat()
        self._beat = threading.Thread(target=self._beat_loop, name="tx-heartbeat", daemon=True)
        self._beat.start()
        self.producer.start()
        return self

    def shutdown(self) -> None:
        """Stop sending and answering check-backs. The transport stays open."""
        self.producer.shutdown()
        self._stop.set()
        self.transport.set_transaction_check_handler(None)
        if self._beat is not None:
            self._beat.join(5)
            self._beat = None
        if self._checks is not None:
            self._checks.shutdown(wait=True)
            self._checks = None

    def __enter__(self) -> TransactionProducer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _heartbeat(self) -> None:
        self.transport.heartbeat(Heartbeat(self.client_id, (), (self.group,)))

    def _beat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval_s):
            try:
                self._heartbeat()
            except Exception as e:  # the next beat retries
                log.warning("transaction producer %s: heartbeat failed: %s", self.group, e)

    # ----------------------------------------------------------------- sending

    def send_in_transaction(
        self, msg: Message, arg: object = None, queue: MessageQueue | None = None
    ) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end it.

        Raises:
            IllegalMessageError: a delayed message (RocketMQ refuses them too).
            BrokerError / TransportError: the half message was not stored (the local
                transaction did not run).
        """
        if msg.delay_level > 0:
            raise IllegalMessageError("a transactional message cannot be delayed")
        props = {
            **msg.properties,
            PROPERTY_TRANSACTION_PREPARED: "true",
            PROPERTY_PRODUCER_GROUP: self.group,
        }
        sent = self.producer.send(replace(msg, properties=props), queue)
        try:
            state = self.execute(msg, arg)
        except Exception as e:
            log.warning("transaction producer %s: local transaction failed: %s", self.group, e)
            state = LocalTransactionState.UNKNOW
        self._end(sent.queue.broker_name, sent.queue_offset, sent.offset_msg_id, sent.msg_id,
                  state, from_check=False)  # fmt: skip
        return TransactionSendResult(sent, state)

    def _end(
        self,
        broker_name: str,
        queue_offset: int,
        offset_msg_id: str,
        uniq_key: str,
        state: LocalTransactionState,
        *,
        from_check: bool,
    ) -> None:
        header = EndTransaction(
            producer_group=self.group,
            tran_state_table_offset=queue_offset,
            commit_log_offset=commit_log_offset(offset_msg_id),
            state=state.value,
            from_transaction_check=from_check,
            msg_id=uniq_key,
            transaction_id=uniq_key,
        )
        try:
            self.transport.end_transaction(broker_name, header)
        except Exception as e:  # oneway: check-back settles it later
            log.warning("transaction producer %s: END_TRANSACTION failed: %s", self.group, e)

    # ----------------------------------------------------------------- check-back

    def _on_check(self, ext: Mapping[str, str], rec: fmt.MessageRecord) -> None:
        pool = self._checks
        if pool is None:
            return
        with contextlib.suppress(RuntimeError):  # shutting down
            pool.submit(self._answer, dict(ext), rec)

    def _answer(self, ext: dict[str, str], rec: fmt.MessageRecord) -> None:
        try:
            state = self.check(rec)
        except Exception as e:
            log.warning("transaction producer %s: check failed: %s", self.group, e)
            state = LocalTransactionState.UNKNOW
        try:
            queue_offset = int(ext["tranStateTableOffset"])
            offset_id = ext.get("offsetMsgId") or f"{int(ext['commitLogOffset']):032X}"
        except (KeyError, ValueError):
            log.warning("transaction producer %s: bad check-back header %s", self.group, ext)
            return
        broker = ext.get("brokerName") or self.transport.broker_name
        uniq = ext.get("msgId") or rec.uniq_key or ""
        self._end(broker, queue_offset, offset_id, uniq, state, from_check=True)
