"""Subscription expressions and tag filtering (RocketMQ ``FilterAPI`` / ``SubscriptionData``).

A subscription is ``"*"`` (or empty: everything) or tags joined by ``||``, e.g.
``"TagA || TagB"``: split on ``||``, trimmed, empty parts dropped. Filtering happens
twice, as in RocketMQ:

1. **On the consume queue** (:meth:`Subscription.matches_code`, the broker's
   ``isMatchedByConsumeQueue``): the unit's tags code, cut to its low 32 bits, must be
   the ``String.hashCode`` of one of the tags. Cheap, but hashes collide: ``"Aa"`` and
   ``"BB"`` both hash to 2112, so a ``"Aa"`` subscriber also gets ``"BB"`` here.
2. **On the message** (:meth:`Subscription.matches_tags`, the client's re-filter in
   ``PullAPIWrapper.processPullResult``): the record's TAGS must be one of the tags,
   exactly.

>>> s = parse_subscription("Aa || TagB")
>>> s.matches_code(java_string_hash("BB")), s.matches_tags("BB")
(True, False)

A SQL92 subscription (``expression_type="SQL92"``, :mod:`mqstore.sql92`) is tested on
the message's properties, TAGS included (:meth:`Subscription.matches_properties`, the
broker's ``ExpressionMessageFilter``). On the consume queue it passes every unit, unless
its expression can only be TRUE for some tags (``TAGS = 'x' AND ...``): then units of
other tag codes are skipped without reading their messages.

>>> q = parse_subscription("a > 5", "SQL92")
>>> q.code_test is None, q.matches_properties("a\x0110\x02")
(True, True)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mqstore.message import java_string_hash, tags_of
from mqstore.sql92 import SqlFilter, SqlParseError, compile_filter

SUB_ALL = "*"
TAG = "TAG"
"""RocketMQ ``ExpressionType.TAG``."""
SQL92 = "SQL92"
"""RocketMQ ``ExpressionType.SQL92``."""


def is_tag_type(expression_type: str | None) -> bool:
    """RocketMQ ``ExpressionType.isTagType``: null, empty or ``"TAG"``."""
    return not expression_type or expression_type == TAG


def _low_int32(code: int) -> int:
    """``(int) tagsCode`` in Java: the low 32 bits as a signed int."""
    code &= 0xFFFFFFFF
    return code - (1 << 32) if code & 0x80000000 else code


@dataclass(frozen=True, slots=True)
class Subscription:
    """A parsed subscription: everything, or a set of tags and their hash codes."""

    expression: str
    tags: frozenset[str]
    codes: frozenset[int]
    matches_all: bool
    """True for ``"*"`` and the empty expression."""
    sql: SqlFilter | None = None
    """The compiled SQL92 expression of a SQL92 subscription."""

    def matches_code(self, tags_code: int) -> bool:
        """The consume-queue test: the low 32 bits of ``tags_code`` is a tag's hash
        (always true for SQL92, whose test needs the message)."""
        if self.matches_all or (self.sql is not None and self.sql.required_tags is None):
            return True
        return _low_int32(tags_code) in self.codes

    @property
    def code_test(self) -> Callable[[int], bool] | None:
        """:meth:`matches_code`, or None when it passes every unit (nothing to test)."""
        if self.matches_all or (self.sql is not None and self.sql.required_tags is None):
            return None
        return self.matches_code

    def code_candidates(self, low32: NDArray[np.int32]) -> NDArray[np.intp] | None:
        """:meth:`matches_code` over an array of tags codes' low 32 bits (``(int)
        tagsCode``): the indexes of those that pass, in order; None when every unit
        passes (no consume-queue test)."""
        if self.code_test is None:
            return None
        codes = sorted(self.codes)
        if len(codes) > 4:
            return np.flatnonzero(np.isin(low32, np.array(codes, np.int32)))
        hit = low32 == codes[0] if codes else np.zeros(len(low32), bool)
        for c in codes[1:]:
            hit |= low32 == c
        return np.flatnonzero(hit)

    def matches_tags(self, tags: str | None) -> bool:
        """The exact test on a message's TAGS (the re-check after a hash match)."""
        return self.matches_all or tags in self.tags

    def matches_properties(self, properties: str) -> bool:
        """The test on a message's serialized properties: its TAGS for a tag
        subscription, the SQL92 expression over every property for SQL92."""
        if self.sql is not None:
            return self.sql.matches_serialized(properties)
        return self.matches_all or tags_of(properties) in self.tags


@functools.lru_cache(maxsize=1024)
def parse_subscription(expression: str | None, expression_type: str | None = TAG) -> Subscription:
    """Parse ``"*"``, ``""``/None (everything) or ``"A || B"``; with ``expression_type``
    ``"SQL92"``, a SQL92 expression.

    Raises:
        SqlParseError: a SQL92 expression that does not compile, or any other
            non-tag expression type (RocketMQ has no filter for it).

    >>> parse_subscription(" TagA ||  || TagB ").tags == {"TagA", "TagB"}
    True
    >>> parse_subscription("*").matches_all
    True
    """
    if not is_tag_type(expression_type):
        if expression_type != SQL92:
            raise SqlParseError(f"no filter for expression type {expression_type}")
        sql = compile_filter(expression or "")
        tags = sql.required_tags or frozenset()  # a TAGS clause: skip units by tag code
        codes = frozenset(java_string_hash(t) for t in tags)
        return Subscription(sql.expression, frozenset(), codes, False, sql)
    text = (expression or "").strip()
    if not text or text == SUB_ALL:
        return Subscription(SUB_ALL, frozenset(), frozenset(), True)
    # An expression of separators only ("||") names no tag and matches nothing.
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    return Subscription(text, tags, frozenset(java_string_hash(t) for t in tags), False)


ALL = parse_subscription(SUB_ALL)
"""The subscription that matches everything."""
