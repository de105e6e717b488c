"""RocketMQ's remoting protocol (the broker/name-server RPC), as a pure, sans-IO codec.

This module knows the bytes of one frame and nothing else: no sockets, no clocks, no
request routing. :func:`encode` turns a :class:`RemotingCommand` into bytes; a
:class:`FrameDecoder` is fed whatever arrived (``receive_data``) and hands back whole
commands (``next_command``), like h11.

Frame
-----
Big-endian throughout::

    off        size      field
    0          4         length      signed int: 4 + header_len + body_len (excludes itself)
    4          4         header_meta serialize_type << 24 | header_len (24 bits)
    8          hlen      header      JSON (type 0) or ROCKETMQ binary (type 1)
    8 + hlen   the rest  body        opaque bytes; empty and absent are the same

A whole frame (length prefix included) is at most :data:`FRAME_MAX_LENGTH` = 16 MiB,
Netty's ``LengthFieldBasedFrameDecoder`` limit in RocketMQ's ``NettyDecoder``.
The header-meta vectors of RocketMQ's ``RemotingCommandTest``:

>>> header_meta(261, SerializeType.JSON).hex(" ")
'00 00 01 05'
>>> header_meta(16777215, SerializeType.ROCKETMQ).hex(" ")
'01 ff ff ff'

JSON header
-----------
As fastjson writes it: bean fields in alphabetical order, ``null`` fields left out, no
whitespace, ``language`` as the enum *name*::

    {"code":10,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,
     "remark":"...","serializeTypeCurrentRPC":"JSON","version":0}

Worked example, a HEART_BEAT request without body: a 94-byte header behind
length 98 (``00 00 00 62``) and header meta ``00 00 00 5e``:

>>> frame = encode(RemotingCommand(code=34, opaque=1))
>>> frame[:8].hex(" ")
'00 00 00 62 00 00 00 5e'
>>> print(frame[8:].decode())
{"code":34,"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":0}
>>> decoder = FrameDecoder()
>>> decoder.receive_data(frame)
>>> decoder.next_command() == RemotingCommand(code=34, opaque=1)
True
>>> decoder.next_command() is NEED_DATA
True

ROCKETMQ binary header
----------------------
::

    off  size  field
    0    2     code          signed short
    2    1     language      LanguageCode byte
    3    2     version       signed short
    5    4     opaque        signed int
    9    4     flag          signed int
    13   4     remark_len    0 means no remark
    17   rlen  remark        UTF-8
    ..   4     ext_len       byte length of the table that follows; 0 means none
    ..   elen  ext table     repeated: short key_len, key UTF-8, int val_len, val UTF-8

So a header without remark or extFields is 21 bytes, and with remark "Sample Remark"
34 (RocketMQ's ``RocketMQSerializableTest``):

>>> binary = RemotingCommand(code=10, serialize_type=SerializeType.ROCKETMQ)
>>> len(encode_header(binary)), len(encode_header(replace(binary, remark="Sample Remark")))
(21, 34)

Rules
-----
Rule 1. Custom headers travel as string values in ``extFields``. Clients written in
other languages send numbers, booleans and even nested JSON there (ali-ons does); the
decoder turns them into the strings Java would see (``7``, ``true``, compact JSON) and
drops ``null`` values, so ``ext_fields`` is always ``dict[str, str]``.

Rule 2. Decoding is tolerant where fastjson is: missing fields take Java's defaults
(code 0, language JAVA, version/opaque/flag 0), numeric strings are accepted for the
int fields, an unknown language becomes ``OTHER``, the JSON ``serializeTypeCurrentRPC``
field is ignored (the header-meta byte decides), and bytes after the binary ext table
are ignored. Everything else malformed is an error: a frame length below 4 or above the
limit, a header longer than the frame, an unknown serialize type, invalid UTF-8, bad
JSON, a header that is not an object, int fields out of range, binary lengths that are
negative or run past the header.

Rule 3. Breaking a rule raises: :class:`RemoteProtocolError` for bytes the peer sent,
:class:`LocalProtocolError` for a command we cannot encode (a binary code that does not
fit a short, a frame over the limit, a response to a response). Arbitrary input bytes
produce commands, ``NEED_DATA`` or a ``ProtocolError``, never anything else. A decoder
that raised stays broken; the caller closes that connection.

Rule 4. ``receive_data(b"")`` means EOF. ``next_command()`` then returns
:data:`CLOSED` between frames and raises ``RemoteProtocolError`` inside one.
"""

