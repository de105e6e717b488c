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
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from mqstore.message import java_string_hash

SUB_ALL = "*"


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

    def matches_code(self, tags_code: int) -> bool:
        """The consume-queue test: the low 32 bits of ``tags_code`` is a tag's hash."""
        return self.matches_all or _low_int32(tags_code) in self.codes

    def matches_tags(self, tags: str | None) -> bool:
        """The exact test on a message's TAGS (the re-check after a hash match)."""
        return self.matches_all or tags in self.tags


@functools.lru_cache(maxsize=1024)
def parse_subscription(expression: str | None) -> Subscription:
    """Parse ``"*"``, ``""``/None (everything) or ``"A || B"``.

    >>> parse_subscription(" TagA ||  || TagB ").tags == {"TagA", "TagB"}
    True
    >>> parse_subscription("*").matches_all
    True
    """
    text = (expression or "").strip()
    if not text or text == SUB_ALL:
        return Subscription(SUB_ALL, frozenset(), frozenset(), True)
    # An expression of separators only ("||") names no tag and matches nothing.
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    return Subscription(text, tags, frozenset(java_string_hash(t) for t in tags), False)


ALL = parse_subscription(SUB_ALL)
"""The subscription that matches everything."""
