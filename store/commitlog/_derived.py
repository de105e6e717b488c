"""Views derived from a record's properties string, written once for every record type.

:class:`~mqstore.commitlog._record.MessageRecord` (the decoded record),
:class:`~mqstore.commitlog._results.RecordInfo` (the scan's result) and
:class:`~mqstore.records.StoredMessage` (a message read back) all keep the properties
string verbatim; their properties, TAGS, KEYS, UNIQ_KEY and tags code are the same
functions of it. Each type names the
descriptors below as class attributes (``tags = TAGS``): one definition, no shared
base class (NamedTuples take none), computed on access.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar, overload

from mqstore.message import keys_of, string_to_properties, tags_code, tags_of, uniq_key_of

T = TypeVar("T")
D = TypeVar("D", bound="FromProperties[object]")


class _HasProperties(Protocol):
    @property
    def properties_string(self) -> str: ...


class FromProperties(Generic[T]):
    """A read-only attribute computed on access from the record's properties string."""

    def __init__(self, of: Callable[[str], T], doc: str) -> None:
        self._of = of
        self.__doc__ = doc

    @overload
    def __get__(self: D, record: None, owner: type | None = None) -> D: ...

    @overload
    def __get__(self, record: _HasProperties, owner: type | None = None) -> T: ...

    def __get__(self, record: _HasProperties | None, owner: type | None = None) -> object:
        return self if record is None else self._of(record.properties_string)


def _tags_code_of(properties: str) -> int:
    return tags_code(tags_of(properties))


PROPERTIES: FromProperties[dict[str, str]] = FromProperties(
    string_to_properties, "Properties parsed with RocketMQ's rules (a later duplicate wins)."
)
TAGS: FromProperties[str | None] = FromProperties(tags_of, "The TAGS property, if any.")
KEYS: FromProperties[list[str]] = FromProperties(keys_of, "The KEYS property split on spaces.")
UNIQ_KEY: FromProperties[str | None] = FromProperties(
    uniq_key_of, "The UNIQ_KEY property (the client message id), if any."
)
TAGS_CODE: FromProperties[int] = FromProperties(
    _tags_code_of,
    "Consume-queue tag code: Java hashCode of TAGS, 0 without (a delayed record's unit "
    "holds its deliver time instead, which the dispatcher computes).",
)

__all__ = ["KEYS", "PROPERTIES", "TAGS", "TAGS_CODE", "UNIQ_KEY", "FromProperties"]