from __future__ import annotations

import enum
import json
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from json.encoder import encode_basestring
from typing import Final, Literal, TypeAlias, cast

from store.broker.codes import LanguageCode, RemotingFlag, SerializeType
from store.errors import StoreError

FRAME_MAX_LENGTH: Final = 16 * 1024 * 1024
"""Largest whole frame, length prefix included (``com.rocketmq.remoting.frameMaxLength``)."""
HEADER_LENGTH_MASK: Final = 0xFFFFFF
"""Header length bits of the header-meta int."""

_PREFIX: Final = struct.Struct(">iI")  # length, header_meta
_BINARY_FIXED: Final = struct.Struct(">hBhiii")  # code .. flag, then remark_len
_INT: Final = struct.Struct(">i")
_UINT: Final = struct.Struct(">I")
_SHORT: Final = struct.Struct(">h")
BINARY_HEADER_MIN: Final = _BINARY_FIXED.size + _INT.size
"""Smallest ROCKETMQ binary header: no remark, no extFields (21 bytes)."""

_INT32 = (-(2**31), 2**31 - 1)
_INT16 = (-(2**15), 2**15 - 1)
_I32_MIN, _I32_MAX = _INT32
_STR_ONLY: Final = frozenset({str})
_RESPONSE_BIT: Final = int(RemotingFlag.RESPONSE)
_ONEWAY_BIT: Final = int(RemotingFlag.ONEWAY)
_LANGUAGE_NAMES: Final = {int(m): m.name for m in LanguageCode}
_LANGUAGES_BY_NAME: Final = dict(LanguageCode.__members__)


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
    compare it with :class:`~store.broker.codes.RequestCode` or ``ResponseCode``.
    """

    code: int
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    opaque: int = 0
    """Request id, echoed by the response that answers it."""
    flag: int = 0
    """:class:`~store.broker.codes.RemotingFlag` bits."""
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


def _check_range(name: str, value: int, bounds: tuple[int, int], exc: type[ProtocolError]) -> int:
    if not bounds[0] <= value <= bounds[1]:
        raise exc(f"{name} {value} outside [{bounds[0]}, {bounds[1]}]")
    return value


# ---------------------------------------------------------------------------- encode


def encode_header(cmd: RemotingCommand) -> bytes:
    """The header bytes alone, in ``cmd.serialize_type``.

    Raises:
        LocalProtocolError: a field does not fit the chosen header type, or a string
            cannot be encoded as UTF-8 (a lone surrogate).
    """
    try:
        if cmd.serialize_type is SerializeType.ROCKETMQ:
            return _encode_binary_header(cmd)
        return _encode_json_header(cmd)
    except UnicodeEncodeError as e:
        raise LocalProtocolError(f"cannot encode a string of command {cmd.code}: {e}") from e


def _check_ext_fields(cmd: RemotingCommand) -> None:
    for k, v in cmd.ext_fields.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise LocalProtocolError(
                f"extFields must map str to str, got {k!r}: {v!r} (use coerce_ext_fields)"
            )


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    """fastjson's bytes, built by hand: the header is small and its shape fixed, and
    joining C-escaped strings (``encode_basestring``, what ``json.dumps`` uses for
    ``ensure_ascii=False``) costs a quarter of a ``json.dumps`` call per frame."""
    code, version, opaque, flag = cmd.code, cmd.version, cmd.opaque, cmd.flag
    if not (
        _I32_MIN <= code <= _I32_MAX
        and _I32_MIN <= version <= _I32_MAX
        and _I32_MIN <= opaque <= _I32_MAX
        and _I32_MIN <= flag <= _I32_MAX
    ):
        for name in ("code", "version", "opaque", "flag"):
            _check_range(name, getattr(cmd, name), _INT32, LocalProtocolError)
    language = _LANGUAGE_NAMES.get(cmd.language) or LanguageCode(cmd.language).name
    parts = [f'{{"code":{code:d}']
    if cmd.ext_fields:
        eb = encode_basestring
        try:
            pairs = [eb(k) + ":" + eb(v) for k, v in cmd.ext_fields.items()]
        except TypeError:  # a non-str key or value
            _check_ext_fields(cmd)
            raise
        parts.append(',"extFields":{' + ",".join(pairs) + "}")
    parts.append(f',"flag":{flag:d},"language":"{language}","opaque":{opaque:d}')
    if cmd.remark is not None:
        remark = cmd.remark
        text = encode_basestring(remark) if type(remark) is str else json.dumps(remark)
        parts.append(',"remark":' + text)
    parts.append(f',"serializeTypeCurrentRPC":"JSON","version":{version:d}}}')
    return "".join(parts).encode("utf-8")


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    _check_range("code", cmd.code, _INT16, LocalProtocolError)
    _check_range("version", cmd.version, _INT16, LocalProtocolError)
    _check_range("opaque", cmd.opaque, _INT32, LocalProtocolError)
    _check_range("flag", cmd.flag, _INT32, LocalProtocolError)
    _check_ext_fields(cmd)
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    table = bytearray()
    for k, v in cmd.ext_fields.items():
        key, val = k.encode("utf-8"), v.encode("utf-8")
        _check_range("extFields key length", len(key), (0, _INT16[1]), LocalProtocolError)
        table += _SHORT.pack(len(key)) + key + _INT.pack(len(val)) + val
    fixed = _BINARY_FIXED.pack(
        cmd.code, int(cmd.language), cmd.version, cmd.opaque, cmd.flag, len(remark)
    )
    return b"".join((fixed, remark, _INT.pack(len(table)), table))


def header_meta(header_length: int, serialize_type: SerializeType) -> bytes:
    """The 4 header-meta bytes (RocketMQ ``markProtocolType``)."""
    if not 0 <= header_length <= HEADER_LENGTH_MASK:
        raise LocalProtocolError(f"header length {header_length} does not fit 24 bits")
    return _UINT.pack(int(serialize_type) << 24 | header_length)


def encode_head(cmd: RemotingCommand, *, max_frame_length: int = FRAME_MAX_LENGTH) -> bytes:
    """Everything of the frame but the body: length, header meta, header.

    Lets a transport write a large body without copying it: send ``encode_head(cmd)``
    then ``cmd.body``.

    Raises:
        LocalProtocolError: see :func:`encode_header`; or the frame exceeds the limit.
    """
    header = encode_header(cmd)
    if len(header) > HEADER_LENGTH_MASK:
        raise LocalProtocolError(f"header of {len(header)} bytes does not fit 24 bits")
    length = 4 + len(header) + len(cmd.body)
    if length + 4 > max_frame_length:
        raise LocalProtocolError(f"frame of {length + 4} bytes exceeds {max_frame_length}")
    meta = int(cmd.serialize_type) << 24 | len(header)
    return _PREFIX.pack(length, meta) + header


def encode(cmd: RemotingCommand, *, max_frame_length: int = FRAME_MAX_LENGTH) -> bytes:
    """One whole frame for ``cmd`` (RocketMQ ``RemotingCommand.encode``).

    Raises:
        LocalProtocolError: see :func:`encode_head`.
    """
    return encode_head(cmd, max_frame_length=max_frame_length) + cmd.body


# ---------------------------------------------------------------------------- decode


def decode_header(
    header: bytes, serialize_type: SerializeType, body: bytes = b""
) -> RemotingCommand:
    """The command a header (and body) describe; the inverse of :func:`encode_header`.

    Raises:
        RemoteProtocolError: the header breaks Rule 2.
    """
    if serialize_type is SerializeType.ROCKETMQ:
        return _decode_binary_header(header, body)
    return _decode_json_header(header, body)


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RemoteProtocolError(f"{what} is not UTF-8: {e}") from e


def _reject_constant(name: str) -> object:
    raise RemoteProtocolError(f"JSON header holds {name}, which JSON does not allow")


_JSON_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
_SCAN_ONCE: Final[Callable[[str, int], tuple[object, int]]] = _JSON_DECODER.scan_once  # type: ignore[attr-defined]
"""The decoder's C scanner (``json.scanner.c_make_scanner``): one value at an index."""


