"""Access control of the gRPC endpoint: the broker's ``plain_acl.yml`` accounts applied to
the 5.x clients' requests, as RocketMQ's proxy applies them (docs/acl.md §6).

One job: decide, from a call's metadata, its peer and its request message, whether one
request of ``apache.rocketmq.v2.MessagingService`` may run, and answer a refusal in the
protocol's own terms. The accounts, white lists, order of checks and
permission rules are :class:`mqstore.broker.acl.AccessControl`'s, so the two transports
cannot disagree on who may do what.

Rules
-----
Rule 1 (credentials). A 5.x client sends, on every call, the metadata
``x-mq-date-time`` (a timestamp text) and ``authorization``::

    MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature=HEX

where HEX is hex(HMAC-SHA1(secretKey, the x-mq-date-time value)). ``Credential`` may
carry more ``/``-separated parts after the key (upstream's ``AK/region/channel``); only
the first is the key. A client without keys sends ``Credential=`` empty: that, or no
``authorization`` at all, is "No accessKey is configured". Upstream checks no freshness
of the timestamp (the clients write local time), so neither do we: a recorded header
stays valid for its key, as it does against the proxy.

Rule 2 (resources per RPC, one row per RPC of the service, :data:`_RESOURCES`; an RPC
without a row is refused), as upstream's ``PlainAccessResource.parse(GeneratedMessageV3,
...)``; a group is checked as its retry topic ``%RETRY%group``: SendMessage PUB every
message's topic; ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue, QueryAssignment, PullMessage, UpdateOffset, GetOffset
and SyncLiteSubscription SUB group and topic (both must be named), QueryOffset SUB the
topic, RecallMessage PUB it; QueryRoute ANY
(PUB or SUB) on the topic; EndTransaction PUB the topic; Heartbeat and
NotifyClientTermination SUB the group they name (a consumer's heartbeat must name one);
a Telemetry settings command PUB every publishing topic, SUB the subscription's group and
topics, and is refused with neither. Other RPCs (and other telemetry commands) need only
the signature. Resources are named by ``name`` alone: the endpoint ignores
``resource_namespace``, so the check does too (a namespace must not make the check see
another resource than the handler touches).

Rule 3 (answers). A missing or unknown key, a wrong signature or a malformed header is
``Code.UNAUTHORIZED``; a permission failure ``Code.FORBIDDEN``; the status message is
the reason, worded as the remoting broker's remark. A unary call gets its response
message with that status; ReceiveMessage and PullMessage one response with it; a
Telemetry stream gets one command with it and ends. The handler never runs for a
refused request.

Pure apart from the handler wrapping; thread-safe (no state of its own); the streaming
wrappers run on the endpoint's event loop.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from mqstore.broker.acl import (
    AccessControl,
    AclDenied,
    Perm,
    Refusal,
    consumed,
    is_copy_topic,
    retry_topic,
)
from mqstore.grpc.protocol import ClientType, Code, status, svc

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
ALGORITHM = "MQv2-HMAC-SHA1"

_CONSUMER_TYPES = frozenset({ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER,
                             ClientType.PULL_CONSUMER, ClientType.LITE_PUSH_CONSUMER,
                             ClientType.LITE_SIMPLE_CONSUMER})  # fmt: skip
_CODES = {Refusal.UNAUTHENTICATED: Code.UNAUTHORIZED, Refusal.FORBIDDEN: Code.FORBIDDEN}


def _unauthenticated(message: str) -> AclDenied:
    return AclDenied(message, Refusal.UNAUTHENTICATED)


def parse_authorization(header: str) -> tuple[str, bytes]:
    """The access key and the signature bytes of an ``authorization`` value (Rule 1).

    >>> parse_authorization("MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, "
    ...                     "Signature=0aff")
    ('ak', b'\\n\\xff')

    Raises:
        AclDenied: (UNAUTHENTICATED) the value is not of that form.
    """
    method, sep, rest = header.strip().partition(" ")
    if not sep or method != ALGORITHM:
        raise _unauthenticated(f"authorization header is incorrect: expected {ALGORITHM} ...")
    items: dict[str, str] = {}
    for part in rest.split(","):
        key, eq, value = part.strip().partition("=")
        if not eq:
            raise _unauthenticated(f"authorization header is incorrect: {part.strip()!r}")
        items[key] = value.strip()
    if "Credential" not in items:
        raise _unauthenticated("authorization header is incorrect: no Credential")
    access_key = items["Credential"].split("/", 1)[0]
    try:
        signature = bytes.fromhex(items.get("Signature", ""))
    except ValueError:
        raise _unauthenticated("authorization header is incorrect: Signature is not hex") from None
    return access_key, signature


def sign(secret_key: str, date_time: str) -> str:
    """The ``Signature`` a 5.x client sends: hex(HMAC-SHA1(secret_key, date_time)).

    >>> sign("12345678", "20260101T000000Z")
    '744d438196af86606d44b8c9a7c8e0e0b2ffb22b'
    """
    mac = hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1)
    return mac.hexdigest()


def peer_host(peer: str) -> str:
    """The address part of gRPC's ``context.peer()`` (``ipv4:1.2.3.4:5``,
    ``ipv6:[::1]:5``); empty for other transports, which then match no white list.

    >>> peer_host("ipv4:127.0.0.1:5555"), peer_host("ipv6:[::1]:5555"), peer_host("unix:/x")
    ('127.0.0.1', '::1', '')
    """
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return ""


def _group(need: dict[str, Perm], resource: Any) -> None:
    if resource.name:
        need[retry_topic(str(resource.name))] = Perm.SUB


def _topic(need: dict[str, Perm], resource: Any, perm: Perm) -> None:
    if resource.name:
        need[str(resource.name)] = perm


def _named(resource: Any, what: str) -> str:
    if not resource.name:
        raise AclDenied(f"the field <{what}> naming the resource is missing")
    return str(resource.name)


def _settings(need: dict[str, Perm], command: Any) -> None:
    if not command.HasField("settings"):
        return
    s = command.settings
    if not s.HasField("publishing") and not s.HasField("subscription"):
        raise AclDenied("settings command doesn't have publishing or subscription")
    for topic in s.publishing.topics:
        _topic(need, topic, Perm.PUB)
    if s.HasField("subscription"):
        _group(need, s.subscription.group)
        for entry in s.subscription.subscriptions:
            _topic(need, entry.topic, Perm.SUB)


def _heartbeat(need: dict[str, Perm], request: Any) -> None:
    if request.client_type in _CONSUMER_TYPES and not request.group.name:
        raise AclDenied("Consumer heartbeat doesn't have group")
    _group(need, request.group)


def _group_and_topic(need: dict[str, Perm], request: Any) -> None:
    """A request with a receipt handle or an assignment: the topic may be the group's
    POP retry topic (``mqstore.broker.acl.consumed``)."""
    group, topic = _named(request.group, "group"), _named(request.topic, "topic")
    need.update(consumed(topic, group, own_pop_retry=True))


def _group_and_queue(need: dict[str, Perm], request: Any) -> None:
    """A read of a queue: a retry topic must be the group's own."""
    group = _named(request.group, "group")
    need.update(consumed(_named(request.message_queue.topic, "topic"), group))


