"""Names a client hands the broker, checked at the edge with RocketMQ's rules.

Group names become parts of persisted keys (``topic@group`` in
``consumerOffset.json``, subscription group names) and of topic names (``%RETRY%`` +
group, ``%DLQ%`` + group), which become directory names. RocketMQ checks groups with
the topic rule (``TopicValidator``: ``[%|a-zA-Z0-9_-]``); since a group's retry topic
must itself be a legal topic of at most 127 characters, a group may have at most
``127 - len("%RETRY%")`` = 120. A name that breaks either rule is refused with the
request, so it never reaches a file or a background service.

>>> validate_group("please_rename_unique_group_name")
'please_rename_unique_group_name'
>>> [is_legal_group(g) for g in ("a/b", "g" * 120, "g" * 121, chr(0xD800))]
[False, True, False, False]
"""

from __future__ import annotations

import re
from typing import Final

from mqstore.message import MAX_TOPIC_LENGTH
from mqstore.remoting.errors import BadRequestError

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
MAX_GROUP_LENGTH: Final = MAX_TOPIC_LENGTH - len(RETRY_GROUP_TOPIC_PREFIX)
GROUP_PATTERN: Final = re.compile(rf"^[%|a-zA-Z0-9_-]{{1,{MAX_GROUP_LENGTH}}}$")


def validate_group(group: object) -> str:
    """Return ``group`` if it is a legal consumer/producer group name, else raise.

    Raises:
        BadRequestError: not a string, empty, a character outside the topic alphabet
            (slashes, surrogates, spaces), or longer than :data:`MAX_GROUP_LENGTH`.
    """
    if not isinstance(group, str) or not GROUP_PATTERN.fullmatch(group):
        raise BadRequestError(f"illegal group name {group!r}: must match {GROUP_PATTERN.pattern}")
    return group


def is_legal_group(group: object) -> bool:
    """True when :func:`validate_group` accepts ``group``."""
    return isinstance(group, str) and GROUP_PATTERN.fullmatch(group) is not None
