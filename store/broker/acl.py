"""RocketMQ 4.x plain ACL on the broker: ``plain_acl.yml`` accounts and request checks.

One job: decide whether one remoting request may run, as RocketMQ 4.x's
``PlainAccessValidator`` / ``PlainPermissionManager`` decide (docs/acl.md has the facts
and the upstream paths). The broker server calls :meth:`AccessControl.check` before any
processor; a refusal becomes a NO_PERMISSION (16) response whose remark is the reason.

Rules
-----
Rule 1 (signature). A request carries ``AccessKey``, ``Signature`` and optionally
``SecurityToken`` in its extFields. The signature is base64(HMAC-SHA1(secretKey,
content)) where content is the UTF-8 concatenation of every extFields *value* except
``Signature``'s (and ``_UNIQUE_KEY_QUERY``'s), in ascending key order, followed by the
body bytes (:func:`sign`).

Rule 2 (order of checks), as upstream: (a) a peer matching a
``globalWhiteRemoteAddresses`` entry passes unchecked; (b) a missing AccessKey is
refused ("No accessKey is configured"), an unknown one too ("No acl config for ...");
(c) a peer matching the account's ``whiteRemoteAddress`` passes without signature or
permission checks; (d) a wrong signature is refused; (e) admin-only codes need
``admin: true``; (f) every resource the request touches needs a permission (Rule 3).
A failed permission says "No default permission for ..." whether or not the resource
was listed: that is upstream's remark.

Rule 3 (permissions). Permissions are DENY=1, ANY=2, PUB=4, SUB=8. A group is checked
as its retry topic ``%RETRY%group``. An owned DENY refuses everything; a needed ANY is
met by PUB or SUB; otherwise the needed and owned bits must meet. A resource not listed
in ``topicPerms``/``groupPerms`` falls back to ``defaultTopicPerm``/``defaultGroupPerm``
(absent: DENY). An admin account without any listed perm passes every resource check.

Rule 4 (resources of a request, :data:`PERMISSIONS`): one table row per request code
the broker serves, naming the resources the request touches and the permission each
needs, whether the code is admin-only, and (admin codes) which header fields it may
carry. Upstream's ``PlainAccessResource.parse`` rows (docs/acl.md §3): sends PUB their
topic, or SUB the group when it is a retry topic ``%RETRY%group``; PULL_MESSAGE and
UPDATE_CONSUMER_OFFSET SUB topic and group; QUERY_MESSAGE SUBs its topic; HEART_BEAT
SUBs every announced group and subscribed topic; UNREGISTER_CLIENT (of a consumer),
GET_CONSUMER_LIST_BY_GROUP and CONSUMER_SEND_MSG_BACK SUB their group. Upstream 5.x's
rows for the POP family: POP, ACK, BATCH_ACK, PEEK, CHANGE_MESSAGE_INVISIBLETIME,
NOTIFICATION, QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE SUB topic and group. Ours
(docs/acl.md §5): QUERY_CONSUMER_OFFSET and LITE_PULL SUB topic and group,
LOCK/UNLOCK_BATCH_MQ SUB their group, a missing naming field is refused (upstream skips
a null resource), the table dumps and offset resets are admin-only, and a code with no
row is admin-only. Metadata reads of a topic or group need ANY on it (5.x's GET,
:func:`get_of`), broker-wide statistics admin. VIEW_MESSAGE_BY_ID, QUERY_MESSAGE and
CONSUMER_SEND_MSG_BACK read records the request does not name by topic and group:
their processors refuse a record the account may not read (:func:`record_need`)
(:func:`read_refusal`), so no code reads a topic the account may not read.

Rule 5 (remarks). A permission failure names the resource as upstream's ``printStr``
does: ``topic:T`` or ``group:G``. :class:`AclDenied` carries a :class:`Refusal`: a
missing or unknown key and a wrong signature are UNAUTHENTICATED, the rest FORBIDDEN
(the gRPC endpoint answers UNAUTHORIZED / FORBIDDEN by it, ``mqstore.grpc.access``).

Rule 6 (signed timestamps). The request code is not signed (RocketMQ 4.x's format), so
a recorded signed request stays valid, under any code, for as long as the account
exists. Where a request carries the client's clock (:data:`SIGNED_TIMESTAMP_FIELDS`),
a signed request whose timestamp is more than ``timestamp_window_ms`` from the
broker's clock is refused: such a recording expires.

Rule 7 (admin fields). An admin code's request may carry only its own header fields
(``Rule.fields``), the signing fields and RocketMQ 5.x's RPC header fields: a recorded
request of another shape cannot be replayed as an admin code.

Pure apart from reading the YAML file and the clock; thread-safe (immutable after load).
"""

from __future__ import annotations

import enum
import hmac
import ipaddress
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mqstore.errors import ConfigError, StoreError
from mqstore.remoting.codes import RequestCode
from mqstore.remoting.signing import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, content_of, sign