def _json_int(obj: dict[str, object], name: str) -> int:
    value = obj.get(name)
    if type(value) is int and _INT32[0] <= value <= _INT32[1]:
        return value
    if value is None:
        return 0
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise RemoteProtocolError(f"JSON header {name} {value!r} is not an int") from None
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise RemoteProtocolError(f"JSON header {name} {value!r} is not an int")
    return _check_range(name, value, _INT32, RemoteProtocolError)


def _json_language(value: object) -> LanguageCode:
    if value is None:
        return LanguageCode.JAVA
    if isinstance(value, str) and value in _LANGUAGES_BY_NAME:
        return _LANGUAGES_BY_NAME[value]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 256:
        try:
            return LanguageCode(value)
        except ValueError:
            return LanguageCode.OTHER
    return LanguageCode.OTHER


def _decode_json_header(raw: bytes, body: bytes) -> RemotingCommand:
    text = _utf8(raw, "JSON header")
    try:
        try:  # the C scanner straight away: a header has no surrounding whitespace
            obj, end = _SCAN_ONCE(text, 0)
        except StopIteration:
            end = -1
        if end != len(text):  # whitespace around it, or junk: the full, checking parse
            obj = _JSON_DECODER.decode(text)
    except (ValueError, RecursionError) as e:
        raise RemoteProtocolError(f"JSON header does not parse: {e}") from None
    if not isinstance(obj, dict):
        raise RemoteProtocolError(f"JSON header is a {type(obj).__name__}, not an object")
    ext = obj.get("extFields")
    if ext is None:
        ext = {}
    elif not isinstance(ext, dict):
        raise RemoteProtocolError(f"JSON header extFields is a {type(ext).__name__}")
    remark = obj.get("remark")
    if ext and not set(map(type, ext.values())) <= _STR_ONLY:  # the set test runs in C
        ext = coerce_ext_fields(ext)
    return RemotingCommand(
        code=_json_int(obj, "code"),
        language=_json_language(obj.get("language")),
        version=_json_int(obj, "version"),
        opaque=_json_int(obj, "opaque"),
        flag=_json_int(obj, "flag"),
        remark=None if remark is None else as_ext_value(remark),
        ext_fields=ext,
        body=body,
        serialize_type=SerializeType.JSON,
    )