def _read_of_queue(need: dict[str, Perm], request: Any) -> None:
    """A read of records (ReceiveMessage, PullMessage): as :func:`_group_and_queue`,
    and never of a retry or dead-letter topic. Those hold copies of every topic their
    group consumes, and the answer here carries no per-copy check (remoting's pull and
    POP leave out each copy of a topic the account may not read)."""
    _group_and_queue(need, request)  # another group's retry topic: upstream's refusal
    topic = _named(request.message_queue.topic, "topic")
    if is_copy_topic(topic):
        raise AclDenied(
            f"topic {topic!r} holds copies of other topics: read it over remoting",
            Refusal.FORBIDDEN,
        )


def _send(need: dict[str, Perm], request: Any) -> None:
    for message in request.messages:
        need[_named(message.topic, "topic")] = Perm.PUB


def _nothing(need: dict[str, Perm], request: Any) -> None:
    """The signature only."""


_RESOURCES: dict[str, Callable[[dict[str, Perm], Any], None]] = {
    "SendMessage": _send,
    "ReceiveMessage": _read_of_queue,
    "AckMessage": _group_and_topic,
    "ChangeInvisibleDuration": _group_and_topic,
    "ForwardMessageToDeadLetterQueue": _group_and_topic,
    "QueryAssignment": _group_and_topic,
    "PullMessage": _read_of_queue,
    "UpdateOffset": _group_and_queue,
    "GetOffset": _group_and_queue,
    "QueryOffset": lambda need, r: need.update({_named(r.message_queue.topic, "topic"): Perm.SUB}),
    "SyncLiteSubscription": _group_and_topic,
    "QueryRoute": lambda need, r: _topic(need, r.topic, Perm.ANY),
    "EndTransaction": lambda need, r: _topic(need, r.topic, Perm.PUB),
    "RecallMessage": lambda need, r: need.update({_named(r.topic, "topic"): Perm.PUB}),
    "Heartbeat": _heartbeat,
    "NotifyClientTermination": lambda need, r: _group(need, r.group),
    "Telemetry": _settings,
}
"""The gRPC permission table: one row per RPC of ``MessagingService`` (a test walks the
service descriptor). An RPC without a row is refused."""


