"""The remoting protocol's values: :class:`RemotingCommand`, its errors, the sentinels.

One job: what a command *is*, apart from its bytes. The header codec
(``mqstore.remoting._header``) and the framing (``mqstore.remoting._frame``)
build and return these values. Rule 1 (extFields values are strings) is applied here,
by :func:`coerce_ext_fields`. The frame and header formats and Rules 1-4 are
documented once, in :mod:`mqstore.remoting.codec`, the public facade: import from there.

Pure: no I/O. Commands are frozen dataclasses, safe to share between threads.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Literal, TypeAlias, cast

from mqstore.errors import StoreError
from mqstore.remoting.codes import LanguageCode, RemotingFlag, SerializeType

_STR_ONLY: Final = frozenset({str})
_RESPONSE_BIT: Final = int(RemotingFlag.RESPONSE)
_ONEWAY_BIT: Final = int(RemotingFlag.ONEWAY)


class ProtocolError(StoreError):
    """A rule of the remoting protocol was broken; the connection must close."""


class LocalProtocolError(ProtocolError):
    """We tried to send something the protocol cannot carry (a bug on our side)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that are not a valid remoting frame."""


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"
    CLOSED = "CLOSED"


NEED_DATA: Final = _Sentinel.NEED_DATA
"""``next_command()``: no whole frame buffered yet; feed more bytes."""
CLOSED: Final = _Sentinel.CLOSED
"""``next_command()``: the peer closed the connection cleanly, between frames."""
NeedData: TypeAlias = Literal[_Sentinel.NEED_DATA]
Closed: TypeAlias = Literal[_Sentinel.CLOSED]


@dataclass(frozen=True, slots=True)
class RemotingCommand:
    """One request or response, header and body (RocketMQ ``RemotingCommand``).

    ``code`` is an ``int`` rather than an enum so unknown codes survive decoding;
    compare it with :class:`~mqstore.remoting.codes.RequestCode` or ``ResponseCode``.
    """

    code: int
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    opaque: int = 0
    """Request id, echoed by the response that answers it."""
    flag: int = 0
    """:class:`~mqstore.remoting.codes.RemotingFlag` bits."""
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict, hash=False)
    body: bytes = field(default=b"", repr=False)
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """True for responses, False for requests."""
        return bool(self.flag & _RESPONSE_BIT)  # int, not IntFlag: no enum arithmetic

    @property
    def is_oneway(self) -> bool:
        """True for requests that expect no response."""
        return bool(self.flag & _ONEWAY_BIT)

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        language: LanguageCode = LanguageCode.JAVA,
        version: int = 0,
    ) -> RemotingCommand:
        """The response to this request: same opaque and serialize type, response flag.

        ``ext_fields`` values are coerced to strings as in Rule 1.

        Raises:
            LocalProtocolError: this command is a response, or a oneway request.
        """
        if self.is_response:
            raise LocalProtocolError(f"cannot respond to a response (opaque {self.opaque})")
        if self.is_oneway:
            raise LocalProtocolError(f"cannot respond to a oneway request (opaque {self.opaque})")
        return RemotingCommand(
            code=int(code),
            language=language,
            version=version,
            opaque=self.opaque,
            flag=RemotingFlag.RESPONSE.value,
            remark=remark,
            ext_fields=coerce_ext_fields(ext_fields or {}),
            body=body,
            serialize_type=self.serialize_type,
        )

    def with_opaque(self, opaque: int) -> RemotingCommand:
        """A copy with another request id (for a client numbering its requests)."""
        return replace(self, opaque=opaque)


# ---------------------------------------------------------------------------- values


def as_ext_value(value: object) -> str:
    """The string Java would hold for an extFields value sent as ``value`` (Rule 1)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def coerce_ext_fields(fields: Mapping[str, object]) -> dict[str, str]:
    """``fields`` with every value a string and ``None`` values dropped (Rule 1).

    A table that is all strings already (every request a client builds, every header
    a RocketMQ client sends) is copied as is: the type test runs in C."""
    if not set(map(type, fields.values())) - _STR_ONLY and not set(map(type, fields)) - _STR_ONLY:
        return cast(dict[str, str], dict(fields))
    return {
        k if type(k) is str else str(k): v if type(v) is str else as_ext_value(v)
        for k, v in fields.items()
        if v is not None
    }
