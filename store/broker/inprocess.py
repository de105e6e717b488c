"""The embedded transport: a ``mqstore.client.transport.Transport`` that calls a
:class:`~mqstore.broker.core.BrokerCore` in the same process, without sockets.

It behaves like the TCP transport, answer for answer: the same broker logic runs, the
same response codes become the same :class:`SendResult`/:class:`PullReply` or
:class:`BrokerError`, long polling really blocks, and group changes really notify.
Several consumers of one group can live in one process, each with its own transport
(its own "connection"): the transport object is the channel the broker knows the
client by, so :meth:`InProcessTransport.close` acts like a closed connection (the
client's registrations go, its groups rebalance).

Thread-safety: every method may be called from any thread. :meth:`pull` with
``suspend_ms`` blocks the calling thread on an event until the broker's hold service
answers (a message arrives or the suspend time runs out).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from mqstore.broker.core import BrokerCore
from mqstore.broker.pulls import PullOutcome, PullRequest
from mqstore.closeable import Closeable
from mqstore.commitlog import format as fmt
from mqstore.message import Message
from mqstore.remoting import values
from mqstore.remoting.codes import RequestCode, ResponseCode
from mqstore.remoting.errors import BrokerError, TransportError
from mqstore.transaction import CheckHandler, EndTransaction

log = logging.getLogger(__name__)

HOLD_MARGIN_S = 30.0
"""How long past ``suspend_ms`` a pull waits before declaring the broker lost."""


class _AsyncPull:
    """An outstanding :meth:`InProcessTransport.pull_async`: answered or cancelled,
    whichever comes first."""

    __slots__ = ("_lock", "_open")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = True

    def finish(self) -> bool:
        """Close the handle; True for the first caller only."""
        with self._lock:
            was, self._open = self._open, False
            return was

    def cancel(self) -> bool:
        """Drop the answer when it comes; False if it already came."""
        return self.finish()


def pull_reply(outcome: PullOutcome) -> values.PullReply:
    """Map a decoded pull outcome to the client's reply.

    Raises:
        BrokerError: the code is not one of the four pull codes.
    """
    status = values.PULL_STATUS.get(outcome.code)
    if status is None:
        raise BrokerError(outcome.code, outcome.remark or "")
    return values.PullReply(
        status,
        outcome.next_begin_offset,
        outcome.min_offset,
        outcome.max_offset,
        outcome.messages if status is values.PullStatus.FOUND else (),
        outcome.suggest_which_broker_id,
    )


class InProcessTransport(Closeable):
    """A client's connection to an in-process broker core."""

    def __init__(self, core: BrokerCore, client_host: str = "127.0.0.1") -> None:
        self.core = core
        self.client_host = client_host
        self.group_listeners = values.GroupListeners()
        self._tx_check: CheckHandler | None = None
        self._closed = False

    # ------------------------------------------------------------- the channel

    def notify_consumer_ids_changed(self, group: str) -> None:
        """Broker side: deliver NOTIFY_CONSUMER_IDS_CHANGED to the group's listeners."""
        if not self._closed:
            self.group_listeners(group)

    def set_consumer_ids_changed(self, handler: values.ConsumerIdsChanged | None) -> None:
        """Install the handler the broker calls on any group's change (None removes
        it); consumers listen for their own group through ``group_listeners``."""
        self.group_listeners.catch_all = handler

    def send_oneway(self, code: int, ext: dict[str, str], body: bytes) -> None:
        """Broker side: a oneway push; CHECK_TRANSACTION_STATE goes to the installed
        check handler with the decoded record, anything else is dropped."""
        handler = self._tx_check
        if code != RequestCode.CHECK_TRANSACTION_STATE or handler is None or self._closed:
            return
        found = fmt.decode(body)
        if isinstance(found, fmt.Record):
            handler(ext, found.record)

    def set_transaction_check_handler(self, handler: CheckHandler | None) -> None:
        """Install the CHECK_TRANSACTION_STATE handler (None removes it)."""
        self._tx_check = handler

    def end_transaction(self, broker_name: str, header: EndTransaction) -> None:
        """END_TRANSACTION: the broker's answer is not returned (the remoting call is
        oneway), only logged when it is not SUCCESS."""
        self._check()
        reply = self.core.transactions.end(header, slave=self.core.is_slave)
        if reply.code is not ResponseCode.SUCCESS:
            log.warning("END_TRANSACTION refused: %s %s", reply.code.name, reply.remark)

    # --------------------------------------------------------------- transport

    @property
    def broker_name(self) -> str:
        """The broker's name in routes and queues."""
        return self.core.config.broker_name

    def _check(self) -> None:
        if self._closed:
            raise TransportError("transport closed")

    def topic_queues(self, topic: str) -> list[values.MessageQueue]:
        """The topic's readable queues, sorted; [] for an unknown topic."""
        self._check()
        config = self.core.topic_config(topic)
        if config is None or not config.readable:
            return []
        name = self.broker_name
        return [values.MessageQueue(topic, name, q) for q in range(config.read_queue_nums)]

    def send(
        self, producer_group: str, queue: values.MessageQueue, messages: Sequence[Message]
    ) -> values.SendResult:
        """Store ``messages`` in ``queue`` (auto-creating the topic).

        Raises:
            BrokerError: MESSAGE_ILLEGAL, SERVICE_NOT_AVAILABLE, NO_PERMISSION, ...
        """
        self._check()
        outcome = self.core.sender.send(queue.topic, queue.queue_id, messages)
        status = values.SEND_STATUS.get(outcome.code)
        if status is None or not outcome.results:
            raise BrokerError(outcome.code, outcome.remark or "")
        results = outcome.results
        return values.SendResult(
            status,
            ",".join(r.uniq_key for r in results),
            ",".join(r.msg_id for r in results),
            values.MessageQueue(outcome.topic, self.broker_name, outcome.queue_id),
            results[0].queue_offset,
        )

    def pull(self, query: values.PullQuery) -> values.PullReply:
        """PULL_MESSAGE; blocks up to ``query.suspend_ms`` when nothing is new.

        Raises:
            BrokerError: a non-pull response code (e.g. NO_PERMISSION).
            TransportError: the broker did not answer within ``suspend_ms`` + 30 s.
        """
        done = threading.Event()
        box: list[values.PullReply | BrokerError | TransportError | None] = []

        def on_done(
            reply: values.PullReply | None, error: BrokerError | TransportError | None
        ) -> None:
            box.append(reply if error is None else error)
            done.set()

        handle = self.pull_async(query, on_done)
        if not done.wait(query.suspend_ms / 1000 + HOLD_MARGIN_S):
            handle.cancel()
            raise TransportError(f"pull of {query.queue} not answered within {query.suspend_ms} ms")
        answer = box[0]
        if isinstance(answer, values.PullReply):
            return answer
        assert answer is not None
        raise answer

    def pull_async(
        self,
        query: values.PullQuery,
        callback: Callable[[values.PullReply | None, BrokerError | TransportError | None], None],
    ) -> _AsyncPull:
        """PULL_MESSAGE without blocking: ``callback`` gets the reply (or BrokerError)
        on the broker's thread that answers (the hold service for a held pull).

        Raises:
            TransportError: this transport is closed.
        """
        self._check()
        request = PullRequest(query, decoded=True, client_host=self.client_host)
        handle = _AsyncPull()

        def on_done(outcome: PullOutcome) -> None:
            if not handle.finish():
                return
            try:
                reply = pull_reply(outcome)
            except BrokerError as e:
                callback(None, e)
                return
            callback(reply, None)

        self.core.pull(request, on_done)
        return handle

    def query_offset(self, group: str, queue: values.MessageQueue) -> int | None:
        """The group's committed offset; None for QUERY_NOT_FOUND."""
        self._check()
        return self.core.queries.query_offset(group, queue.topic, queue.queue_id)

    def update_offset(self, group: str, queue: values.MessageQueue, offset: int) -> None:
        """Commit the group's offset for ``queue``."""
        self._check()
        self.core.queries.update_offset(group, queue.topic, queue.queue_id, offset)

    def max_offset(self, queue: values.MessageQueue) -> int:
        """GET_MAX_OFFSET."""
        self._check()
        return self.core.queries.max_offset(queue.topic, queue.queue_id)

    def min_offset(self, queue: values.MessageQueue) -> int:
        """GET_MIN_OFFSET."""
        self._check()
        return self.core.queries.min_offset(queue.topic, queue.queue_id)

    def search_offset(self, queue: values.MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP."""
        self._check()
        return self.core.queries.search_offset(queue.topic, queue.queue_id, timestamp_ms)

    def heartbeat(self, hb: values.Heartbeat) -> None:
        """Register (or refresh) the client; this transport is its channel."""
        self._check()
        self.core.heartbeat(hb, self)
        self.core.connections.heartbeat(hb.client_id, hb.producer_groups, self,
                                        self.client_host, "PYTHON", 0)  # fmt: skip

    def unregister(self, client_id: str, group: str) -> None:
        """Leave ``group``; its other members are notified."""
        self._check()
        self.core.unregister(client_id, group)

    def consumer_ids(self, group: str) -> list[str]:
        """The group's live client ids."""
        self._check()
        return self.core.consumer_ids(group)

    def lock_batch(
        self, group: str, client_id: str, queues: Sequence[values.MessageQueue]
    ) -> set[values.MessageQueue]:
        """Lock ``queues`` for ``client_id`` (60 s lease); returns those now held."""
        self._check()
        return self.core.lock_batch(group, client_id, queues)

    def unlock_batch(
        self, group: str, client_id: str, queues: Sequence[values.MessageQueue]
    ) -> None:
        """Release ``client_id``'s locks on ``queues``."""
        self._check()
        self.core.unlock_batch(group, client_id, queues)

    def send_back(self, request: values.SendBack) -> None:
        """Retry the message through ``%RETRY%group`` or move it to ``%DLQ%group``.

        Raises:
            BrokerError: the broker refused (e.g. the message is gone).
        """
        self._check()
        r = request
        reply = self.core.sender.send_back(
            r.group, r.msg.physical_offset, r.delay_level, "", r.max_reconsume_times
        )
        if reply.code is not ResponseCode.SUCCESS:
            raise BrokerError(reply.code, reply.remark or "")

    def close(self) -> None:
        """Drop the connection: the broker forgets this client's registrations."""
        if self._closed:
            return
        self._closed = True
        self.core.channel_closed(self)