def resources_of(method: str, request: Any) -> dict[str, Perm]:
    """The resources request ``request`` of RPC ``method`` touches, each with the
    permission it needs (Rule 2). ``method`` "" is a request the endpoint could not
    parse: it names nothing.

    Raises:
        AclDenied: (FORBIDDEN) an RPC without a row, a missing resource name, a consumer
            heartbeat without a group, or a settings command with neither publishing nor
            subscription.
    """
    need: dict[str, Perm] = {}
    if not method:
        return need
    rule = _RESOURCES.get(method)
    if rule is None:
        raise AclDenied(f"the RPC {method} has no access rule")
    rule(need, request)
    return need


class GrpcAccess:
    """:class:`AccessControl` applied to gRPC calls (Rules 1-3)."""

    def __init__(self, acl: AccessControl) -> None:
        self.acl = acl

    def check(self, method: str, request: Any, metadata: Iterable[tuple[str, Any]],
              peer: str) -> None:  # fmt: skip
        """Whether ``request`` of RPC ``method``, from ``peer`` (``context.peer()``) with
        call ``metadata``, may run.

        Raises:
            AclDenied: refused; ``refusal`` says which status code to answer.
        """
        headers: Mapping[str, Any] = dict(metadata or ())
        header = headers.get(AUTHORIZATION)
        access_key: str | None = None
        signature = b""
        if header:
            access_key, signature = parse_authorization(str(header))
        date_time = str(headers.get(DATE_TIME, ""))

        def signed_by(secret_key: str) -> bool:
            if not date_time:
                raise _unauthenticated(f"the {DATE_TIME} header is missing")
            expected = hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"),
                                hashlib.sha1).digest()  # fmt: skip
            return hmac.compare_digest(expected, signature)

        account = self.acl.authenticate(access_key or None, peer_host(peer), signed_by)
        if account is not None:
            self.acl.authorize(account, resources_of(method, request))


def refusal_status(e: AclDenied) -> Any:
    """The ``Status`` that answers a refusal (Rule 3)."""
    return status(_CODES[e.refusal], str(e))


def guard(access: GrpcAccess, method: Any, behaviour: Callable[..., Any]) -> Callable[..., Any]:
    """``behaviour`` (a handler of ``method``, a MethodDescriptor) that first checks each
    request with ``access`` and answers a refusal instead of running (Rule 3). A request
    the endpoint could not parse names no resource: it is only authenticated, then the
    handler answers BAD_REQUEST to it. A unary ``behaviour`` is a plain function, a
    streaming one an async generator (``mqstore.grpc.calls``); ``context`` needs only
    ``invocation_metadata()`` and ``peer()``."""
    name = str(method.name)
    response = getattr(svc, method.output_type.name)

    def refused(request: Any, context: Any) -> Any | None:
        parsed = hasattr(request, "DESCRIPTOR")  # else the endpoint's MALFORMED_REQUEST
        try:
            access.check(name if parsed else "", request, context.invocation_metadata(),
                         context.peer())  # fmt: skip
        except AclDenied as e:
            return response(status=refusal_status(e))
        return None

    if method.client_streaming:

        async def streams(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            async def checked() -> AsyncIterator[Any]:
                async for request in requests:
                    answer = refused(request, context)
                    if answer is not None:
                        denied.append(answer)
                        return
                    yield request

            denied: list[Any] = []
            async for out in behaviour(checked(), context):
                yield out
            for out in denied[:1]:
                yield out

        return streams

    if method.server_streaming:

        async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
            answer = refused(request, context)
            if answer is not None:
                yield answer
                return
            async for out in behaviour(request, context):
                yield out

        return stream

    def unary(request: Any, context: Any) -> Any:
        answer = refused(request, context)
        return answer if answer is not None else behaviour(request, context)

    return unary
