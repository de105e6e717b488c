"""The dispatch rule: which CommitLog records reach the consume queues and the index, and
the tags code of each consume-queue unit. Stated here once; the record-at-a-time
functions and their numpy twins sit side by side, and every dispatcher, checker and
rebuilder (the reput thread, batch dispatch, recovery, logcheck, the Spark audit and
reindex) imports them.

As RocketMQ's ``CommitLogDispatcherBuildConsumeQueue``, ``CommitLogDispatcherBuildIndex``
and ``CommitLog.checkMessageAndReturnSize`` decide (docs/format.md §3.3):

* **Units**: a record of transaction type NOT or COMMIT gets a unit in its topic-queue.
  PREPARED and ROLLBACK records get none; they carry queue offset 0 and take no queue
  offset (the CommitLog assigns offsets by the same test, :func:`takes_queue_offset`).
* **Index keys**: every record but a ROLLBACK one (a half message's keys are indexed).
* **Tags code**: the ``String.hashCode`` of TAGS; for a ``SCHEDULE_TOPIC_XXXX`` record
  with a DELAY level, its deliver time (store time + the level's delay), which the
  schedule service reads to know when a level's queue is due.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

import numpy as np
from numpy.typing import NDArray

from mqstore.commitlog import _layout as L
from mqstore.message import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TAGS, tags_code, tags_of
from mqstore.system_topics import SCHEDULE_TOPIC

UNIT_DTYPE: Final = np.dtype([("p", ">i8"), ("s", ">i4"), ("t", ">i8")])
"""A consume-queue unit as numpy reads and writes it: CommitLog offset, size, tags code
(20 bytes, big-endian)."""

_TX_MASK: Final = L.TRANSACTION_MASK
_NOT: Final = L.TRANSACTION_NOT_TYPE
_COMMIT: Final = L.TRANSACTION_COMMIT_TYPE
_ROLLBACK: Final = L.TRANSACTION_ROLLBACK_TYPE


class DeliverTimes(Protocol):
    """What the tags code of a delayed record needs of the delay levels
    (:class:`mqstore.schedule.DelayLevels`)."""

    def deliver_timestamp(self, level: int, store_timestamp: int) -> int | None: ...


# ------------------------------------------------------------------- one record at a time


def gets_unit(sys_flag: int) -> bool:
    """Whether a record with ``sys_flag`` gets a consume-queue unit (NOT or COMMIT)."""
    tx = sys_flag & _TX_MASK
    return tx in (_NOT, _COMMIT)


takes_queue_offset = gets_unit
"""Whether the CommitLog gives a record the next offset of its queue: exactly the
records that get a unit (PREPARED and ROLLBACK store 0 and take none)."""


def gets_keys(sys_flag: int) -> bool:
    """Whether a record with ``sys_flag`` has its keys indexed (all but ROLLBACK)."""
    return sys_flag & _TX_MASK != _ROLLBACK


def delayed_tags_code(props: Mapping[str, str], store_timestamp: int, levels: DeliverTimes) -> int:
    """The tags code of a ``SCHEDULE_TOPIC_XXXX`` record: its deliver time when DELAY is a
    level, else (no or an unusable level) the TAGS hash as for any record."""
    level = props.get(PROPERTY_DELAY_TIME_LEVEL)
    if level is not None and level.strip().lstrip("-").isdigit():
        code = levels.deliver_timestamp(int(level), store_timestamp)
        if code is not None:
            return code
    return tags_code(props.get(PROPERTY_TAGS))


def tags_code_of(
    topic: str, props: Mapping[str, str], store_timestamp: int, levels: DeliverTimes
) -> int:
    """The unit's tags code of a record given its properties as a dict."""
    if topic == SCHEDULE_TOPIC:
        return delayed_tags_code(props, store_timestamp, levels)
    return tags_code(props.get(PROPERTY_TAGS))


def unit_tags_code(topic: str, properties: str, store_timestamp: int, levels: DeliverTimes) -> int:
    """:func:`tags_code_of` from the properties string: only a delayed record's string is
    parsed whole; for the others TAGS alone is looked up (the per-record hot path)."""
    if topic == SCHEDULE_TOPIC:
        from mqstore.message import string_to_properties

        return delayed_tags_code(string_to_properties(properties), store_timestamp, levels)
    return tags_code(tags_of(properties))


# ------------------------------------------------------------------------- numpy twins


def units_mask(sys_flags: NDArray[Any]) -> NDArray[np.bool_]:
    """:func:`gets_unit` over an array of sys flags."""
    tx = sys_flags & _TX_MASK
    return np.asarray((tx == _NOT) | (tx == _COMMIT), dtype=np.bool_)


def keys_mask(sys_flags: NDArray[Any]) -> NDArray[np.bool_]:
    """:func:`gets_keys` over an array of sys flags."""
    return np.asarray((sys_flags & _TX_MASK) != _ROLLBACK, dtype=np.bool_)


def needs_delayed_code(
    topic_ids: NDArray[Any], topics: tuple[str, ...] | list[str]
) -> NDArray[np.bool_]:
    """Which records of a bulk scan (``topic_ids`` indexing ``topics``) are
    ``SCHEDULE_TOPIC_XXXX`` records, whose codes :func:`delayed_tags_code` gives (the
    scan's TAGS-hash codes stand for all the others)."""
    if SCHEDULE_TOPIC not in topics:
        return np.zeros(len(topic_ids), dtype=np.bool_)
    return np.asarray(topic_ids == list(topics).index(SCHEDULE_TOPIC))
