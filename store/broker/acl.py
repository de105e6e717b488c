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

Rule 4 (resources of a request, :func:`resources_of`), as upstream's
``PlainAccessResource.parse`` (docs/acl.md §3 has the table): SEND_MESSAGE,
SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE PUB their topic, or SUB it when it is a retry
topic ``%RETRY%group`` (a consumer re-sending; upstream 5.x, where 4.9 took the group
from a header field); PULL_MESSAGE and UPDATE_CONSUMER_OFFSET SUB topic and group;
QUERY_MESSAGE SUBs its topic; HEART_BEAT SUBs every announced group and subscribed
topic; UNREGISTER_CLIENT (of a consumer), GET_CONSUMER_LIST_BY_GROUP and
CONSUMER_SEND_MSG_BACK SUB their group. Every other code needs only the signature.
Our additions (docs/acl.md §5): QUERY_CONSUMER_OFFSET, POP/ACK and LITE_PULL SUB topic
and group, LOCK/UNLOCK_BATCH_MQ SUB their group, a missing naming field is refused
(upstream skips a null resource), and the table dumps (GET_ALL_TOPIC_CONFIG,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET),
RESET_CONSUMER_CLIENT_OFFSET, INVOKE_BROKER_TO_RESET_OFFSET (222, docs/admin.md §1) and
NOTIFY_CONSUMER_IDS_CHANGED sent to the broker (40, ``mqstore admin rebalance``) are
admin-only.

Rule 5 (remarks). A permission failure names the resource as upstream's ``printStr``
does: ``topic:T`` or ``group:G``. :class:`AclDenied` carries a :class:`Refusal`: a
missing or unknown key and a wrong signature are UNAUTHENTICATED, the rest FORBIDDEN
(the gRPC endpoint answers UNAUTHORIZED / FORBIDDEN by it, ``mqstore.grpc.access``).

Pure apart from reading the YAML file; thread-safe (immutable after load).
"""

from __future__ import annotations

import enum
import hmac
import ipaddress
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mqstore.errors import ConfigError, StoreError
from mqstore.remoting.codes import RequestCode
from mqstore.remoting.signing import ACCESS_KEY, SIGNATURE, content_of, sign

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

_PUB_TOPIC = {RequestCode.SEND_MESSAGE: "topic", RequestCode.SEND_MESSAGE_V2: "b",
              RequestCode.SEND_BATCH_MESSAGE: "b"}  # fmt: skip
_TOPIC_AND_GROUP = frozenset({RequestCode.PULL_MESSAGE, RequestCode.QUERY_CONSUMER_OFFSET,
                              RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.POP_MESSAGE,
                              RequestCode.ACK_MESSAGE, RequestCode.LITE_PULL_MESSAGE})  # fmt: skip
_GROUP_ONLY = {RequestCode.GET_CONSUMER_LIST_BY_GROUP: "consumerGroup",
               RequestCode.CONSUMER_SEND_MSG_BACK: "group"}  # fmt: skip

UPSTREAM_ADMIN_CODES: frozenset[int] = frozenset({17, 25, 215, 200, 207})
"""UPDATE_AND_CREATE_TOPIC, UPDATE_BROKER_CONFIG, DELETE_TOPIC_IN_BROKER,
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP (``Permission.ADMIN_CODE``)."""
ADMIN_CODES: frozenset[int] = UPSTREAM_ADMIN_CODES | {
    RequestCode.GET_ALL_TOPIC_CONFIG,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    RequestCode.GET_ALL_CONSUMER_OFFSET,
    RequestCode.GET_ALL_DELAY_OFFSET,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
    222,  # INVOKE_BROKER_TO_RESET_OFFSET: what mqadmin resetOffsetByTime sends
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,  # sent to a broker: mqstore admin rebalance
}
"""Upstream's admin codes plus ours (Rule 4)."""


