"""RocketMQ's SQL92 message filters: compile an expression, test a message's properties.

Pure: no I/O. The language, its semantics and where each rule comes from are in
``docs/sql92.md``; the grammar is in :mod:`mqstore.sql92.parser`.

>>> f = compile_filter("a BETWEEN 1 AND 3 AND TAGS IN ('TagA', 'TagB')")
>>> f.matches({"a": "2", "TAGS": "TagA"}), f.matches({"a": "7", "TAGS": "TagA"})
(True, False)
>>> compile_filter("b = 1").matches({})  # a missing property is never matched
False
>>> compile_filter("a > 'x'")
Traceback (most recent call last):
...
mqstore.sql92.errors.SqlParseError: value 'x' cannot be compared with <, <=, > or >=
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from mqstore.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, string_to_properties
from mqstore.sql92.errors import SqlEvaluationError, SqlParseError
from mqstore.sql92.lexer import KEYWORDS_4, KEYWORDS_5
from mqstore.sql92.parser import Eval, compile_expression

__all__ = [
    "KEYWORDS_4",
    "KEYWORDS_5",
    "SqlEvaluationError",
    "SqlFilter",
    "SqlParseError",
    "compile_filter",
]


@dataclass(frozen=True, slots=True)
class SqlFilter:
    """A compiled SQL92 filter expression."""

    expression: str
    _fn: Eval
    required_tags: frozenset[str] | None = None
    """Tags one of which a matching message must have (None: no bound); see
    :func:`mqstore.sql92.parser.required_tags`."""
    needles: tuple[bytes, ...] | None = None
    """UTF-8 substrings one of which a matching message's serialized properties must
    contain (None: no bound); see :func:`mqstore.sql92.parser.required_substrings`."""

    names: tuple[str, ...] = ()
    """The property names the expression reads, sorted."""
    _markers: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)
    """Per name, ``\x02name\x01`` and ``name\x01``: where its value starts."""
    _verdicts: dict[tuple[str | None, ...], bool] = field(
        default_factory=dict, compare=False, repr=False
    )

    def matches_serialized(self, properties: str) -> bool:
        """:meth:`matches` of a serialized properties string (``name\x01value\x02``
        each), reading only the properties the expression names, each one's value as
        ``string_to_properties`` gives it (the last segment ``name\x01value`` wins; a
        segment with an empty value does not count, so then every property is parsed).
        The verdict for those values is remembered (up to :data:`VERDICTS` of them),
        since nothing else changes it."""
        values = self._values(properties) if self._markers else None
        if values is None:
            return self.matches(string_to_properties(properties))
        verdicts = self._verdicts
        verdict = verdicts.get(values)
        if verdict is None:
            if len(verdicts) >= VERDICTS:
                verdicts.clear()
            found = {n: v for n, v in zip(self.names, values, strict=True) if v is not None}
            verdict = verdicts[values] = self.matches(found)
        return verdict

    def _values(self, properties: str) -> tuple[str | None, ...] | None:
        """The named properties' values (None: not set), or None when one of them is
        set last with an empty value (an earlier segment may then be its value)."""
        out: list[str | None] = []
        for marker, head in self._markers:
            i = properties.rfind(marker)
            if i >= 0:
                start = i + len(marker)
            elif properties.startswith(head):
                start = len(head)
            else:
                out.append(None)
                continue
            end = properties.find(PROPERTY_SEPARATOR, start)
            value = properties[start:] if end < 0 else properties[start:end]
            if not value:
                return None
            out.append(value)
        return tuple(out)

    def may_match(self, record: bytes) -> bool:
        """False when a message whose bytes (the whole record, or its properties) are
        ``record`` can never match: none of :attr:`needles` is in them. A cheap test
        before decoding the properties and evaluating the expression."""
        needles = self.needles
        if needles is None:
            return True
        return any(map(record.__contains__, needles))

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """RocketMQ's ``Expression.evaluate``: True, False or None (null).

        Raises:
            SqlEvaluationError: RocketMQ's evaluation throws (a property compared with a
                number does not parse as one).
        """
        r = self._fn(properties)
        return r if r is None else r is True

    def matches(self, properties: Mapping[str, str]) -> bool:
        """Whether the broker delivers a message with these properties
        (``ExpressionMessageFilter.isMatchedByCommitLog``): only a TRUE result does; null
        and an evaluation error do not."""
        try:
            return self._fn(properties) is True
        except SqlEvaluationError:
            return False


@functools.lru_cache(maxsize=256)
def compile_filter(expression: str, *, string_tests: bool = True) -> SqlFilter:
    """Compile ``expression``. ``string_tests=False`` is RocketMQ 4.x's language, where
    CONTAINS, STARTSWITH and ENDSWITH are not keywords (plain property names).

    Raises:
        SqlParseError: the expression does not compile (RocketMQ ``MQFilterException``).
    """
    keywords = KEYWORDS_5 if string_tests else KEYWORDS_4
    c = compile_expression(expression, keywords)
    needles = None if c.needles is None else tuple(sorted(n.encode() for n in c.needles))
    names = tuple(sorted(c.names))
    markers = tuple(
        (PROPERTY_SEPARATOR + n + NAME_VALUE_SEPARATOR, n + NAME_VALUE_SEPARATOR) for n in names
    )
    return SqlFilter(expression, c.fn, c.tags, needles, names, markers)


VERDICTS = 4096
"""Distinct value combinations a filter remembers its verdict for (then it starts over)."""
