"""Delay levels: delayed messages wait in ``SCHEDULE_TOPIC_XXXX`` until they are due.

RocketMQ ``ScheduleMessageService`` (docs/format.md §3.3, docs/store.md §5.1):

* **Levels.** ``messageDelayLevel`` = ``"1s 5s 10s 30s 1m ... 2h"``: level *i* (from 1)
  waits the *i*-th duration; units s, m, h, d.
* **Put.** A NOT/COMMIT message with DELAY = level > 0 (capped at the highest level)
  is stored in ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` with its real topic and
  queue in the REAL_TOPIC / REAL_QID properties (:func:`redirect`). The dispatcher
  gives its consume-queue unit the **deliver time** as tags code.
* **Delivery.** Per level, :class:`ScheduleService` walks the schedule queue from the
  level's offset; a unit is due when its deliver time <= now (a deliver time more
  than one level-delay ahead is treated as now). A due message is put again to its
  real topic and queue: same body (as stored), flag, sysflag, born time/host,
  reconsume times and the properties string as stored (DELAY, REAL_TOPIC, REAL_QID and
  WAIT kept, as RocketMQ does; the TIMER_* ones dropped), not delayed again; TAGS
  gives it an ordinary tags code again. The level's offset then moves past it.
* **Offsets** ``config/delayOffset.json`` = ``{"offsetTable":{<level>:<next offset>}}``
  in fastjson's form (integer keys unquoted), written every 10 s and at stop, via a
  temporary file and a ``.bak`` copy of the previous content.

A crash between a re-put and the next offset write delivers those messages again
on restart: at-least-once, as in RocketMQ.

A bad item never stops delivery: a due record that cannot be read or re-put because of
what it holds (an illegal real topic, a malformed message: ``ValueError``) is logged
once, counted in :attr:`ScheduleService.failures` and skipped, so the level's offset
moves past it and the messages behind it are delivered. Any other failure of a round
(the store refusing puts for now, a failed offsets write) is counted and retried next
round, without advancing past the message.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mqstore.commitlog import dispatch_rule as rule
from mqstore.commitlog import format as fmt
from mqstore.failures import FailureCounter
from mqstore.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    properties_to_string,
)
from mqstore.remoting import fastjson
from mqstore.service import ServiceThread
from mqstore.status import PutStatus
from mqstore.system_topics import SCHEDULE_TOPIC as SCHEDULE_TOPIC  # noqa: PLC0414 (re-export)
from mqstore.system_topics import broker_written_schedule_record

log = logging.getLogger(__name__)

"""``TopicValidator.RMQ_SYS_SCHEDULE_TOPIC``."""

DELAY_FOR_A_WHILE_MS = 100
"""How often a level is looked at when nothing is due (RocketMQ ``DELAY_FOR_A_WHILE``)."""

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_TIMER_PROPERTIES = (
    "TIMER_DELIVER_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELAY_MS",
    "TIMER_OUT_MS",
    "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES",
    "TIMER_DEL_UNIQKEY",
)


@dataclass(frozen=True, slots=True)
class DelayLevels:
    """The delay of each level in milliseconds (level 1 first)."""

    millis: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> DelayLevels:
        """Parse ``"1s 5s 10s ... 2h"``.

        >>> DelayLevels.parse("1s 2m 1h 1d").millis
        (1000, 120000, 3600000, 86400000)

        Raises:
            ValueError: an item is not a number followed by s, m, h or d.
        """
        out: list[int] = []
        for item in text.split():
            unit = _UNIT_MS.get(item[-1:])
            if unit is None or not item[:-1].isdigit():
                raise ValueError(f"bad delay level {item!r} in {text!r}")
            out.append(int(item[:-1]) * unit)
        return cls(tuple(out))

    @property
    def max_level(self) -> int:
        """The highest level (18 by default)."""
        return len(self.millis)

    def delay_of(self, level: int) -> int | None:
        """Milliseconds of ``level``, None when there is no such level."""
        return self.millis[level - 1] if 1 <= level <= len(self.millis) else None

    def deliver_timestamp(self, level: int, store_timestamp: int) -> int | None:
        """Deliver time of a record stored at ``store_timestamp`` with DELAY ``level``.

        Levels above the highest are capped; a level <= 0 gives None (no delay). An
        unknown level waits 1 s (``computeDeliverTimestamp``).
        """
        level = min(level, self.max_level)
        if level <= 0:
            return None
        delay = self.delay_of(level)
        return store_timestamp + (delay if delay is not None else 1000)


def queue_id_of(level: int) -> int:
    """Schedule queue of a level (``delayLevel2QueueId``)."""
    return level - 1


def redirect(msg: Message, levels: DelayLevels) -> Message:
    """The message to store for a delayed put (see the module docstring).

    Transactional PREPARED/ROLLBACK messages and messages without a delay are
    returned unchanged.
    """
    if msg.delay_level <= 0 or not rule.gets_unit(msg.sys_flag):
        return msg
    level = min(msg.delay_level, levels.max_level)
    if level <= 0:
        return msg
    props = dict(msg.properties)
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    # RocketMQ re-serializes the broker's map here, which holds the sender's WAIT (4.9.8
    # strips it only from an ordinary message's string); the re-put keeps it (time_up)
    props.setdefault(PROPERTY_WAIT_STORE_MSG_OK, "true" if msg.wait_store_msg_ok else "false")
    return dataclasses.replace(
        msg,
        topic=SCHEDULE_TOPIC,
        queue_id=queue_id_of(level),
        delay_level=level,
        properties=props,
    )


def time_up(rec: fmt.MessageRecord) -> Message | None:
    """The message to re-put for a due schedule record (``messageTimeup``): the record's
    properties string as stored, DELAY, REAL_TOPIC, REAL_QID and WAIT included (RocketMQ
    4.9.8 and 5.3.3 serialize the properties before clearing DELAY from the map, so the
    delivered message carries them all; checked by ``tests/oracle/test_sql92_differential.py``),
    less the timer properties, which a delay level does not take.

    None when the record lacks REAL_TOPIC / a numeric REAL_QID (nothing to deliver to),
    or was not written by the broker (``mqstore.system_topics`` Rule 2: no DELAY of its
    queue's level, or a REAL_TOPIC no client may send to): such a record came from a
    client send to ``SCHEDULE_TOPIC_XXXX`` that an older broker accepted.
    """
    props = rec.properties
    if not broker_written_schedule_record(props, rec.queue_id):
        real = props.get(PROPERTY_REAL_TOPIC)
        log.warning("schedule: skipping the record at %d (REAL_TOPIC=%s): not written by "
                    "the broker", rec.physical_offset, real)  # fmt: skip
        return None
    topic = props.get(PROPERTY_REAL_TOPIC)
    qid = props.get(PROPERTY_REAL_QUEUE_ID, "")
    if not topic or not qid.isdigit():
        return None
    timed = [name for name in _TIMER_PROPERTIES if props.pop(name, None) is not None]
    # RocketMQ keeps the properties string it read (DELAY, REAL_TOPIC, REAL_QID and the
    # client's WAIT included); only the map loses DELAY, so the re-put is not delayed again
    stored = properties_to_string(props) if timed else rec.properties_string
    return dataclasses.replace(redelivery(rec, topic, int(qid), props), stored_properties=stored)


def redelivery(rec: fmt.MessageRecord, topic: str, queue_id: int, props: dict[str, str]) -> Message:
    """The message that puts a held record (delayed or timed) into ``topic``/``queue_id``
    with ``props``: body, flag, born time and host, reconsume times and sys flag kept,
    not waiting for the store (the schedule and timer services re-put, no client waits)."""
    return Message(
        topic=topic,
        body=rec.body,
        properties=props,
        queue_id=queue_id,
        flag=rec.flag,
        wait_store_msg_ok=False,
        born_timestamp=rec.born_timestamp,
        born_host=rec.born_host,
        reconsume_times=rec.reconsume_times,
        sys_flag=rec.sys_flag,
    )


# -------------------------------------------------------------------- offsets file


def load_offsets(path: Path) -> dict[int, int]:
    """``offsetTable`` of ``delayOffset.json`` (falling back to ``.bak``); {} if absent.

    Raises:
        FastjsonError: neither the file nor its backup parses.
    """
    data = fastjson.read_config_file(path)
    if not isinstance(data, dict):
        return {}
    table = data.get("offsetTable") or {}
    return {int(k): int(v) for k, v in table.items()} if isinstance(table, dict) else {}


def save_offsets(path: Path, table: dict[int, int]) -> None:
    """Write ``delayOffset.json`` as RocketMQ's ``ConfigManager.persist`` does.

    Raises:
        OSError: the write failed; the previous file is intact.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    text = fastjson.dumps({"offsetTable": dict(sorted(table.items()))}, pretty=True)
    fastjson.write_config_file(path, text)


# ------------------------------------------------------------------------ service

UnitsReader = Callable[[int, int], "tuple[int, int, int] | None"]
"""(level, queue offset) -> the schedule unit (phys, size, deliver time), None past the end."""


class ScheduleService(ServiceThread):
    """Re-puts due delayed messages to their real topic; persists the level offsets."""

    name = "schedule"

    def __init__(
        self,
        levels: DelayLevels,
        offsets_path: Path,
        *,
        queue_bounds: Callable[[int], tuple[int, int] | None],
        unit_at: UnitsReader,
        read: Callable[[int, int], fmt.MessageRecord | None],
        put: Callable[[Message], PutStatus],
        flush_interval_ms: int = 10_000,
        clock: Callable[[], int] | None = None,
    ) -> None:
        """``queue_bounds(level)`` gives the schedule queue's (min, max) offsets or None."""
        super().__init__(DELAY_FOR_A_WHILE_MS / 1000.0)
        self.levels = levels
        self.path = offsets_path
        self.offsets: dict[int, int] = load_offsets(offsets_path)
        self._bounds = queue_bounds
        self._unit_at = unit_at
        self._read = read
        self._put = put
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._flush_interval = flush_interval_ms / 1000.0
        self._last_persist = time.monotonic()
        self.delivered = 0
        self.failures = FailureCounter(log, self.name)

    def deliver_due(self) -> int:
        """Deliver every due message of every level now; return how many."""
        n = 0
        for level in range(1, self.levels.max_level + 1):
            n += self._deliver_level(level)
        return n

    def _deliver_level(self, level: int) -> int:
        bounds = self._bounds(level)
        if bounds is None:
            return 0
        low, high = bounds
        offset = self.offsets.get(level, 0)
        offset = min(max(offset, low), high)
        delay = self.levels.delay_of(level) or 0
        n = 0
        while offset < high and not self._stopped.is_set():
            unit = self._unit_at(level, offset)
            if unit is None:
                break
            phys, size, deliver = unit
            now = self._clock()
            if deliver > now + delay:  # correctDeliverTimestamp
                deliver = now
            if deliver > now:
                break
            try:
                rec = self._read(phys, size)
                msg = time_up(rec) if rec is not None else None
                status = self._put(msg) if msg is not None else None
            except ValueError as e:  # this item is bad (illegal topic, malformed record)
                self.failures.record("re-putting a due message", e, (level, offset))
                offset += 1
                continue
            if status is not None:
                if not status.stored:
                    log.warning("schedule: re-put of level %d offset %d: %s", level, offset, status)
                    break
                n += 1
            offset += 1
        if offset != self.offsets.get(level, 0) or level in self.offsets:
            self.offsets[level] = offset
        self.delivered += n
        return n

    def run_once(self) -> None:
        try:
            self.deliver_due()
        except Exception as e:  # the round stops here; the next one starts from the offsets
            self.failures.record("delivering due messages", e)
        if time.monotonic() - self._last_persist >= self._flush_interval:
            try:
                self.persist()
            except Exception as e:  # the offsets stay in memory; the next write retries
                self.failures.record("persisting delay offsets", e)

    def persist(self) -> None:
        """Write ``delayOffset.json`` now.

        Raises:
            OSError: the write failed.
        """
        self._last_persist = time.monotonic()
        save_offsets(self.path, self.offsets)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop delivering and persist the offsets."""
        super().stop(timeout)
        self.persist()
