"""The MessagingService handlers: each request of ``apache.rocketmq.v2`` over a broker core.

Every handler answers with the protocol's ``Status`` (never an exception to gRPC):
a refused request carries the refusing code and a one-line message, an unexpected
failure INTERNAL_ERROR with the error's text. Requests mqstore does not implement
(lite topics, recall, the pull-consumer RPCs) get NOT_IMPLEMENTED at
once. Facts and divergences from the proxy: docs/grpc.md; transactions:
``mqstore.grpc.transactions``.

Consumption is POP (``mqstore.pop``) underneath, the instance the remoting POP codes
use (``mqstore.broker.pop_processors.broker_pop``), so a message received over gRPC
and one popped over remoting are the same in-flight state.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mqstore.broker.pop_polling import FIFO_RECHECK_S, Held
from mqstore.broker.pop_processors import broker_pop
from mqstore.broker.topics import AUTO_CREATE_TOPIC_KEY, TopicConfig
from mqstore.consumequeue.filter import SQL92, Subscription, parse_subscription
from mqstore.errors import IllegalTopicError, InvalidReceiptHandleError
from mqstore.grpc import convert, settings
from mqstore.grpc.calls import Calls
from mqstore.grpc.clients import ClientTable
from mqstore.grpc.protocol import ClientType, Code, MessageType, Permission, ok, pb, status, svc
from mqstore.grpc.streams import Incoming, LoopOutbox, merged
from mqstore.grpc.transactions import TelemetryChannel, end_transaction
from mqstore.message import validate_topic
from mqstore.pop.records import MAX_BATCH, pop_retry_topic
from mqstore.pop.service import AckStatus, PopResult, PopService
from mqstore.remoting.codes import ResponseCode
from mqstore.schedule import DelayLevels
from mqstore.sql92 import SqlParseError

if TYPE_CHECKING:
    from mqstore.broker.core import BrokerCore

log = logging.getLogger(__name__)

MAX_INVISIBLE_MS = 12 * 3600 * 1000
"""``maxInvisibleTimeMills``: the longest invisible time a receive may ask for."""
MALFORMED = "malformed request: the bytes do not parse as the method's message"


class _Malformed:
    """The type of :data:`MALFORMED_REQUEST`."""


MALFORMED_REQUEST = _Malformed()
"""What the endpoint's request parser gives for bytes that do not parse."""
POLL_BUFFER_S = 0.3
"""A long poll ends this long before the client's deadline, so the answer arrives."""

ACCEPTED_TYPES: dict[str, tuple[int, ...]] = {
    "MIXED": (MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION),
    "NORMAL": (MessageType.NORMAL,),
    "FIFO": (MessageType.FIFO,),
    "DELAY": (MessageType.DELAY,),
    "TRANSACTION": (MessageType.TRANSACTION,),
}
"""What a route's queues accept, by the topic's ``message.type`` (``RouteActivity``'s
``parseTopicMessageType``; UNSPECIFIED accepts MESSAGE_TYPE_UNSPECIFIED only)."""


_SEND_CODES = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
}
"""Broker response codes of a send as gRPC codes; anything else is INTERNAL_SERVER_ERROR."""
_OK_CODE = int(Code.OK)
_OK = ok()
"""``Status(OK)``, built once: a send or an ack copies it into each entry."""
_NOT_IN_FLIGHT = status(
    Code.INVALID_RECEIPT_HANDLE,
    "the message is no longer in flight (acknowledged, or its invisible time ran out)",
)
"""An ack entry's status when its message was not in flight."""