RETRY_PREFIX = "%RETRY%"
KEY_MIN_LENGTH = 6
"""Upstream's ``ACCESS_KEY_MIN_LENGTH``/``SECRET_KEY_MIN_LENGTH``: keys must be longer."""


class AclConfigError(ConfigError):
    """``plain_acl.yml`` cannot be read or is not a valid ACL file."""


class Refusal(enum.Enum):
    """Why a request is refused: the caller is not who it claims (or claims no one), or
    it is but may not do this. Remoting answers both with NO_PERMISSION; gRPC tells
    them apart (UNAUTHORIZED / FORBIDDEN)."""

    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"


class AclDenied(StoreError):
    """A request is refused; ``str(e)`` is the remark the client gets, ``refusal`` why."""

    def __init__(self, message: str, refusal: Refusal = Refusal.FORBIDDEN) -> None:
        super().__init__(message)
        self.refusal = refusal


class Perm(enum.IntFlag):
    """RocketMQ ``Permission`` bits."""

    DENY = 1
    ANY = 2
    PUB = 4
    SUB = 8


def parse_perm(text: object) -> Perm:
    """``"PUB"``, ``"SUB"``, ``"PUB|SUB"``/``"SUB|PUB"``, ``"DENY"``; anything else
    (absent included) is DENY, as upstream's ``parsePermFromString``."""
    value = str(text).strip().upper() if text is not None else ""
    return {
        "PUB": Perm.PUB,
        "SUB": Perm.SUB,
        "PUB|SUB": Perm.PUB | Perm.SUB,
        "SUB|PUB": Perm.PUB | Perm.SUB,
    }.get(value, Perm.DENY)


def perm_allows(needed: Perm, owned: Perm) -> bool:
    """Rule 3 for one resource."""
    if owned & Perm.DENY:
        return False
    if needed & Perm.ANY:
        return bool(owned & (Perm.PUB | Perm.SUB))
    return bool(needed & owned)


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


# --------------------------------------------------------------------- addresses


class AddressPattern:
    """One white-list entry (upstream ``RemoteAddressStrategyFactory``): ``*`` matches
    every peer; an IPv4 address whose segments may be ``*``, a range ``a-b``, or (last
    segment) a set ``{a,b,c}``; a CIDR block (``10.0.0.0/8``) or an exact IPv6 address.
    A blank entry matches nothing.

    Raises:
        AclConfigError: an entry of none of these forms.
    """

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self._all = self.text in ("*", "*.*.*.*")
        self._net: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
        self._segments: list[frozenset[int] | None] = []
        if self._all or not self.text:
            return
        if "/" in self.text or ":" in self.text:
            try:
                self._net = ipaddress.ip_network(self.text, strict=False)
            except ValueError as e:
                raise AclConfigError(f"bad white address {self.text!r}: {e}") from None
            return
        parts = self.text.split(".")
        if len(parts) != 4:
            raise AclConfigError(f"bad white address {self.text!r}: need four segments")
        for part in parts:
            self._segments.append(self._segment(part))

    def _segment(self, part: str) -> frozenset[int] | None:
        try:
            if part == "*":
                return None
            if part.startswith("{") and part.endswith("}"):
                values = frozenset(int(p) for p in part[1:-1].split(","))
            elif "-" in part:
                lo, hi = (int(p) for p in part.split("-", 1))
                values = frozenset(range(lo, hi + 1))
            else:
                values = frozenset({int(part)})
        except ValueError:
            raise AclConfigError(f"bad white address {self.text!r}: segment {part!r}") from None
        if not values or min(values) < 0 or max(values) > 255:
            raise AclConfigError(f"bad white address {self.text!r}: segment {part!r}")
        return values

    def matches(self, host: str) -> bool:
        if self._all:
            return True
        if self._net is not None:
            try:
                return ipaddress.ip_address(host) in self._net
            except ValueError:
                return False
        if not self._segments:
            return False
        parts = host.split(".")
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            return False
        return all(
            seg is None or int(p) in seg for seg, p in zip(self._segments, parts, strict=True)
        )


# ---------------------------------------------------------------------- accounts


@dataclass(frozen=True, slots=True)
class Account:
    """One ``accounts`` entry of ``plain_acl.yml``."""

    access_key: str
    secret_key: str
    admin: bool = False
    white_remote_address: AddressPattern | None = None
    default_topic_perm: Perm = Perm.DENY
    default_group_perm: Perm = Perm.DENY
    resource_perms: Mapping[str, Perm] = field(default_factory=dict)
    """Topic names and retry topics of groups (``%RETRY%group``) to their perm."""


def _perm_list(raw: Any, what: str, group: bool) -> dict[str, Perm]:
    out: dict[str, Perm] = {}
    for item in raw or []:
        name, sep, perm = str(item).partition("=")
        if not sep or not name.strip():
            raise AclConfigError(f"bad {what} entry {item!r}: need NAME=PERM")
        key = name.strip()
        out[retry_topic(key) if group else key] = parse_perm(perm)
    return out


