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
from dataclasses import dataclass

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
    fn, tags = compile_expression(expression, keywords)
    return SqlFilter(expression, fn, tags)
