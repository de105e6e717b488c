"""Client-side request signing for brokers with RocketMQ's plain ACL (``AclClientRPCHook``).

An :class:`RpcHook` sees every request a :class:`~mqstore.client.remoting_client.RemotingClient`
sends, just before it is numbered and written, and returns the command to send.
:class:`AclSigner` is the one hook here: it adds ``AccessKey`` (and ``SecurityToken`` when
given) to the extFields and then ``Signature``, computed over the sorted extFields values
and the body exactly as the broker recomputes it (:mod:`mqstore.remoting.signing`,
docs/acl.md). The opaque is not an extField, so renumbering after signing is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.signing import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, content_of, sign


class RpcHook(Protocol):
    """Called for each outgoing request; returns the request to send."""

    def before_request(self, request: RemotingCommand) -> RemotingCommand: ...


@dataclass(frozen=True, slots=True)
class AclSigner:
    """Signs requests with one account's keys (``SessionCredentials``)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def before_request(self, request: RemotingCommand) -> RemotingCommand:
        ext = {k: v for k, v in request.ext_fields.items() if k != SIGNATURE}
        ext[ACCESS_KEY] = self.access_key
        if self.security_token:
            ext[SECURITY_TOKEN] = self.security_token
        ext[SIGNATURE] = sign(content_of(ext, request.body), self.secret_key)
        return replace(request, ext_fields=ext)