def _scalar(value: object) -> object:
    """A key as text: YAML reads ``secretKey: 12345678`` (upstream's own example) as a
    number, which upstream's loader turns back into its digits; so do we."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def _account(raw: object) -> Account:
    if not isinstance(raw, dict):
        raise AclConfigError(f"an account must be a mapping, got {raw!r}")
    ak, sk = _scalar(raw.get("accessKey")), _scalar(raw.get("secretKey"))
    if not isinstance(ak, str) or not ak or not isinstance(sk, str) or not sk:
        raise AclConfigError("an account needs a non-empty accessKey and secretKey")
    if len(ak) <= KEY_MIN_LENGTH or len(sk) <= KEY_MIN_LENGTH:  # as upstream's loader
        raise AclConfigError(
            f"account {ak}: the accessKey and secretKey must be longer than {KEY_MIN_LENGTH} "
            "characters"
        )
    white = raw.get("whiteRemoteAddress")
    perms = _perm_list(raw.get("topicPerms"), "topicPerms", False)
    perms.update(_perm_list(raw.get("groupPerms"), "groupPerms", True))
    return Account(
        access_key=ak,
        secret_key=sk,
        admin=bool(raw.get("admin", False)),
        white_remote_address=AddressPattern(str(white)) if white else None,
        default_topic_perm=parse_perm(raw.get("defaultTopicPerm")),
        default_group_perm=parse_perm(raw.get("defaultGroupPerm")),
        resource_perms=perms,
    )


# --------------------------------------------------------------------- resources

Need = dict[str, Perm]
"""Resources (topics; groups as ``%RETRY%group``) a request touches, each with the
permission it needs."""
Resources = Callable[[Mapping[str, str], bytes], Need]
"""How a request's header fields and body name its resources (Rule 4)."""

ACL_FIELDS: frozenset[str] = frozenset({ACCESS_KEY, SIGNATURE, SECURITY_TOKEN, "OnsChannel"})
"""Fields a signing client adds to every request (``OnsChannel``: ali-ons)."""
RPC_HEADER_FIELDS: frozenset[str] = frozenset({"ns", "nsd", "bname", "oway", "lo", "brokerName"})
"""Fields RocketMQ 5.x's ``RpcRequestHeader`` / ``TopicRequestHeader`` add to every header."""


def _field(ext: Mapping[str, str], name: str) -> str:
    value = ext.get(name)
    if not value:
        raise AclDenied(f"the field <{name}> naming the resource is missing")
    return value