def _take(limit: int, pos: int, size: int, what: str) -> int:
    """Check that ``size`` bytes of ``what`` fit between ``pos`` and ``limit``; return the end."""
    if size < 0 or pos + size > limit:
        raise RemoteProtocolError(
            f"binary header {what} of {size} bytes at {pos} overruns its end at {limit}"
        )
    return pos + size


def _decode_binary_header(raw: bytes, body: bytes) -> RemotingCommand:
    if len(raw) < BINARY_HEADER_MIN:
        raise RemoteProtocolError(f"binary header of {len(raw)} bytes < {BINARY_HEADER_MIN}")
    code, language, version, opaque, flag, remark_len = _BINARY_FIXED.unpack_from(raw, 0)
    pos = _BINARY_FIXED.size
    end = _take(len(raw), pos, remark_len, "remark")
    remark = _utf8(raw[pos:end], "binary remark") if remark_len else None
    pos = _take(len(raw), end, _INT.size, "extFields length")
    (ext_len,) = _INT.unpack_from(raw, end)
    limit = _take(len(raw), pos, ext_len, "extFields")
    ext: dict[str, str] = {}
    while pos < limit:
        end = _take(limit, pos, _SHORT.size, "key length")
        (key_len,) = _SHORT.unpack_from(raw, pos)
        pos, end = end, _take(limit, end, key_len, "key")
        key = _utf8(raw[pos:end], "binary extFields key")
        pos = _take(limit, end, _INT.size, "value length")
        (val_len,) = _INT.unpack_from(raw, end)
        end = _take(limit, pos, val_len, "value")
        ext[key] = _utf8(raw[pos:end], "binary extFields value")
        pos = end
    try:
        lang = LanguageCode(language)
    except ValueError:
        lang = LanguageCode.OTHER
    return RemotingCommand(
        code=code,
        language=lang,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        body=body,
        serialize_type=SerializeType.ROCKETMQ,
    )


