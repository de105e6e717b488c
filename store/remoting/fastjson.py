r"""Read and write JSON the way fastjson does, and RocketMQ's safe config-file writes.

RocketMQ persists broker state (``config/consumerOffset.json``, ``topics.json``,
``subscriptionGroup.json``, ``delayOffset.json``, ...) with fastjson, and sends some
bodies (``TopicRouteData.brokerAddrs``) the same way. fastjson writes map keys that are
not strings *unquoted*, which standard JSON parsers refuse::

    {"offsetTable":{"TopicTest@group":{0:250,1:250}}}

Reading
-------
:func:`loads` accepts standard JSON plus unquoted object keys. An unquoted integer key
(``0``, ``-1``) becomes a Python ``int`` key; an unquoted identifier key (``name``,
which fastjson also reads) a ``str`` key; a quoted key is always a ``str``, so
``{"0":1}`` and ``{0:1}`` stay distinguishable. Object key order is kept. Anything else
malformed raises :class:`FastjsonError`, nothing else, whatever the input.

>>> loads('{"offsetTable":{"TopicTest@group":{0:250,1:250}},"0":{name:1}}')
{'offsetTable': {'TopicTest@group': {0: 250, 1: 250}}, '0': {'name': 1}}

Writing
-------
:func:`dumps` writes fastjson's form: ``int`` keys unquoted, ``str`` keys quoted,
``None`` values of objects left out (fastjson's default), non-ASCII text as is. A plain
``dict`` is a Java map and keeps its insertion order; a :class:`Bean` is a Java bean
and is written with its fields in alphabetical order, as fastjson sorts bean fields.
``pretty=True`` reproduces fastjson's ``PrettyFormat`` byte for byte, quirks included:
one tab per level, no space after ``:``, every string-keyed entry and array item on its
own line, but entries with non-string keys run on the opening line:

>>> dumps({"offsetTable": {"TopicTest@group": {0: 250, 1: 250}}})
'{"offsetTable":{"TopicTest@group":{0:250,1:250}}}'
>>> dumps(Bean(topicName="T", perm=6, order=False))
'{"order":false,"perm":6,"topicName":"T"}'
>>> dumps({"offsetTable": {"TopicTest@group": {0: 250, 1: 250}}}, pretty=True)
'{\n\t"offsetTable":{\n\t\t"TopicTest@group":{0:250,1:250\n\t\t}\n\t}\n}'

Empty objects and arrays stay ``{}`` and ``[]``; there is no trailing newline.
RocketMQ's ``ConfigManager`` writes config files this way.

Files
-----
:func:`write_config_file` keeps RocketMQ's ``MixAll.string2File`` safety and adds
fsyncs: the new text goes to ``<file>.tmp`` (fsynced), the previous content to
``<file>.bak`` (through its own temp file), then ``<file>.tmp`` is renamed over the
file and the directory fsynced. :func:`read_config_file` falls back to ``<file>.bak``
when the file is missing, empty or unparseable, as ``ConfigManager.load`` does.
"""

from __future__ import annotations

import json
import json.decoder
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from mqstore import _platform
from mqstore.errors import StoreError

MAX_DEPTH: Final = 200
"""Deepest nesting :func:`loads` accepts (config files nest three or four levels)."""

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_INT_KEY = re.compile(r"-?[0-9]+")
_IDENT_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
# The stdlib's C string scanner (public in json.decoder, absent from typeshed):
# (text, index just past the opening quote, strict) -> (value, index past the closing quote).
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_LITERALS: Final[dict[str, object]] = {"true": True, "false": False, "null": None}


class FastjsonError(StoreError, ValueError):
    """Text is not JSON as fastjson writes it (message carries the position)."""


class Bean(dict[str, Any]):
    """A dict that :func:`dumps` writes with its keys sorted, like a fastjson Java bean."""