@dataclass(frozen=True, slots=True)
class _Receive:
    """A validated receive: what each of its POP attempts takes."""

    group: str
    topic: str
    batch: int
    invisible_ms: int
    subscription: str | Subscription
    fifo: bool
    wait_ms: int


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """The knobs of the handlers (defaults are the proxy's where it has one)."""

    host: str = "127.0.0.1"
    """With ``port``, the address routes give clients; a
    :class:`~mqstore.grpc.server.GrpcEndpoint` sets them to its advertised host and bound port."""
    port: int = 8081
    long_polling_ms: int = 20_000
    """Longest long poll of a receive (``grpcClientConsumerMaxLongPollingTimeoutMillis``)."""
    min_long_polling_ms: int = 5_000
    """Shortest long poll (``grpcClientConsumerMinLongPollingTimeoutMillis``): a receive
    asking less waits this long; a deadline too close for it is ILLEGAL_POLLING_TIME."""
    receive_batch_size: int = 32
    default_invisible_ms: int = 60_000
    """Invisible time of an ``auto_renew`` receive (a push consumer's;
    ``defaultInvisibleTimeMills``): the asked duration is not read."""
    min_invisible_ms: int = 10_000
    """Shortest invisible duration a receive may ask (``minInvisibleTimeMillsForRecv``);
    shorter is ILLEGAL_INVISIBLE_TIME."""
    fifo_groups: frozenset[str] = frozenset()
    """Groups that consume in order (RocketMQ ``consumeMessageOrderly``)."""
    max_long_polls: int = 1024
    """Receives that may wait for messages at once. A waiting receive is a suspended
    coroutine held by the broker's POP long polling (no thread), so the bound is on
    memory and on the calls the server admits (``ServerLimits.max_calls_total``); it is
    also the broker's per-(topic, group) hold limit (``popPollingSize``). A receive past
    the bound does not wait: it answers what is there now, or TOO_MANY_REQUESTS (the
    client retries after its backoff)."""