def _json(body: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(body or b"{}")
    except ValueError:
        raise AclDenied("cannot read the request body to check its resources") from None
    if not isinstance(obj, dict):
        raise AclDenied("cannot read the request body to check its resources")
    return obj


def resources_of(code: int, ext: Mapping[str, str], body: bytes) -> dict[str, Perm]:
    """The resources a request touches and the permission each needs (Rule 4).

    Raises:
        AclDenied: a field naming a resource is missing or the body is unreadable.
    """
    need: dict[str, Perm] = {}

    def field_of(name: str) -> str:
        value = ext.get(name)
        if not value:
            raise AclDenied(f"the field <{name}> naming the resource is missing")
        return value

    if code in _PUB_TOPIC:
        topic = field_of(_PUB_TOPIC[RequestCode(code)])
        # a consumer re-sending to its group's retry topic needs SUB on that group
        need[topic] = Perm.SUB if topic.startswith(RETRY_PREFIX) else Perm.PUB
    elif code in _TOPIC_AND_GROUP:
        need[field_of("topic")] = Perm.SUB
        need[retry_topic(field_of("consumerGroup"))] = Perm.SUB
    elif code == RequestCode.QUERY_MESSAGE:
        need[field_of("topic")] = Perm.SUB
    elif code == RequestCode.UNREGISTER_CLIENT:  # a producer unregisters without one
        if ext.get("consumerGroup"):
            need[retry_topic(ext["consumerGroup"])] = Perm.SUB
    elif code in _GROUP_ONLY:
        need[retry_topic(field_of(_GROUP_ONLY[RequestCode(code)]))] = Perm.SUB
    elif code == RequestCode.HEART_BEAT:
        for c in _json(body).get("consumerDataSet") or []:
            if isinstance(c, dict) and c.get("groupName"):
                need[retry_topic(str(c["groupName"]))] = Perm.SUB
                for s in c.get("subscriptionDataSet") or []:
                    if isinstance(s, dict) and s.get("topic"):
                        need.setdefault(str(s["topic"]), Perm.SUB)
    elif code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        group = _json(body).get("consumerGroup")
        if not group:
            raise AclDenied("the lock request names no consumerGroup")
        need[retry_topic(str(group))] = Perm.SUB
    return need


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
        return cls(accounts, tuple(white))

    def admin(self) -> Account | None:
        """The first admin account, if any (the HA handshake may use its secret)."""
        return next((a for a in self.accounts.values() if a.admin), None)

    def check(self, code: int, ext: Mapping[str, str], body: bytes, peer_host: str) -> None:
        """Rule 2 for one remoting request from ``peer_host``.

        Raises:
            AclDenied: refused; the message is the remark for the client.
        """
        signature = ext.get(SIGNATURE, "")

        def signed_by(secret_key: str) -> bool:
            return hmac.compare_digest(sign(content_of(ext, body), secret_key), signature)

        account = self.authenticate(ext.get(ACCESS_KEY), peer_host, signed_by)
        if account is not None:
            self.authorize(account, resources_of(code, ext, body), code)

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
    def authorize(account: Account, need: Mapping[str, Perm], code: int | None = None) -> None:
        """Rule 2 (e)-(f): the admin flag for an admin-only remoting ``code`` (None: no
        request code, as for gRPC), then every needed resource's permission (Rule 3).

        Raises:
            AclDenied: (``Refusal.FORBIDDEN``) the account may not do this.
        """
        if code is not None and code in ADMIN_CODES and not account.admin:
            raise AclDenied(
                f"Need admin permission for request code={code}, but accessKey="
                f"{account.access_key} is not"
            )
        if account.admin and not account.resource_perms:
            return
        for resource, perm in need.items():
            owned = account.resource_perms.get(resource)
            if owned is None:
                is_group = resource.startswith(RETRY_PREFIX)
                owned = account.default_group_perm if is_group else account.default_topic_perm
            if not perm_allows(perm, owned):  # upstream says "default" for listed ones too
                raise AclDenied(f"No default permission for {_printable(resource)}")