# ---------------------------------------------------------------------------- reading


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, pos: int, what: str) -> FastjsonError:
        snippet = self.text[pos : pos + 20]
        return FastjsonError(f"{what} at char {pos} (near {snippet!r})")

    def ws(self, pos: int) -> int:
        match = _WS.match(self.text, pos)
        assert match is not None  # the pattern matches the empty string
        return match.end()

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        text = self.text
        if pos >= len(text):
            raise self.fail(pos, "value expected, found end of text")
        char = text[pos]
        if char == "{":
            return self.obj(pos + 1, depth + 1)
        if char == "[":
            return self.array(pos + 1, depth + 1)
        if char == '"':
            return self.string(pos + 1)
        number = _NUMBER.match(text, pos)
        if number is not None:
            if number.group(1) or number.group(2):
                return float(number.group()), number.end()
            return self.integer(number.group(), pos), number.end()
        for word, literal in _LITERALS.items():
            if text.startswith(word, pos):
                return literal, pos + len(word)
        raise self.fail(pos, "value expected")

    def integer(self, digits: str, pos: int) -> int:
        try:
            return int(digits)
        except ValueError:  # more digits than int() accepts
            raise self.fail(pos, "integer too long") from None

    def string(self, pos: int) -> tuple[str, int]:
        try:
            return _scanstring(self.text, pos, False)
        except ValueError as e:
            raise self.fail(pos - 1, f"bad string ({e.args[0] if e.args else e})") from None

    def key(self, pos: int) -> tuple[str | int, int]:
        text = self.text
        if text.startswith('"', pos):
            return self.string(pos + 1)
        match = _INT_KEY.match(text, pos)
        if match is not None:
            return self.integer(match.group(), pos), match.end()
        match = _IDENT_KEY.match(text, pos)
        if match is not None:
            return match.group(), match.end()
        raise self.fail(pos, "object key expected")

    def check_depth(self, pos: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise self.fail(pos, f"nesting deeper than {MAX_DEPTH}")

    def obj(self, pos: int, depth: int) -> tuple[dict[str | int, Any], int]:
        self.check_depth(pos, depth)
        result: dict[str | int, Any] = {}
        pos = self.ws(pos)
        if self.text.startswith("}", pos):
            return result, pos + 1
        while True:
            key, pos = self.key(pos)
            pos = self.ws(pos)
            if not self.text.startswith(":", pos):
                raise self.fail(pos, "':' expected")
            value, pos = self.value(self.ws(pos + 1), depth)
            result[key] = value
            done, pos = self.after_item(pos, "}")
            if done:
                return result, pos

    def array(self, pos: int, depth: int) -> tuple[list[Any], int]:
        self.check_depth(pos, depth)
        result: list[Any] = []
        pos = self.ws(pos)
        if self.text.startswith("]", pos):
            return result, pos + 1
        while True:
            value, pos = self.value(pos, depth)
            result.append(value)
            done, pos = self.after_item(pos, "]")
            if done:
                return result, pos

    def after_item(self, pos: int, close: str) -> tuple[bool, int]:
        """After an object member or array element: ``(False, next item)`` past a comma,
        ``(True, past close)`` at ``close``.

        Raises:
            FastjsonError: neither comes next.
        """
        pos = self.ws(pos)
        if self.text.startswith(",", pos):
            return False, self.ws(pos + 1)
        if self.text.startswith(close, pos):
            return True, pos + 1
        raise self.fail(pos, f"',' or '{close}' expected")


def loads(text: str | bytes) -> Any:
    """Parse fastjson output (see the module docstring for what is accepted).

    Raises:
        FastjsonError: ``text`` is not valid (including bytes that are not UTF-8).
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise FastjsonError(f"not UTF-8: {e}") from None
    parser = _Parser(text)
    value, pos = parser.value(parser.ws(0), 0)
    pos = parser.ws(pos)
    if pos != len(text):
        raise parser.fail(pos, "end of text expected")
    return value


# ---------------------------------------------------------------------------- writing


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"fastjson cannot carry {value}")
        return repr(value)
    raise TypeError(f"cannot write a {type(value).__name__} as fastjson")


def _key(key: object) -> str:
    if isinstance(key, str):
        return json.dumps(key, ensure_ascii=False)
    if isinstance(key, int) and not isinstance(key, bool):
        return str(int(key))
    raise TypeError(f"cannot write a {type(key).__name__} object key as fastjson")


def _write(value: object, out: list[str], pretty: bool, level: int) -> None:
    if isinstance(value, dict):
        items = sorted(value.items()) if isinstance(value, Bean) else value.items()
        out.append("{")
        first = True
        for key, item in items:
            if item is None:
                continue
            if not first:
                out.append(",")
            first = False
            if pretty and isinstance(key, str):
                out.append("\n" + "\t" * (level + 1))
            out.append(_key(key) + ":")
            _write(item, out, pretty, level + 1)
        if pretty and not first:
            out.append("\n" + "\t" * level)
        out.append("}")
    elif isinstance(value, list | tuple | set | frozenset):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            if pretty:
                out.append("\n" + "\t" * (level + 1))
            _write(item, out, pretty, level + 1)
        if pretty and value:
            out.append("\n" + "\t" * level)
        out.append("]")
    else:
        out.append(_scalar(value))


def dumps(value: object, *, pretty: bool = False) -> str:
    """``value`` as fastjson writes it (compact, or ``PrettyFormat`` with ``pretty``).

    Raises:
        TypeError: a value or key of a type fastjson has no form for here.
        ValueError: a float that is not finite.
    """
    out: list[str] = []
    _write(value, out, pretty, 0)
    return "".join(out)


def dumps_body(value: object, *, standard_json: bool = False) -> bytes:
    """A response body in UTF-8: :func:`dumps`' form, or with ``standard_json`` (a
    client that sent ``acceptStandardJsonOnly``) standard JSON with every key quoted,
    in the same key order, ``None`` values of objects again left out.

    Raises:
        TypeError, ValueError: as :func:`dumps`.
    """
    if not standard_json:
        return dumps(value).encode()

    def conv(v: object) -> object:
        if isinstance(v, dict):
            items = sorted(v.items()) if isinstance(v, Bean) else v.items()
            return {str(k): conv(x) for k, x in items if x is not None}
        if isinstance(v, list | tuple):
            return [conv(x) for x in v]
        return v

    return json.dumps(conv(value), separators=(",", ":"), ensure_ascii=False).encode()


# ---------------------------------------------------------------------------- files


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        _platform.fdatasync(fd, what=f"config {path.name}")
    finally:
        os.close(fd)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def write_config_file(path: str | os.PathLike[str], text: str) -> None:
    """Replace the config file at ``path`` with ``text``, keeping the old one as ``.bak``.

    Crash-safe: at every instant ``path`` holds either the old or the new text in
    full. Not safe for concurrent writers of one path; the caller serialises (RocketMQ's
    ``ConfigManager.persist`` is ``synchronized``).

    Raises:
        OSError: the directory is missing or a write/fsync failed; ``path`` is then
            unchanged or fully written.
    """
    target = Path(path)
    tmp = _sibling(target, ".tmp")
    _write_synced(tmp, text.encode("utf-8"))
    previous = _read_or_none(target)
    if previous:
        bak, bak_tmp = _sibling(target, ".bak"), _sibling(target, ".bak.tmp")
        _write_synced(bak_tmp, previous)
        os.replace(bak_tmp, bak)
    os.replace(tmp, target)
    _platform.fsync_dir(target.parent)


def read_config_file(path: str | os.PathLike[str]) -> Any | None:
    """The parsed config at ``path``, else at ``path.bak``, else ``None`` if neither exists.

    Like ``ConfigManager.load``: a missing, empty or unparseable file falls back to the
    ``.bak``. Unlike it, a file that exists but does not parse with no usable ``.bak``
    is an error, not an empty config: losing every consumer offset silently is worse
    than refusing to start. Never modifies either file.

    Raises:
        FastjsonError: the file does not parse and there is no non-empty ``.bak``, or
            the ``.bak`` is needed and does not parse.
        OSError: reading failed for another reason than a missing file.
    """
    target = Path(path)
    primary = _read_or_none(target)
    failure: FastjsonError | None = None
    if primary and primary.strip():
        try:
            return loads(primary)
        except FastjsonError as e:
            failure = e
    backup = _read_or_none(_sibling(target, ".bak"))
    if backup and backup.strip():
        try:
            return loads(backup)
        except FastjsonError as e:
            raise FastjsonError(f"{target}.bak: {e}") from e
    if failure is not None:
        raise FastjsonError(f"{target}: {failure}; no usable .bak") from failure
    return None