def _guarded(response: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Turn a refusal or a failure of a unary handler into a ``response`` (the name of
    the response message) with the status saying why."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def handler(self: MessagingService, request: Any, context: Any) -> Any:
            try:
                if request is MALFORMED_REQUEST:
                    raise _refuse(Code.BAD_REQUEST, MALFORMED)
                return fn(self, request, context)
            except Exception as e:
                out = getattr(svc, response)()
                out.status.CopyFrom(_status_of(e, fn.__name__))
                return out

        handler.__name__ = fn.__name__
        handler.__doc__ = fn.__doc__
        return handler

    return wrap


def _unsupported(what: str) -> Any:
    return status(Code.NOT_IMPLEMENTED, f"{what} is not supported by mqstore")


def _not_implemented(rpc: str, why: str) -> Callable[[Any, Any, Any], Any]:
    """A unary handler that answers ``rpc`` with NOT_IMPLEMENTED (``why`` is its doc)."""
    response = getattr(svc, f"{rpc}Response")

    def handler(self: Any, request: Any, context: Any) -> Any:
        return response(status=_unsupported(rpc))

    handler.__name__ = handler.__qualname__ = rpc
    handler.__doc__ = f"NOT_IMPLEMENTED: {why}."
    return handler


def _status_of(e: Exception, where: str) -> Any:
    if isinstance(e, convert.RequestRefusedError):
        return status(e.code, e.message)
    if isinstance(e, InvalidReceiptHandleError):
        return status(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is malformed: {e}")
    log.exception("gRPC %s failed", where)
    return status(Code.INTERNAL_ERROR, f"{type(e).__name__}: {e}")


def _client_id(context: Any) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "x-mq-client-id":
            return str(value)
    return ""


def _refuse(code: int, message: str) -> convert.RequestRefusedError:
    return convert.RequestRefusedError(code, message)


def _millis(d: Any) -> int:
    return int(d.seconds) * 1000 + int(d.nanos) // 1_000_000


def _check_invisible(ms: int, least: int) -> None:
    """ILLEGAL_INVISIBLE_TIME outside ``[least, MAX_INVISIBLE_MS]`` (the proxy's
    ``GrpcValidator.validateInvisibleTime``)."""
    if ms < least:
        raise _refuse(Code.ILLEGAL_INVISIBLE_TIME, f"invisible duration {ms} ms: min is {least}")
    if ms > MAX_INVISIBLE_MS:
        raise _refuse(
            Code.ILLEGAL_INVISIBLE_TIME, f"invisible duration {ms} ms: max is {MAX_INVISIBLE_MS}"
        )


def _group(resource: Any) -> str:
    name = str(resource.name)
    if not name or len(name) > 120 or not convert_pattern_ok(name):
        raise _refuse(Code.ILLEGAL_CONSUMER_GROUP, f"illegal consumer group {name!r}")
    return name


def convert_pattern_ok(name: str) -> bool:
    """True when ``name`` is a legal topic or group name (RocketMQ's character rule)."""
    try:
        validate_topic(name)
    except IllegalTopicError:
        return False
    return True


def _wake(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
    """Resume a receive suspended on ``fut`` (from the POP long polling's thread); a
    receive whose call ended meanwhile, or a loop that closed, is left alone."""

    def done() -> None:
        if not fut.done():
            fut.set_result(None)

    with contextlib.suppress(RuntimeError):  # the loop is closed
        loop.call_soon_threadsafe(done)


class MessagingService:
    """The handlers of ``apache.rocketmq.v2.MessagingService`` over ``core``.

    Registered on a gRPC server by :class:`mqstore.grpc.server.GrpcEndpoint`; the
    method names are the RPC names. Unary handlers are plain functions (the endpoint
    runs them on its loop or its pool, ``calls``); ReceiveMessage, PullMessage and
    Telemetry are async generators on the endpoint's event loop.
    """

    def __init__(self, core: BrokerCore, config: ServiceConfig, calls: Calls | None = None):
        self.core = core
        self.config = config
        self.calls = calls or Calls(None, puts_block=False)
        self.clients = ClientTable()
        self._delay_levels = DelayLevels.parse(core.store.cfg.message_delay_level)
        self._closed = False
        self._waiting: set[asyncio.Future[None]] = set()
        """The futures the receives waiting now are suspended on (loop thread only)."""
        self.polls_refused = 0
        """Receives answered without waiting because ``max_long_polls`` were waiting."""
        self._producers: dict[str, tuple[tuple[str, ...], TelemetryChannel, str]] = {}
        """Publishing clients: client id -> (topics, its Telemetry stream, its address)."""

    @property
    def long_polls(self) -> int:
        """Receives waiting for messages now."""
        return len(self._waiting)

    def close(self) -> None:
        """Answer long polls now; later requests are refused. Loop thread only."""
        self._closed = True
        for fut in self._waiting:
            if not fut.done():
                fut.set_result(None)

    @property
    def pop(self) -> PopService:
        """The broker's POP service (shared with the remoting POP codes)."""
        return broker_pop(self.core).service

    # ------------------------------------------------------------ routes

    def _topic(self, resource: Any, *, create: bool) -> TopicConfig:
        name = str(resource.name)
        try:
            validate_topic(name)
        except IllegalTopicError as e:
            raise _refuse(Code.ILLEGAL_TOPIC, str(e)) from None
        tc = self.core.topic_config(name)
        if tc is None and create and self.core.config.auto_create_topic_enable:
            tc = self.core.topics.create_in_send(
                name, AUTO_CREATE_TOPIC_KEY, self.core.config.default_topic_queue_nums
            )
        if tc is None:
            raise _refuse(Code.TOPIC_NOT_FOUND, f"topic {name!r} does not exist")
        return tc

    def _broker(self) -> Any:
        b = pb.Broker(name=self.core.config.broker_name, id=0)
        b.endpoints.scheme = pb.AddressScheme.IPv4
        b.endpoints.addresses.add(host=self.config.host, port=self.config.port)
        return b

    def _queue(self, topic: Any, queue_id: int, perm: int, tc: TopicConfig) -> Any:
        q = pb.MessageQueue(id=queue_id, permission=perm)
        q.topic.CopyFrom(topic)
        q.broker.CopyFrom(self._broker())
        unspecified = (MessageType.MESSAGE_TYPE_UNSPECIFIED,)
        q.accept_message_types.extend(ACCEPTED_TYPES.get(tc.message_type, unspecified))
        return q

    @staticmethod
    def _permission(tc: TopicConfig) -> int:
        if tc.readable and tc.writeable:
            return int(Permission.READ_WRITE)
        if tc.readable:
            return int(Permission.READ)
        return int(Permission.WRITE if tc.writeable else Permission.NONE)

    @_guarded("QueryRouteResponse")
    def QueryRoute(self, request: Any, context: Any) -> Any:
        """The topic's queues, all on this endpoint (a missing topic is auto-created
        when the broker allows it, as a remoting send would)."""
        tc = self._topic(request.topic, create=True)
        perm = self._permission(tc)
        out = svc.QueryRouteResponse(status=ok())
        n = max(tc.read_queue_nums, tc.write_queue_nums)
        for qid in range(n):
            out.message_queues.append(self._queue(request.topic, qid, perm, tc))
        return out

    @_guarded("QueryAssignmentResponse")
    def QueryAssignment(self, request: Any, context: Any) -> Any:
        """Every consumer of a group consumes every queue (POP balances per message):
        one assignment of queue -1, or one per queue for a FIFO group
        (``RouteActivity.queryAssignment``)."""
        group = _group(request.group)
        tc = self._topic(request.topic, create=False)
        self.clients.seen(group, _client_id(context))
        if not tc.readable or tc.read_queue_nums <= 0:
            return svc.QueryAssignmentResponse(status=status(Code.FORBIDDEN, "no readable queue"))
        perm = self._permission(tc)
        ids = range(tc.read_queue_nums) if group in self.config.fifo_groups else [-1]
        out = svc.QueryAssignmentResponse(status=ok())
        for qid in ids:
            out.assignments.add().message_queue.CopyFrom(self._queue(request.topic, qid, perm, tc))
        return out

    # ------------------------------------------------------------ clients

    @_guarded("HeartbeatResponse")
    def Heartbeat(self, request: Any, context: Any) -> Any:
        """Keep a consumer's client id in its group."""
        if request.HasField("group") and request.group.name:
            self.clients.seen(request.group.name, _client_id(context))
        self._producer_seen(_client_id(context))
        return svc.HeartbeatResponse(status=ok())

    @_guarded("NotifyClientTerminationResponse")
    def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        """Drop the client from its group."""
        if request.HasField("group"):
            self.clients.gone(request.group.name, _client_id(context))
        return svc.NotifyClientTerminationResponse(status=ok())

    def _group_policy(self, group: str) -> settings.GroupPolicy:
        g = self.core.groups.find(group)
        retries = g.retry_max_times if g is not None else 16
        return settings.GroupPolicy(group in self.config.fifo_groups, retries + 1)

    async def Telemetry(
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        """The settings exchange: each Settings command is answered with the settings
        the client is to use (``mqstore.grpc.settings``); other commands (thread stack
        traces, verify results) are taken and ignored. A producer's stream also carries
        the broker's check-back of its topics' transactions
        (``mqstore.grpc.transactions``)."""
        cid = _client_id(context)
        outbox = LoopOutbox(asyncio.get_running_loop())
        channel = TelemetryChannel(outbox)
        try:
            async for item in merged(request_iterator, outbox):
                if self._closed:
                    return
                if not isinstance(item, Incoming):  # a check-back for this producer
                    yield item
                    continue
                cmd = item.command
                if cmd is MALFORMED_REQUEST:
                    yield svc.TelemetryCommand(status=status(Code.BAD_REQUEST, MALFORMED))
                    continue
                if not cmd.HasField("settings"):
                    continue
                client = cmd.settings
                if client.HasField("subscription"):
                    self.clients.seen(client.subscription.group.name, cid)
                if client.HasField("publishing"):
                    topics = tuple(t.name for t in client.publishing.topics)
                    self._producers[cid] = (topics, channel, str(context.peer()))
                    self._producer_seen(cid)
                answer = settings.answer(
                    client, max_body_size=self.core.store.cfg.max_message_size,
                    long_polling_ms=self.config.long_polling_ms,
                    receive_batch_size=self.config.receive_batch_size,
                    backoff_ms=self._delay_levels.millis,
                    group_policy=self._group_policy,
                )  # fmt: skip
                yield svc.TelemetryCommand(status=ok(), settings=answer)
        except Exception as e:  # a broken stream ends; the client opens another
            log.info("telemetry stream of %s ended: %s", cid, e)
        finally:
            if self._producers.get(cid, (None, None))[1] is channel:
                del self._producers[cid]
            self.core.connections.channel_closed(channel)

    def _producer_seen(self, cid: str) -> None:
        """Announce (or refresh) a publishing client as a producer of its topics."""
        known = self._producers.get(cid)
        if known is not None:
            topics, channel, peer = known
            self.core.connections.heartbeat(cid, topics, channel, peer, "GRPC", 0)

    # ------------------------------------------------------------ send

    @staticmethod
    def _send_queue(tc: TopicConfig, sp: Any) -> int:
        """The queue a message goes to: its message group's (``crc32 % queues``, one
        group one queue, hence in order), else a random writable one (as the broker
        picks for a send naming none)."""
        queues = max(1, tc.write_queue_nums)
        if sp.HasField("message_group"):
            return zlib.crc32(sp.message_group.encode()) % queues
        return random.randrange(queues)

    def _send_one(self, msg: Any, now_ms: int, entry: Any) -> None:
        """Store ``msg`` and fill its ``SendResultEntry`` in."""
        try:
            tc = self._topic(msg.topic, create=True)
            queue_id = self._send_queue(tc, msg.system_properties)
            out = convert.to_store(msg, now_ms, self.core.store.cfg.max_message_size, queue_id)
            convert.check_topic_type(tc.message_type, out)
            res = self.core.sender.send(tc.topic_name, queue_id, [out.message])
        except convert.RequestRefusedError as e:
            entry.status.CopyFrom(status(e.code, e.message))
            return
        code = _SEND_CODES.get(res.code, Code.INTERNAL_SERVER_ERROR)
        if code == _OK_CODE and not res.remark:
            entry.status.CopyFrom(_OK)
        else:
            entry.status.CopyFrom(status(code, res.remark or ""))
        entry.message_id = out.message_id
        if out.transactional:
            entry.transaction_id = out.message_id  # mqstore.grpc.transactions
        if res.results:
            entry.offset = res.results[0].queue_offset

    @_guarded("SendMessageResponse")
    def SendMessage(self, request: Any, context: Any) -> Any:
        """Store each message (``mqstore.grpc.convert`` for the rules); one entry per
        message; the response status is the entries' when they agree, else
        MULTIPLE_RESULTS."""
        if not request.messages:
            raise _refuse(Code.BAD_REQUEST, "no message to send")
        now = int(time.time() * 1000)
        out = svc.SendMessageResponse()
        for msg in request.messages:
            self._send_one(msg, now, out.entries.add())
        codes = {e.status.code for e in out.entries}
        if len(codes) == 1:
            out.status.CopyFrom(out.entries[0].status)
        else:
            out.status.CopyFrom(status(Code.MULTIPLE_RESULTS, "entries differ"))
        return out

    @_guarded("EndTransactionResponse")
    def EndTransaction(self, request: Any, context: Any) -> Any:
        """Commit or roll back a half message (``mqstore.grpc.transactions``)."""
        return end_transaction(self.core, request)

    # ------------------------------------------------------------ receive

    def _invisible_ms(self, request: Any) -> int:
        """The invisible time of a receive, as ``ReceiveMessageActivity`` takes it: the
        default for ``auto_renew``, else the asked one (none asked is 0) within
        [``min_invisible_ms``, :data:`MAX_INVISIBLE_MS`]."""
        if request.auto_renew:
            return self.config.default_invisible_ms
        ms = _millis(request.invisible_duration)
        _check_invisible(ms, self.config.min_invisible_ms)
        return ms

    def _poll_ms(self, request: Any, context: Any) -> int:
        """The long poll of a receive, as ``ReceiveMessageActivity`` bounds it: the asked
        timeout (none: the configured one) raised to ``min_long_polling_ms``, cut to
        ``long_polling_ms`` and to the client's deadline (less :data:`POLL_BUFFER_S`);
        a deadline nearer than the (raised) poll and than the minimum is
        ILLEGAL_POLLING_TIME."""
        cfg = self.config
        ms = (
            _millis(request.long_polling_timeout)
            if request.HasField("long_polling_timeout")
            else cfg.long_polling_ms
        )
        floor = min(cfg.min_long_polling_ms, cfg.long_polling_ms)
        ms = min(max(ms, floor), cfg.long_polling_ms)
        left = context.time_remaining()
        if left is not None:
            left_ms = int(left * 1000)
            if left_ms < ms and left_ms < floor:
                raise _refuse(
                    Code.ILLEGAL_POLLING_TIME,
                    f"the deadline leaves {max(0, left_ms)} ms, less than the shortest "
                    f"long poll ({floor} ms): give the call more time",
                )
            ms = max(0, min(ms, left_ms - int(POLL_BUFFER_S * 1000)))
        return ms

    @staticmethod
    def _filter(request: Any) -> str | Subscription:
        """The receive's subscription: tags, or a compiled SQL92 expression. A SQL
        expression that is empty (the proxy's ``FilterAPI.build`` refuses it) or does not
        compile (the broker's POP answers SUBSCRIPTION_PARSE_FAILED) is
        ILLEGAL_FILTER_EXPRESSION."""
        if not request.HasField("filter_expression"):
            return "*"
        f = request.filter_expression
        if f.type == pb.FilterType.SQL:
            if not f.expression:
                raise _refuse(Code.ILLEGAL_FILTER_EXPRESSION, "Expression can't be null! SQL92")
            try:
                return parse_subscription(str(f.expression), SQL92)
            except SqlParseError as e:
                raise _refuse(
                    Code.ILLEGAL_FILTER_EXPRESSION, f"Invalid MessageSelector. {e}"
                ) from None
        return str(f.expression) or "*"

    def _receive_of(self, request: Any, context: Any) -> _Receive:
        """The validated receive of ``request`` (a refusal raises)."""
        if request is MALFORMED_REQUEST:
            raise _refuse(Code.BAD_REQUEST, MALFORMED)
        group = _group(request.group)
        tc = self._topic(request.message_queue.topic, create=False)
        if request.batch_size <= 0:
            raise _refuse(Code.BAD_REQUEST, f"batch_size {request.batch_size} must be > 0")
        invisible = self._invisible_ms(request)
        sub = self._filter(request)
        self.clients.seen(group, _client_id(context))
        wait_ms = 0 if self._closed else self._poll_ms(request, context)
        # more than MAX_BATCH is cut to it, as the proxy's ConsumerProcessor does
        return _Receive(group, tc.topic_name, min(request.batch_size, MAX_BATCH), invisible,
                        sub, group in self.config.fifo_groups, wait_ms)  # fmt: skip

    def _pop_once(self, r: _Receive) -> PopResult:
        return self.pop.pop(r.group, r.topic, r.batch, r.invisible_ms, queue_id=-1,
                            subscription=r.subscription, fifo=r.fifo)  # fmt: skip

    async def _receive(self, r: _Receive) -> PopResult:
        """Pop now and, while nothing is found, again after each arrival on the topic or
        the group's retry topic (or every FIFO recheck) until the receive's wait is
        over: the waiting receive is held by the broker's POP long polling
        (``mqstore.broker.pop_polling``), suspended, holding no thread. Past
        ``max_long_polls`` waiting (or the broker's hold limits), TOO_MANY_REQUESTS
        when nothing was found."""
        polling = self.core.pop.polling
        loop = asyncio.get_running_loop()
        topics = (r.topic, pop_retry_topic(r.topic, r.group))
        deadline = time.monotonic() + r.wait_ms / 1000
        while True:
            marks = polling.marks(topics)
            found = await self.calls.run("ReceiveMessage", self._pop_once, r)
            now = time.monotonic()
            if found.messages or now >= deadline or self._closed:
                return found
            if len(self._waiting) >= self.config.max_long_polls:
                held = Held.FULL
            else:
                wake_at = min(deadline, now + FIFO_RECHECK_S) if r.fifo else deadline
                woken: asyncio.Future[None] = loop.create_future()
                resume = functools.partial(_wake, loop, woken)
                held = polling.hold((r.topic, r.group, -1), topics, marks, wake_at, resume)
            if held is Held.FULL:
                self.polls_refused += 1
                raise _refuse(
                    Code.TOO_MANY_REQUESTS,
                    f"{self.config.max_long_polls} receives are already long polling; retry later",
                )
            if held is Held.STOPPED:
                return found
            self._waiting.add(woken)
            try:
                await woken
            finally:
                self._waiting.discard(woken)
                if not woken.done() or woken.cancelled():  # the call ended: free its hold
                    polling.drop(topics, resume)

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """Pop up to ``batch_size`` messages from every queue of the topic (the request's
        queue names a broker, as the proxy's ``ReceiveMessageQueueSelector`` reads it),
        long polling up to the asked timeout but less than the client's deadline, and
        stream them: a status, the delivery time, then the messages; no message:
        MESSAGE_NOT_FOUND."""
        try:
            receive = self._receive_of(request, context)
            r = await self._receive(receive)
            invisible = r.invisible_time or receive.invisible_ms
            msgs = [convert.to_proto(m, invisible) for m in r.messages]
        except Exception as e:
            yield svc.ReceiveMessageResponse(status=_status_of(e, "ReceiveMessage"))
            return
        if not msgs:
            yield svc.ReceiveMessageResponse(
                status=status(Code.MESSAGE_NOT_FOUND, "no new message")
            )
            return
        yield svc.ReceiveMessageResponse(status=ok())
        now = svc.ReceiveMessageResponse()
        now.delivery_timestamp.FromMilliseconds(int(time.time() * 1000))
        yield now
        for m in msgs:
            yield svc.ReceiveMessageResponse(message=m)

    # ------------------------------------------------------------ settle

    @_guarded("AckMessageResponse")
    def AckMessage(self, request: Any, context: Any) -> Any:
        """Acknowledge each entry (one batch ack). An entry whose message is no longer
        in flight: INVALID_RECEIPT_HANDLE, as the proxy answers an expired handle."""
        group = _group(request.group)
        topic = str(request.topic.name)
        if not request.entries:
            raise _refuse(Code.BAD_REQUEST, "no entry to acknowledge")
        if any(e.HasField("lite_topic") for e in request.entries):
            raise _refuse(Code.NOT_IMPLEMENTED, "lite topics are not supported by mqstore")
        handles = [e.receipt_handle for e in request.entries]
        results = self.pop.batch_ack(group, topic, handles)
        out = svc.AckMessageResponse()
        for e, r in zip(request.entries, results, strict=True):
            entry = out.entries.add(message_id=e.message_id, receipt_handle=e.receipt_handle)
            entry.status.CopyFrom(_OK if r is AckStatus.OK else _NOT_IN_FLIGHT)
        if all(r is results[0] for r in results):
            out.status.CopyFrom(out.entries[0].status)
        else:
            out.status.CopyFrom(status(Code.MULTIPLE_RESULTS, "entries differ"))
        return out

    @_guarded("ChangeInvisibleDurationResponse")
    def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        """Hide the message for the new duration from now; the response carries the
        handle to use from then on."""
        group = _group(request.group)
        if request.HasField("lite_topic"):
            raise _refuse(Code.NOT_IMPLEMENTED, "lite topics are not supported by mqstore")
        ms = _millis(request.invisible_duration)
        _check_invisible(ms, 0)
        r = self.pop.change_invisible_time(group, request.topic.name, request.receipt_handle, ms)
        if r.status is not AckStatus.OK:
            raise _refuse(
                Code.INVALID_RECEIPT_HANDLE,
                "the message is no longer in flight (acknowledged, or its invisible time ran out)",
            )
        return svc.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=r.receipt_handle)

    @_guarded("ForwardMessageToDeadLetterQueueResponse")
    def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        """Put the held message into ``%DLQ%<group>`` now and settle it."""
        group = _group(request.group)
        r = self.pop.forward_to_dlq(group, request.topic.name, request.receipt_handle)
        if r is not AckStatus.OK:
            raise _refuse(Code.INVALID_RECEIPT_HANDLE, "the message is no longer in flight")
        return svc.ForwardMessageToDeadLetterQueueResponse(status=ok())

    # ------------------------------------------------------------ not implemented

    RecallMessage = _not_implemented("RecallMessage", "no recall of delayed messages")
    SyncLiteSubscription = _not_implemented("SyncLiteSubscription", "no lite topics")
    UpdateOffset = _not_implemented(
        "UpdateOffset", "the 5.x pull consumer is not served (remoting pull is)"
    )
    GetOffset = _not_implemented("GetOffset", "see UpdateOffset")
    QueryOffset = _not_implemented("QueryOffset", "see UpdateOffset")

    async def PullMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """NOT_IMPLEMENTED (see :meth:`UpdateOffset`)."""
        yield svc.PullMessageResponse(status=_unsupported("PullMessage"))


__all__ = ["ClientType", "MessagingService", "ServiceConfig"]
