"""The header codec of the remoting protocol: one command <-> its JSON or binary header.

One job: the header bytes of one :class:`RemotingCommand`, both serialize types, both
ways. :func:`encode_header` raises only ``LocalProtocolError``; :func:`decode_header`
returns a command or raises ``RemoteProtocolError``, whatever the bytes (Rules 2-3).
The length prefix and header meta around a header are ``mqstore.remoting._frame``'s.
Both header layouts and the Rules are documented once, in :mod:`mqstore.remoting.codec`,
the public facade: import from there.

Pure: no I/O, no state; safe from any thread.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Final

from mqstore.remoting._command import (
    _STR_ONLY,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    RemotingCommand,
    as_ext_value,
    coerce_ext_fields,
)
from mqstore.remoting.codes import LanguageCode, SerializeType

_fast_loads: Callable[[bytes], object] | None
try:  # a C parser about ten times faster than the json module's on a header
    from orjson import JSONDecodeError as _FastError
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a declared dependency
    _fast_loads = None

_BINARY_FIXED: Final = struct.Struct(">hBhiii")  # code .. flag, then remark_len
_INT: Final = struct.Struct(">i")
_SHORT: Final = struct.Struct(">h")
BINARY_HEADER_MIN: Final = _BINARY_FIXED.size + _INT.size
"""Smallest ROCKETMQ binary header: no remark, no extFields (21 bytes)."""

_INT32 = (-(2**31), 2**31 - 1)
_INT16 = (-(2**15), 2**15 - 1)
_I32_MIN, _I32_MAX = _INT32
_LANGUAGE_NAMES: Final = {int(m): m.name for m in LanguageCode}
_LANGUAGES_BY_NAME: Final = dict(LanguageCode.__members__)


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


def _parse_json(raw: bytes) -> object:
    """The JSON value of a header. orjson parses what it can (strict JSON, UTF-8,
    64-bit integers); anything it refuses takes the json module's path, which accepts
    what RocketMQ's fastjson may send beyond that (integers past 64 bits, escaped lone
    surrogates) and words the errors."""
    if _fast_loads is not None:
        try:
            return _fast_loads(raw)
        except _FastError:
            pass
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
    return obj


def _decode_json_header(raw: bytes, body: bytes) -> RemotingCommand:
    obj = _parse_json(raw)
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
