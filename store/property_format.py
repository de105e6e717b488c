"""How a broker version writes a record's properties string (docs/format.md §1.6).

Both versions write ``name \\x01 value \\x02`` per property, in the iteration order of
the Java ``HashMap`` the broker serialises, but they differ in the map and the end:

* **5.x** (the default, what the project has always written): the broker parses the
  producer's string into a ``HashMap(128)`` and ``messageProperties2String`` ends
  every entry with ``\\x02``, the last one included.
* **4.9** (4.9.x brokers, RocketMQ 4.9.8 included): ``string2messageProperties``
  builds a ``HashMap()`` (16 buckets, doubling past 12 entries) and
  ``messageProperties2String`` drops the last ``\\x02``. A 4.9 broker also never
  stores ``WAIT`` for a single message (it removes it before serialising) and adds
  ``CLUSTER``; for a batch it keeps the batch's ``WAIT``. The store writes what it
  is given; the broker adds and removes (``mqstore.broker``).

So the same message is one byte shorter in 4.9's format, with its properties in
another order: ``KEYS, UNIQ_KEY, TAGS`` against 5.x's ``UNIQ_KEY, TAGS, KEYS``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from mqstore.errors import IllegalMessageError
from mqstore.message import (
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Message,
    hashmap_bucket,
    java_hashmap_order,
    new_uniq_key,
)

_V5_UNRESIZED = 96
"""Entries a Java ``HashMap(128)`` holds before it resizes (load factor 0.75)."""


class PropertyFormat(enum.Enum):
    """The broker version whose properties format the store writes."""

    V5 = "5"
    V4_9 = "4.9"

    @classmethod
    def parse(cls, name: str) -> PropertyFormat:
        """``"5"``, ``"5.x"``, ``"4.9"``, ``"4.9.8"`` ... to a format.

        Raises:
            ValueError: another version.
        """
        text = name.strip().lower()
        if text in ("5", "5.x") or text.startswith("5."):
            return cls.V5
        if text in ("4.9", "4.9.x") or text.startswith("4.9."):
            return cls.V4_9
        raise ValueError(f"property format must be 4.9 or 5 (a broker version), got {name!r}")

    @property
    def map_capacity(self) -> int:
        """Initial capacity of the Java HashMap the broker serialises."""
        return 16 if self is PropertyFormat.V4_9 else 128

    @property
    def trailing_separator(self) -> bool:
        """Whether the last entry ends with ``\\x02``."""
        return self is PropertyFormat.V5

    def serialize(self, items: Mapping[str, str]) -> str:
        """``items`` (in insertion order, as the broker's map was filled) as this
        version writes them.

        >>> PropertyFormat.V4_9.serialize({"UNIQ_KEY": "U", "TAGS": "T", "KEYS": "K"})
        'KEYS\\x01K\\x02UNIQ_KEY\\x01U\\x02TAGS\\x01T'
        >>> PropertyFormat.V5.serialize({"UNIQ_KEY": "U", "TAGS": "T", "KEYS": "K"})
        'UNIQ_KEY\\x01U\\x02TAGS\\x01T\\x02KEYS\\x01K\\x02'
        """
        if self is PropertyFormat.V5 and len(items) <= _V5_UNRESIZED:
            # The map never resized: its buckets are hashmap_bucket's (cached per name).
            order = sorted(items, key=hashmap_bucket)
            return "".join([f"{k}\x01{items[k]}\x02" for k in order])
        ordered = java_hashmap_order(items.items(), self.map_capacity)
        if self.trailing_separator:
            return "".join([f"{k}\x01{v}\x02" for k, v in ordered])
        return "\x02".join([f"{k}\x01{v}" for k, v in ordered])

    def properties_of(self, msg: Message) -> tuple[bytes, str]:
        """The properties bytes a store in this format writes for ``msg``, and its
        UNIQ_KEY (a new one when it has none).

        The map is the broker's, :meth:`Message.all_properties` (the message's own
        properties in order, then TAGS, KEYS and DELAY); 5.x adds ``WAIT=false`` for a
        message that does not wait, 4.9 writes ``WAIT`` only when it is one of the
        message's properties (a 4.9 broker strips it from single messages and keeps a
        batch's).

        Raises:
            IllegalMessageError: an empty property name, or one with \\x01/\\x02.
        """
        for k, v in msg.properties.items():
            if not k or "\x01" in k or "\x02" in k or "\x01" in v or "\x02" in v:
                raise IllegalMessageError(
                    f"property {k!r}: names/values must be non-empty and free of \\x01/\\x02"
                )
        items = msg.all_properties(mark_no_wait=self is PropertyFormat.V5)
        uniq = items.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or ""
        if not uniq:
            uniq = items[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = new_uniq_key()
        return self.serialize(items).encode("utf-8"), uniq