def _json(body: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(body or b"{}")
    except ValueError:
        raise AclDenied("cannot read the request body to check its resources") from None
    if not isinstance(obj, dict):
        raise AclDenied("cannot read the request body to check its resources")
    return obj


def _none(ext: Mapping[str, str], body: bytes) -> Need:
    return {}


def pub_topic(name: str) -> Resources:
    """PUB on the topic in header field ``name``, or SUB on the group when it is a retry
    topic ``%RETRY%group`` (a consumer re-sending; upstream 5.x)."""

    def need(ext: Mapping[str, str], body: bytes) -> Need:
        topic = _field(ext, name)
        return {topic: Perm.SUB if topic.startswith(RETRY_PREFIX) else Perm.PUB}

    return need


def get_of(
    *, topic: str | None = None, group: str | None = None, optional: tuple[str, ...] = ()
) -> Resources:
    """A read of a topic's or a group's metadata (offsets, statistics, connections):
    ANY (PUB or SUB) on the topic in header field ``topic`` and on the group in header
    field ``group``. RocketMQ 5.x checks its GET action on the resources the request
    header names (``@RocketMQAction(action = GET)``, ``@RocketMQResource``); plain ACL
    has no GET, and a producer (PUB) or a consumer (SUB) of a topic both read its
    offsets. A field named in ``optional`` may be absent and then names nothing (5.x
    skips a null resource); any other missing field is refused."""

    def need(ext: Mapping[str, str], body: bytes) -> Need:
        out: Need = {}
        for name, is_group in ((group, True), (topic, False)):
            if name is None:
                continue
            value = ext.get(name) if name in optional else _field(ext, name)
            if value:
                out.setdefault(retry_topic(value) if is_group else value, Perm.ANY)
        return out

    return need


def _end_transaction(ext: Mapping[str, str], body: bytes) -> Need:
    """END_TRANSACTION: PUB on the header's ``topic`` when it names one (the 4.9.8 and
    5.3.3 Java producers leave it out); the processor checks PUB on the half record's
    real topic in any case (``RequestContext.publish_refusal``)."""
    topic = ext.get("topic")
    return {topic: Perm.PUB} if topic else {}


def sub_group(name: str) -> Resources:
    """SUB on the group in header field ``name``."""
    return lambda ext, body: {retry_topic(_field(ext, name)): Perm.SUB}


def sub_topic(name: str = "topic") -> Resources:
    """SUB on the topic in header field ``name``."""
    return lambda ext, body: {_field(ext, name): Perm.SUB}


DLQ_PREFIX = "%DLQ%"


def read_topic(name: str = "topic") -> Resources:
    """A read of records of the topic in header field ``name`` by a request that names
    no group (QUERY_MESSAGE): SUB on the topic, and on the group ``g`` of a dead-letter
    topic ``%DLQ%g`` (a retry topic ``%RETRY%g`` is checked as its group already). The
    processor then checks each record it returns (:func:`record_need`)."""

    def need(ext: Mapping[str, str], body: bytes) -> Need:
        topic = _field(ext, name)
        return record_need(topic, None)

    return need


def is_copy_topic(topic: str) -> bool:
    """A retry or dead-letter topic: its records are copies of other topics' records."""
    return topic.startswith((RETRY_PREFIX, DLQ_PREFIX))


def record_need(topic: str, origin: str | None) -> Need:
    """What reading one record of ``topic`` needs, for a request that names no group
    (QUERY_MESSAGE, VIEW_MESSAGE_BY_ID, the source of CONSUMER_SEND_MSG_BACK): SUB on
    ``topic``, a retry topic being checked as its group (Rule 3).

    A retry or dead-letter topic holds copies of other topics' records; ``origin`` is
    the copy's ``RETRY_TOPIC`` property, the topic it was copied from. Such a copy also
    needs SUB on ``origin``, and on the group whose copy it is: ``g`` of a dead-letter
    topic ``%DLQ%g``, and of a POP retry topic ``%RETRY%g_<origin>`` /
    ``%RETRY%g+<origin>``, whose name would otherwise be checked as a group
    ``g_<origin>`` that nobody is denied."""
    need = {topic: Perm.SUB}
    if topic.startswith(DLQ_PREFIX):
        need[retry_topic(topic[len(DLQ_PREFIX) :])] = Perm.SUB
    if origin and origin != topic and topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        need.setdefault(origin, Perm.SUB)
        if topic.startswith(RETRY_PREFIX):
            for sep in ("_", "+"):
                if topic.endswith(sep + origin) and len(topic) > len(RETRY_PREFIX + sep + origin):
                    group = topic[len(RETRY_PREFIX) : -len(sep + origin)]
                    need.setdefault(retry_topic(group), Perm.SUB)
    return need


def consumed(topic: str, group: str, *, own_pop_retry: bool = False) -> Need:
    """SUB on ``topic`` and ``group``, for a request of ``group`` on ``topic``. A retry
    topic holds copies of other topics' records, so a group reads only its own
    (``%RETRY%group``; with ``own_pop_retry``, also its POP retry topics
    ``%RETRY%group_T`` / ``%RETRY%group+T``, which acks and changes of invisible time
    name), as upstream 5.x refuses a pull whose "retry topic does not match consumer
    group"; a dead-letter topic ``%DLQ%g`` also needs SUB on the group ``g``."""
    own = retry_topic(group)
    own_pop = own_pop_retry and topic.startswith((own + "_", own + "+"))
    if topic.startswith(RETRY_PREFIX) and topic != own and not own_pop:
        raise AclDenied("retry topic does not match consumer group.")
    need = {topic: Perm.SUB, own: Perm.SUB}
    if topic.startswith(DLQ_PREFIX):
        need[retry_topic(topic[len(DLQ_PREFIX) :])] = Perm.SUB
    return need


def sub_topic_and_group(ext: Mapping[str, str], body: bytes) -> Need:
    """SUB on header fields ``topic`` and ``consumerGroup`` (a consumer's own queue)."""
    return consumed(_field(ext, "topic"), _field(ext, "consumerGroup"))


def sub_handle_topic_and_group(ext: Mapping[str, str], body: bytes) -> Need:
    """As :func:`sub_topic_and_group`, for a request with a receipt handle (ACK,
    CHANGE_MESSAGE_INVISIBLETIME), whose topic may be the group's POP retry topic."""
    return consumed(_field(ext, "topic"), _field(ext, "consumerGroup"), own_pop_retry=True)


def body_topic_and_group(ext: Mapping[str, str], body: bytes) -> Need:
    """SUB on the JSON body's ``topic`` and ``consumerGroup`` (QUERY_ASSIGNMENT,
    SET_MESSAGE_REQUEST_MODE, our BATCH_ACK_MESSAGE body)."""
    obj = _json(body)
    return consumed(_field(obj, "topic"), _field(obj, "consumerGroup"), own_pop_retry=True)


def _unregister(ext: Mapping[str, str], body: bytes) -> Need:
    group = ext.get("consumerGroup")  # a producer unregisters without one
    return {retry_topic(group): Perm.SUB} if group else {}


def _heartbeat(ext: Mapping[str, str], body: bytes) -> Need:
    need: Need = {}
    for c in _json(body).get("consumerDataSet") or []:
        if isinstance(c, dict) and c.get("groupName"):
            need[retry_topic(str(c["groupName"]))] = Perm.SUB
            for s in c.get("subscriptionDataSet") or []:
                if isinstance(s, dict) and s.get("topic"):
                    need.setdefault(str(s["topic"]), Perm.SUB)
    return need


def _check_client_config(ext: Mapping[str, str], body: bytes) -> Need:
    """CHECK_CLIENT_CONFIG: SUB on the body's ``group`` and its subscription's topic (a
    consumer checks its own filter before it starts; it must be one of that group's)."""
    j = _json(body)
    group = j.get("group")
    if not group:
        raise AclDenied("the client config check names no group")
    need: Need = {retry_topic(str(group)): Perm.SUB}
    sub = j.get("subscriptionData")
    if isinstance(sub, dict) and sub.get("topic"):
        need.setdefault(str(sub["topic"]), Perm.SUB)
    return need


def _lock(ext: Mapping[str, str], body: bytes) -> Need:
    group = _json(body).get("consumerGroup")
    if not group:
        raise AclDenied("the lock request names no consumerGroup")
    return {retry_topic(str(group)): Perm.SUB}


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of :data:`PERMISSIONS`: what a request code needs beyond a valid signature."""

    resources: Resources = _none
    """The resources it touches and the permission each needs."""
    admin: bool = False
    """Only an ``admin: true`` account may send it."""
    fields: frozenset[str] | None = None
    """For admin codes: the header fields it may carry (besides :data:`ACL_FIELDS` and
    :data:`RPC_HEADER_FIELDS`). The request code is not signed, so a recorded signed
    request can be re-sent under another code; refusing unknown fields stops a request
    of another shape from being replayed as this one (docs/acl.md §7)."""
    reads_records: bool = False
    """It returns or copies records chosen by offset, not by topic: its processor also
    checks SUB on each record's topic (``RequestContext.read_refusal``)."""


SIGNED = Rule()
"""Only a valid signature: reads that name no topic or group (broker config, routes)."""


def admin_rule(*fields: str) -> Rule:
    """An admin-only code whose header carries only ``fields``."""
    return Rule(admin=True, fields=frozenset(fields))


_Q = RequestCode
_CREATE_TOPIC_FIELDS = ("topic", "defaultTopic", "readQueueNums", "writeQueueNums", "perm",
                        "topicFilterType", "topicSysFlag", "order", "attributes",
                        "force")  # fmt: skip
_RESET_FIELDS = ("topic", "group", "queueId", "offset", "timestamp", "isForce")
PERMISSIONS: Mapping[int, Rule] = {
    # --- producers
    _Q.SEND_MESSAGE: Rule(pub_topic("topic")),
    _Q.SEND_MESSAGE_V2: Rule(pub_topic("b")),
    _Q.SEND_BATCH_MESSAGE: Rule(pub_topic("b")),
    _Q.END_TRANSACTION: Rule(_end_transaction),
    # --- consumers (pull)
    _Q.PULL_MESSAGE: Rule(sub_topic_and_group),
    _Q.LITE_PULL_MESSAGE: Rule(sub_topic_and_group),
    _Q.QUERY_CONSUMER_OFFSET: Rule(sub_topic_and_group),
    _Q.UPDATE_CONSUMER_OFFSET: Rule(sub_topic_and_group),
    _Q.HEART_BEAT: Rule(_heartbeat),
    _Q.CHECK_CLIENT_CONFIG: Rule(_check_client_config),
    _Q.UNREGISTER_CLIENT: Rule(_unregister),
    _Q.GET_CONSUMER_LIST_BY_GROUP: Rule(sub_group("consumerGroup")),
    _Q.LOCK_BATCH_MQ: Rule(_lock),
    _Q.UNLOCK_BATCH_MQ: Rule(_lock),
    _Q.CONSUMER_SEND_MSG_BACK: Rule(sub_group("group"), reads_records=True),
    # --- reads of records
    _Q.QUERY_MESSAGE: Rule(read_topic("topic"), reads_records=True),
    _Q.VIEW_MESSAGE_BY_ID: Rule(reads_records=True),
    # --- POP (5.x): the group's and the topic's SUB, as a pull
    _Q.POP_MESSAGE: Rule(sub_topic_and_group),
    _Q.ACK_MESSAGE: Rule(sub_handle_topic_and_group),
    _Q.PEEK_MESSAGE: Rule(sub_topic_and_group),
    _Q.CHANGE_MESSAGE_INVISIBLETIME: Rule(sub_handle_topic_and_group),
    _Q.NOTIFICATION: Rule(sub_topic_and_group),
    _Q.BATCH_ACK_MESSAGE: Rule(body_topic_and_group),
    _Q.QUERY_ASSIGNMENT: Rule(body_topic_and_group),
    _Q.SET_MESSAGE_REQUEST_MODE: Rule(body_topic_and_group),
    # --- metadata of a topic or group: GET in 5.x, ANY here (docs/acl.md §3)
    _Q.SEARCH_OFFSET_BY_TIMESTAMP: Rule(get_of(topic="topic")),
    _Q.GET_MAX_OFFSET: Rule(get_of(topic="topic")),
    _Q.GET_MIN_OFFSET: Rule(get_of(topic="topic")),
    _Q.GET_EARLIEST_MSG_STORETIME: Rule(get_of(topic="topic")),
    _Q.GET_TOPIC_STATS_INFO: Rule(get_of(topic="topic")),
    _Q.QUERY_TOPIC_CONSUME_BY_WHO: Rule(get_of(topic="topic")),
    _Q.GET_CONSUMER_CONNECTION_LIST: Rule(get_of(group="consumerGroup")),
    _Q.GET_PRODUCER_CONNECTION_LIST: Rule(get_of(group="producerGroup")),
    _Q.GET_CONSUMER_RUNNING_INFO: Rule(get_of(group="consumerGroup")),  # relayed to the client
    _Q.GET_CONSUME_STATS: Rule(get_of(group="consumerGroup", topic="topic", optional=("topic",))),
    _Q.QUERY_CONSUME_QUEUE: Rule(
        get_of(topic="topic", group="consumerGroup", optional=("consumerGroup",))
    ),
    # --- broker-wide statistics: GET on the cluster in 5.x; plain ACL's cluster right is admin
    _Q.VIEW_BROKER_STATS_DATA: Rule(admin=True),
    _Q.GET_BROKER_CONSUME_STATS: Rule(admin=True),
    # --- no resource in 5.x either (no annotated header): the signature only
    _Q.GET_BROKER_RUNTIME_INFO: SIGNED,
    _Q.GET_BROKER_CONFIG: SIGNED,
    305: SIGNED,  # GET_SYSTEM_TOPIC_LIST_FROM_BROKER (store.broker.admin_tables)
    _Q.GET_ALL_PRODUCER_INFO: SIGNED,  # mqadmin producer (store.broker.admin_tables)
    # --- the built-in name server's reads (served on the broker port)
    _Q.GET_ROUTEINFO_BY_TOPIC: SIGNED,
    _Q.GET_BROKER_CLUSTER_INFO: SIGNED,
    _Q.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: SIGNED,
    _Q.GET_KV_CONFIG: SIGNED,
    # --- admin: upstream's Permission.ADMIN_CODE, then ours (docs/acl.md §5)
    _Q.UPDATE_AND_CREATE_TOPIC: admin_rule(*_CREATE_TOPIC_FIELDS),
    _Q.UPDATE_BROKER_CONFIG: admin_rule(),  # the body is the config
    _Q.DELETE_TOPIC_IN_BROKER: admin_rule("topic"),
    _Q.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin_rule(),  # the body is the config
    _Q.DELETE_SUBSCRIPTIONGROUP: admin_rule("groupName", "removeOffset", "cleanOffset"),
    _Q.GET_ALL_TOPIC_CONFIG: Rule(admin=True),
    _Q.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: Rule(admin=True),
    _Q.GET_ALL_CONSUMER_OFFSET: Rule(admin=True),
    _Q.GET_ALL_DELAY_OFFSET: Rule(admin=True),
    _Q.RESET_CONSUMER_CLIENT_OFFSET: admin_rule(*_RESET_FIELDS),
    _Q.INVOKE_BROKER_TO_RESET_OFFSET: admin_rule(*_RESET_FIELDS),  # mqadmin resetOffsetByTime
    _Q.NOTIFY_CONSUMER_IDS_CHANGED: admin_rule("consumerGroup"),
    _Q.CLEAN_EXPIRED_CONSUMEQUEUE: Rule(admin=True),  # files go (store.broker.admin_tables)
    _Q.CLEAN_UNUSED_TOPIC: Rule(admin=True),
    _Q.DELETE_EXPIRED_COMMITLOG: Rule(admin=True),
}
"""The permission table: every request code the broker serves (remoting, and the
built-in name server on its port) has a row; ``tests/broker/test_acl_table.py`` walks
the processor tables and fails for a served code without one. A code with no row is
admin-only (:data:`UNLISTED`): a new processor is closed until it is given its row.
To add a code: one line here, with the :class:`Rule` its request needs."""

NAMESRV_PERMISSIONS: Mapping[int, Rule] = {
    # a broker announcing itself, or withdrawing: any client could otherwise register a
    # known broker name and make its routes vanish when it disconnects
    _Q.REGISTER_BROKER: Rule(admin=True),
    _Q.UNREGISTER_BROKER: Rule(admin=True),
    _Q.GET_ROUTEINFO_BY_TOPIC: SIGNED,
    _Q.GET_BROKER_CLUSTER_INFO: SIGNED,
    _Q.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: SIGNED,
    _Q.GET_KV_CONFIG: SIGNED,
    _Q.GET_NAMESRV_CONFIG: SIGNED,  # mqadmin getNamesrvConfig (store.namesrv.admin)
    _Q.GET_KVLIST_BY_NAMESPACE: SIGNED,
    _Q.DELETE_TOPIC_IN_NAMESRV: Rule(admin=True),  # mqadmin deleteTopic's second half
    _Q.PUT_KV_CONFIG: Rule(admin=True),
    _Q.DELETE_KV_CONFIG: Rule(admin=True),
    _Q.UPDATE_NAMESRV_CONFIG: Rule(admin=True),
    _Q.WIPE_WRITE_PERM_OF_BROKER: Rule(admin=True),  # routes stop taking sends
    _Q.ADD_WRITE_PERM_OF_BROKER: Rule(admin=True),
}
"""The standalone name server's permission table (``mqstore namesrv --acl``), the same
shape as :data:`PERMISSIONS`: its write codes need an admin account (a broker signs its
registration with one), its reads a valid signature; a code with no row is admin-only."""

UNLISTED = Rule(admin=True)
"""What a code without a row needs."""

UPSTREAM_ADMIN_CODES: frozenset[int] = frozenset({17, 25, 215, 200, 207})
"""UPDATE_AND_CREATE_TOPIC, UPDATE_BROKER_CONFIG, DELETE_TOPIC_IN_BROKER,
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP (``Permission.ADMIN_CODE``)."""
ADMIN_CODES: frozenset[int] = frozenset(c for c, r in PERMISSIONS.items() if r.admin)
"""The codes whose row is admin-only: upstream's and ours (Rule 4)."""


SIGNED_TIMESTAMP_FIELDS: tuple[str, ...] = ("bornTimestamp", "g", "bornTime")
"""Header fields that carry the client's clock in ms, so are signed with the request
(SEND_MESSAGE's ``bornTimestamp``, SEND_MESSAGE_V2/SEND_BATCH_MESSAGE's ``g``,
POP_MESSAGE's ``bornTime``): Rule 6 bounds them whatever the request code is."""
DEFAULT_TIMESTAMP_WINDOW_MS = 15 * 60 * 1000
"""How far a signed timestamp may be from the broker's clock (clock skew included)."""


def read_refusal(account: Account | None, topic: str, origin: str | None = None) -> str | None:
    """Why ``account`` (None: white-listed) may not read a record of ``topic`` copied
    from ``origin`` (its ``RETRY_TOPIC`` property, if any): the remark of the refusal,
    or None when it holds what :func:`record_need` asks."""
    return _refusal(account, record_need(topic, origin))


def publish_refusal(account: Account | None, topic: str) -> str | None:
    """Why ``account`` (None: white-listed) may not publish to ``topic`` (PUB), or None:
    END_TRANSACTION's check of the half record's real topic."""
    return _refusal(account, {topic: Perm.PUB})


def _refusal(account: Account | None, need: Need) -> str | None:
    if account is None:
        return None
    try:
        AccessControl.authorize(account, need)
    except AclDenied as e:
        return str(e)
    return None


def rule_of(code: int, table: Mapping[int, Rule] = PERMISSIONS) -> Rule:
    """The row of ``code`` in ``table``, :data:`UNLISTED` if it has none."""
    return table.get(code, UNLISTED)


def resources_of(code: int, ext: Mapping[str, str], body: bytes) -> Need:
    """The resources a request touches and the permission each needs (Rule 4).

    Raises:
        AclDenied: a field naming a resource is missing or the body is unreadable.
    """
    return rule_of(code).resources(ext, body)


def _printable(resource: str) -> str:
    """Upstream's ``PlainAccessResource.printStr``: ``group:G`` or ``topic:T``."""
    if resource.startswith(RETRY_PREFIX):
        return f"group:{resource[len(RETRY_PREFIX) :]}"
    return f"topic:{resource}"


# ------------------------------------------------------------------------ checks


@dataclass(frozen=True, slots=True)
class AccessControl:
    """The loaded ACL: accounts by AccessKey and the global white list."""

    accounts: Mapping[str, Account]
    global_white: Sequence[AddressPattern] = ()
    timestamp_window_ms: int = DEFAULT_TIMESTAMP_WINDOW_MS
    """Rule 6's window; 0 turns the check off (``timestampWindowMs`` in the file, ours)."""

    @classmethod
    def load(cls, path: str | Path) -> AccessControl:
        """Read ``plain_acl.yml``.

        Raises:
            AclConfigError: unreadable file, not YAML, or a bad entry.
        """
        try:
            raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise AclConfigError(f"cannot read ACL file {path}: {e.strerror or e}") from None
        except yaml.YAMLError as e:
            raise AclConfigError(f"ACL file {path} is not valid YAML: {e}") from None
        return cls.from_dict(raw or {}, str(path))

    @classmethod
    def from_dict(cls, raw: object, source: str = "ACL") -> AccessControl:
        """Build from the parsed YAML document.

        Raises:
            AclConfigError: a bad entry.
        """
        if not isinstance(raw, dict):
            raise AclConfigError(f"{source}: the document must be a mapping")
        accounts: dict[str, Account] = {}
        for entry in raw.get("accounts") or []:
            acc = _account(entry)
            if acc.access_key in accounts:
                raise AclConfigError(f"{source}: accessKey {acc.access_key} appears twice")
            accounts[acc.access_key] = acc
        white = [AddressPattern(str(a)) for a in raw.get("globalWhiteRemoteAddresses") or []]
        window = raw.get("timestampWindowMs", DEFAULT_TIMESTAMP_WINDOW_MS)
        if isinstance(window, bool) or not isinstance(window, int) or window < 0:
            raise AclConfigError(f"{source}: timestampWindowMs must be an integer >= 0")
        return cls(accounts, tuple(white), window)

    def admin(self) -> Account | None:
        """The first admin account, if any (the HA handshake may use its secret)."""
        return next((a for a in self.accounts.values() if a.admin), None)

    def admit_name_server_request(
        self, code: int, ext: Mapping[str, str], body: bytes, peer_host: str
    ) -> str | None:
        """None when the standalone name server may serve the request (checked against
        :data:`NAMESRV_PERMISSIONS`), else the remark refusing it."""
        try:
            self.check(code, ext, body, peer_host, table=NAMESRV_PERMISSIONS)
        except AclDenied as e:
            return str(e)
        return None

    def check(
        self, code: int, ext: Mapping[str, str], body: bytes, peer_host: str,
        now_ms: int | None = None, table: Mapping[int, Rule] = PERMISSIONS,
    ) -> Account | None:  # fmt: skip
        """Rule 2 for one remoting request from ``peer_host``; then, for a signed
        request, Rule 6 (its signed timestamp is within :attr:`timestamp_window_ms` of
        ``now_ms``, default the clock) and, for an admin code, Rule 7 (no unknown header
        field); ``table`` is the server's permission table (the broker's
        :data:`PERMISSIONS`, the name server's :data:`NAMESRV_PERMISSIONS`). Returns the
        account whose permissions apply (None: white-listed, which
        may read everything); the server hands it to the processors that read records by
        offset (:func:`read_refusal`).

        Raises:
            AclDenied: refused; the message is the remark for the client.
        """
        signature = ext.get(SIGNATURE, "")

        def signed_by(secret_key: str) -> bool:
            expected = sign(content_of(ext, body), secret_key).encode("ascii")
            # bytes: compare_digest refuses str with non-ASCII characters (TypeError)
            return hmac.compare_digest(expected, signature.encode("utf-8", "replace"))

        account = self.authenticate(ext.get(ACCESS_KEY), peer_host, signed_by)
        if account is None:
            return None
        rule = rule_of(code, table)
        if rule.admin and not account.admin:
            raise AclDenied(
                f"Need admin permission for request code={code}, but accessKey="
                f"{account.access_key} is not"
            )
        self.authorize(account, rule.resources(ext, body))
        if rule.fields is not None:
            extra = sorted(set(ext) - rule.fields - ACL_FIELDS - RPC_HEADER_FIELDS)
            if extra:
                raise AclDenied(f"request code={code} does not take the fields {extra}")
        self._check_timestamp(ext, now_ms)
        return account

    def _check_timestamp(self, ext: Mapping[str, str], now_ms: int | None) -> None:
        if self.timestamp_window_ms <= 0:
            return
        now = int(time.time() * 1000) if now_ms is None else now_ms
        for name in SIGNED_TIMESTAMP_FIELDS:
            text = ext.get(name)
            if text is None:
                continue
            try:
                stamp = int(text)
            except ValueError:
                raise AclDenied(f"the signed timestamp <{name}> is not a number") from None
            if abs(now - stamp) > self.timestamp_window_ms:
                raise AclDenied(
                    f"the signed timestamp <{name}>={stamp} is more than "
                    f"{self.timestamp_window_ms} ms from the broker's clock"
                )

    def authenticate(
        self, access_key: str | None, peer_host: str, signed_by: Callable[[str], bool]
    ) -> Account | None:
        """Rule 2 (a)-(d), for any transport: ``signed_by(secret_key)`` tells whether the
        request's signature was made with that secret. Returns the account whose
        permissions apply, or None when a white list lets the peer in unchecked.

        Raises:
            AclDenied: (``Refusal.UNAUTHENTICATED``) no key, an unknown key or a wrong
                signature.
        """
        if any(p.matches(peer_host) for p in self.global_white):
            return None
        if access_key is None:
            raise AclDenied("No accessKey is configured", Refusal.UNAUTHENTICATED)
        account = self.accounts.get(access_key)
        if account is None:
            raise AclDenied(f"No acl config for {access_key}", Refusal.UNAUTHENTICATED)
        wra = account.white_remote_address
        if wra is not None and wra.matches(peer_host):
            return None
        if not signed_by(account.secret_key):
            raise AclDenied(
                f"Check signature failed for accessKey={access_key}", Refusal.UNAUTHENTICATED
            )
        return account

    @staticmethod
    def authorize(account: Account, need: Mapping[str, Perm]) -> None:
        """Rule 2 (f): every needed resource's permission (Rule 3), for any transport.

        Raises:
            AclDenied: (``Refusal.FORBIDDEN``) the account may not do this.
        """
        if account.admin and not account.resource_perms:
            return
        for resource, perm in need.items():
            owned = account.resource_perms.get(resource)
            if owned is None:
                is_group = resource.startswith(RETRY_PREFIX)
                owned = account.default_group_perm if is_group else account.default_topic_perm
            if not perm_allows(perm, owned):  # upstream says "default" for listed ones too
                raise AclDenied(f"No default permission for {_printable(resource)}")