class FrameDecoder:
    """Splits a byte stream into :class:`RemotingCommand` s; one per connection.

    Not thread-safe: one reader feeds and drains it. Frame sizes are checked as soon as
    their first 8 bytes arrive, so an oversized frame is refused before its body is
    buffered.
    """

    def __init__(self, max_frame_length: int = FRAME_MAX_LENGTH) -> None:
        if max_frame_length < 8:
            raise ValueError(f"max_frame_length {max_frame_length} < 8")
        self.max_frame_length = max_frame_length
        self._buf = bytearray()
        self._eof = False
        self._error: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as commands."""
        return len(self._buf)

    def receive_data(self, data: bytes) -> None:
        """Append bytes read from the peer; ``b""`` means the peer closed (Rule 4).

        Raises:
            LocalProtocolError: data after EOF was signalled.
        """
        if self._eof:
            if data:
                raise LocalProtocolError("receive_data after EOF")
            return
        if data:
            self._buf += data
        else:
            self._eof = True

    def next_command(self) -> RemotingCommand | NeedData | Closed:
        """The next whole command, or ``NEED_DATA``, or ``CLOSED`` after a clean EOF.

        Raises:
            RemoteProtocolError: the stream is not valid remoting frames (Rules 2-4);
                every later call raises it again.
        """
        if self._error is not None:
            raise self._error
        try:
            return self._next()
        except RemoteProtocolError as e:
            self._error = e
            raise

    def _next(self) -> RemotingCommand | NeedData | Closed:
        buf = self._buf
        have = len(buf)
        if have >= 4:
            (length,) = _INT.unpack_from(buf)
            self._check_length(length)
            if have >= 8:
                (meta,) = _UINT.unpack_from(buf, 4)
                header_len = meta & HEADER_LENGTH_MASK
                serialize_type = self._serialize_type(meta >> 24)
                if header_len > length - 4:
                    raise RemoteProtocolError(
                        f"header length {header_len} exceeds frame length {length} - 4"
                    )
                total = 4 + length
                if have >= total:
                    header = bytes(buf[8 : 8 + header_len])
                    body = bytes(buf[8 + header_len : total])
                    del buf[:total]
                    return decode_header(header, serialize_type, body)
        if self._eof:
            if have:
                raise RemoteProtocolError(f"connection closed inside a frame ({have} bytes)")
            return CLOSED
        return NEED_DATA

    def _check_length(self, length: int) -> None:
        if length < 4:
            raise RemoteProtocolError(f"frame length {length} < 4")
        if length + 4 > self.max_frame_length:
            raise RemoteProtocolError(
                f"frame of {length + 4} bytes exceeds the {self.max_frame_length}-byte limit"
            )

    @staticmethod
    def _serialize_type(code: int) -> SerializeType:
        if code == 0:  # JSON, nearly every frame: no enum lookup
            return SerializeType.JSON
        try:
            return SerializeType(code)
        except ValueError:
            raise RemoteProtocolError(f"unknown serialize type {code}") from None
