"""RemoteTransport: the :class:`~mqstore.client.transport.Transport` contract over TCP.

Each call becomes one RocketMQ remoting request (codes in ``mqstore.remoting.codes``),
sent with a :class:`~mqstore.client.remoting_client.RemotingClient`, so the peer may be
``mqstore broker`` or any RocketMQ 4.x broker for the codes it supports.

Where requests go
-----------------
Brokers are found through the name server (``namesrv_addr``), as the Java client does:
GET_ROUTEINFO_BY_TOPIC gives a topic's queues and each broker's master address
(:mod:`mqstore.client.route`). The transport remembers broker name -> master address
from every route it sees; a call about a ``MessageQueue`` goes to its broker's master,
looking the topic's route up first when the broker is not known yet. Calls that name
no queue (heartbeat, unregister, consumer list) go to every known broker, or to the
first one. A topic that does not exist yet has no route; its broker is then found
through the route of ``TBW102``, the default topic that brokers allowing topic
auto-creation publish.

Answers
-------
Response codes are mapped as the Java client maps them: send SUCCESS / 10 / 12 / 11 to
:class:`SendStatus`; pull SUCCESS -> FOUND, 19 -> NO_NEW_MSG, 20 -> NO_MATCHED_MSG,
21 -> OFFSET_ILLEGAL; QUERY_CONSUMER_OFFSET 22 -> ``None``; every other code raises
:class:`BrokerError`. A pull body is the broker's records back to back; they are
decoded with the record codec, bodies decompressed, and re-filtered by exact tag
(the broker filters by tag hash code, and hash codes collide).

Long polling: a pull with ``suspend_ms`` sets the suspend sysflag and waits up to
``suspend_ms`` + ``timeout_s`` for the answer, since the broker holds it that long.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from mqstore.client import wire
from mqstore.client.acl_hook import RpcHook
from mqstore.client.allocate import MessageQueue
from mqstore.client.remote_routing import Router, expect
from mqstore.client.remoting_client import RemotingClient
from mqstore.client.reset_offset import ResetOffsetHandlers
from mqstore.client.route import TopicRoute
from mqstore.client.running_info import RunningInfoProviders
from mqstore.client.transport import (
    BrokerError,
    Cancellable,
    ConsumerIdsChanged,
    GroupListeners,
    Heartbeat,
    PullCallback,
    PullQuery,
    PullReply,
    PullStatus,
    SendBack,
    SendResult,
    TransportError,
)
from mqstore.closeable import Closeable
from mqstore.commitlog import format as fmt
from mqstore.message import Message
from mqstore.records import StoredMessage
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import PullSysFlag, RequestCode, ResponseCode
from mqstore.transaction import CheckHandler, EndTransaction

log = logging.getLogger(__name__)


class RemoteTransport(Closeable):
    """A :class:`~mqstore.client.transport.Transport` to brokers found via a name server.

    Requests and broker lookup go through its
    :class:`~mqstore.client.remote_routing.Router`.

    Args:
        namesrv_addr: ``host:port`` of the name server (``mqstore broker`` serves it on
            its own port).
        client_host: this client's address, for client ids built on top.
        timeout_s: RPC timeout of every call (pulls add their suspend time).
        rpc_hook: sees every request, e.g. ``AclSigner(ak, sk)`` for an ACL broker.

    Thread-safe: one transport serves any number of threads over one connection per
    broker.
    """

    def __init__(
        self,
        namesrv_addr: str,
        client_host: str = "127.0.0.1",
        timeout_s: float = 3.0,
        *,
        rpc_hook: RpcHook | None = None,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.client_host = client_host
        self.timeout_s = timeout_s
        self._client = RemotingClient(self._on_broker_request, rpc_hook=rpc_hook)
        self._router = Router(namesrv_addr, self._client, timeout_s)
        self.group_listeners = GroupListeners()
        self._tx_check: CheckHandler | None = None
        self.reset_handlers = ResetOffsetHandlers()  # RESET_CONSUMER_CLIENT_OFFSET, by group
        self.running_info = RunningInfoProviders()  # GET_CONSUMER_RUNNING_INFO, by group

    def route(self, topic: str) -> TopicRoute | None:
        """The topic's route from the name server; ``None`` for TOPIC_NOT_EXIST.

        Raises:
            BrokerError: any other error code. TransportError: no answer or bad body.
        """
        return self._router.route(topic)

    def _on_broker_request(self, addr: str, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            self.reset_handlers.dispatch(request)
            return None if request.is_oneway else request.make_response(ResponseCode.SUCCESS)
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            self._check_transaction(request)
            return None
        if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO and not request.is_oneway:
            return self.running_info.answer(request)
        if request.code != RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            return None  # REQUEST_CODE_NOT_SUPPORTED, as the Java client answers
        self.group_listeners(request.ext_fields.get("consumerGroup", ""))
        return None if request.is_oneway else request.make_response(ResponseCode.SUCCESS)

    def _check_transaction(self, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (39, oneway): hand the header and the decoded record
        to the installed handler; a body that is not a record is logged and dropped."""
        handler = self._tx_check
        if handler is None:
            return
        found = fmt.decode(request.body)
        if not isinstance(found, fmt.Record):
            log.warning("CHECK_TRANSACTION_STATE with a body that is not a record: %s", found)
            return
        handler(dict(request.ext_fields), found.record)

    def set_transaction_check_handler(self, handler: CheckHandler | None) -> None:
        """Install the CHECK_TRANSACTION_STATE handler (None removes it)."""
        self._tx_check = handler

    def end_transaction(self, broker_name: str, header: EndTransaction) -> None:
        """END_TRANSACTION (37), oneway, to the master of ``broker_name``.

        Raises:
            TransportError: no address known for the broker, or the write failed.
        """
        addr = self._router.addr(broker_name, "")
        self._client.invoke_oneway(addr, RemotingCommand(
            code=RequestCode.END_TRANSACTION, ext_fields=header.ext()
        ))  # fmt: skip

    # ------------------------------------------------------------------ Transport

    spans_brokers = True
    """Calls about any broker's queue go through this one transport (the router finds
    the broker's master), so consumers use it for every broker of a route."""

    @property
    def broker_name(self) -> str:
        """The first known broker's name (looked up through ``TBW102`` if needed)."""
        return min(self._router.known_brokers())

    def topic_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, sorted; ``[]`` if the topic does not exist."""
        route = self.route(topic)
        return [] if route is None else route.read_queues()

    def send(
        self, producer_group: str, queue: MessageQueue, messages: Sequence[Message]
    ) -> SendResult:
        """SEND_MESSAGE_V2 for one message, SEND_BATCH_MESSAGE for several."""
        if not messages:
            raise ValueError("send needs at least one message")
        prepared = [wire.with_uniq_key(m) for m in messages]
        batch = len(prepared) > 1
        header = wire.send_header(producer_group, queue, prepared[0], batch=batch)
        body = wire.encode_batch(prepared) if batch else bytes(prepared[0].body)
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        resp = self._router.call(
            self._router.addr(queue.broker_name, queue.topic), code, header, body
        )
        status = wire.SEND_STATUS.get(resp.code)
        if status is None:
            raise BrokerError(resp.code, resp.remark or "")
        return SendResult(
            status=status,
            msg_id=",".join(m.properties[wire.UNIQ_KEY] for m in prepared),
            offset_msg_id=resp.ext_fields.get("msgId", ""),
            queue=MessageQueue(queue.topic, queue.broker_name, wire.ext_int(resp, "queueId")),
            queue_offset=wire.ext_int(resp, "queueOffset"),
        )

    def pull(self, query: PullQuery) -> PullReply:
        """PULL_MESSAGE, long-polling for up to ``query.suspend_ms``."""
        queue = query.queue
        resp = self._router.call(
            self._router.addr(queue.broker_name, queue.topic),
            RequestCode.PULL_MESSAGE,
            _pull_header(query),
            timeout_s=self.timeout_s + max(query.suspend_ms, 0) / 1000,
        )
        return _pull_reply(resp, query.expression)

    def pull_async(self, query: PullQuery, callback: PullCallback) -> Cancellable:
        """PULL_MESSAGE without waiting: ``callback`` gets the reply (or the
        BrokerError/TransportError) on the connection's reader thread, which also
        decodes the body (RocketMQ's ``pullMessageAsync``).

        Raises:
            TransportError: the broker's address is unknown or the write failed (the
                callback is not called then).
        """
        expression = query.expression

        def done(resp: RemotingCommand | None, error: TransportError | None) -> None:
            if resp is None:
                callback(None, error or TransportError("pull failed"))
                return
            try:
                reply = _pull_reply(resp, expression)
            except (BrokerError, TransportError) as e:
                callback(None, e)
                return
            except Exception as e:  # a body we cannot decode: the pull failed
                callback(None, TransportError(f"bad pull response: {e}"))
                return
            callback(reply, None)

        addr = self._router.addr(query.queue.broker_name, query.queue.topic)
        return self._router.call_async(addr, RequestCode.PULL_MESSAGE, _pull_header(query), done)

    def query_offset(self, group: str, queue: MessageQueue) -> int | None:
        """QUERY_CONSUMER_OFFSET; ``None`` when the broker has none (22)."""
        resp = self._router.call(
            self._router.addr(queue.broker_name, queue.topic),
            RequestCode.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": group, "topic": queue.topic, "queueId": queue.queue_id},
        )
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return wire.ext_int(expect(resp, ResponseCode.SUCCESS), "offset")

    def update_offset(self, group: str, queue: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET as request/response, so a refusal raises."""
        expect(
            self._router.call(
                self._router.addr(queue.broker_name, queue.topic),
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {
                    "consumerGroup": group,
                    "topic": queue.topic,
                    "queueId": queue.queue_id,
                    "commitOffset": offset,
                },
            ),
            ResponseCode.SUCCESS,
        )

    def _queue_offset(self, code: RequestCode, queue: MessageQueue, **extra: int) -> int:
        header: dict[str, object] = {"topic": queue.topic, "queueId": queue.queue_id, **extra}
        resp = self._router.call(self._router.addr(queue.broker_name, queue.topic), code, header)
        return wire.ext_int(expect(resp, ResponseCode.SUCCESS), "offset")

    def max_offset(self, queue: MessageQueue) -> int:
        """GET_MAX_OFFSET."""
        return self._queue_offset(RequestCode.GET_MAX_OFFSET, queue)

    def min_offset(self, queue: MessageQueue) -> int:
        """GET_MIN_OFFSET."""
        return self._queue_offset(RequestCode.GET_MIN_OFFSET, queue)

    def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP."""
        return self._queue_offset(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, queue, timestamp=timestamp_ms
        )

    def heartbeat(self, hb: Heartbeat) -> None:
        """HEART_BEAT to every known broker (subscribed topics are routed first)."""
        for sub in {s.topic for c in hb.consumers for s in c.subscriptions}:
            self.route(sub)
        body = json.dumps(wire.heartbeat_body(hb), separators=(",", ":")).encode()
        for addr in self._router.known_brokers().values():
            expect(self._router.call(addr, RequestCode.HEART_BEAT, body=body), ResponseCode.SUCCESS)

    def unregister(self, client_id: str, group: str) -> None:
        """UNREGISTER_CLIENT for one consumer group, on every known broker."""
        header = {"clientID": client_id, "consumerGroup": group}
        for addr in self._router.known_brokers().values():
            resp = self._router.call(addr, RequestCode.UNREGISTER_CLIENT, header)
            expect(resp, ResponseCode.SUCCESS)

    def consumer_ids(self, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP from the first known broker."""
        resp = self._router.call(
            self._router.any_broker(),
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            {"consumerGroup": group},
        )
        ids = wire.json_body(expect(resp, ResponseCode.SUCCESS)).get("consumerIdList") or []
        return [str(i) for i in ids] if isinstance(ids, list) else []

    def lock_batch(
        self, group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ on the queues' broker: the subset now locked by ``client_id``."""
        if not queues:
            return set()
        body = wire.lock_body(group, client_id, queues, only_this_broker=False)
        resp = self._router.call(
            self._router.addr(queues[0].broker_name, queues[0].topic),
            RequestCode.LOCK_BATCH_MQ,
            body=body,
        )
        locked = wire.json_body(expect(resp, ResponseCode.SUCCESS)).get("lockOKMQSet") or []
        return wire.parse_queues(locked)

    def unlock_batch(self, group: str, client_id: str, queues: Sequence[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ on the queues' broker."""
        if not queues:
            return
        body = wire.lock_body(group, client_id, queues, only_this_broker=None)
        resp = self._router.call(
            self._router.addr(queues[0].broker_name, queues[0].topic),
            RequestCode.UNLOCK_BATCH_MQ,
            body=body,
        )
        expect(resp, ResponseCode.SUCCESS)

    def send_back(self, request: SendBack) -> None:
        """CONSUMER_SEND_MSG_BACK to the broker that stored the message."""
        msg = request.msg
        host, port = msg.store_host
        addr = f"{host}:{port}"
        if addr not in self._router.known_brokers().values():
            addr = self._router.any_broker()  # e.g. a broker behind another address
        header = {
            "offset": msg.physical_offset,
            "group": request.group,
            "delayLevel": request.delay_level,
            "originMsgId": msg.uniq_key or msg.msg_id,
            "originTopic": msg.topic,
            "unitMode": False,
            "maxReconsumeTimes": request.max_reconsume_times,
        }
        resp = self._router.call(addr, RequestCode.CONSUMER_SEND_MSG_BACK, header)
        expect(resp, ResponseCode.SUCCESS)

    def set_consumer_ids_changed(self, handler: ConsumerIdsChanged | None) -> None:
        """Install the NOTIFY_CONSUMER_IDS_CHANGED handler for every group (None removes
        it); consumers listen for their own group through ``group_listeners``."""
        self.group_listeners.catch_all = handler

    def close(self) -> None:
        """Close every connection; the brokers keep running."""
        self._client.close()


def _pull_header(query: PullQuery) -> dict[str, object]:
    """PULL_MESSAGE's request header (``PullMessageRequestHeader``)."""
    sys_flag = PullSysFlag.SUBSCRIPTION
    if query.commit_offset is not None:
        sys_flag |= PullSysFlag.COMMIT_OFFSET
    if query.suspend_ms > 0:
        sys_flag |= PullSysFlag.SUSPEND
    return {
        "consumerGroup": query.group,
        "topic": query.queue.topic,
        "queueId": query.queue.queue_id,
        "queueOffset": query.offset,
        "maxMsgNums": query.max_count,
        "sysFlag": int(sys_flag),
        "commitOffset": query.commit_offset if query.commit_offset is not None else 0,
        "suspendTimeoutMillis": query.suspend_ms,
        "subscription": query.expression or "*",
        "subVersion": 0,
        "expressionType": "TAG",
    }


def _pull_reply(resp: RemotingCommand, expression: str) -> PullReply:
    """A PULL_MESSAGE response as a :class:`PullReply`.

    Raises:
        BrokerError: a code that is not a pull status.
    """
    status = wire.PULL_STATUS.get(resp.code)
    if status is None:
        raise BrokerError(resp.code, resp.remark or "")
    messages: tuple[StoredMessage, ...] = ()
    if status is PullStatus.FOUND:
        messages = wire.decode_pull_body(resp.body, expression)
    return PullReply(
        status=status,
        next_begin_offset=wire.ext_int(resp, "nextBeginOffset"),
        min_offset=wire.ext_int(resp, "minOffset"),
        max_offset=wire.ext_int(resp, "maxOffset"),
        messages=messages,
        suggest_which_broker_id=wire.ext_int(resp, "suggestWhichBrokerId"),
    )
