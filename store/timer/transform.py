"""What a timer message becomes on the way in and on the way out.

In (RocketMQ 5.3.3 ``HookUtils.handleScheduleMessage`` / ``transformTimerMessage``):

* A NOT/COMMIT message is a timer message when it has ``TIMER_DELAY_SEC``,
  ``TIMER_DELAY_MS`` or ``TIMER_DELIVER_MS`` (read in that order: now + seconds, now +
  milliseconds, the absolute time), unless it already has ``TIMER_OUT_MS`` or is in
  ``rmq_sys_wheel_timer`` (a broker's own re-put). A message with a 4.x delay level
  loses those three properties and keeps its level. ``__STARTDELIVERTIME`` is not read
  by RocketMQ 5.3.3's broker (only by its metrics and the client's send hook): such a
  message is delivered at once, as there.
* A value that is not a number is refused (:attr:`TimerVerdict.ILLEGAL`); a due time not
  in the future leaves the message as it is (delivered at once, its properties kept);
  more than ``timer_max_delay_sec`` ahead is refused.
* Otherwise the due time is floored to the precision (one precision earlier when it is
  a multiple of it: the slot is read once it has passed), kept in ``TIMER_OUT_MS``, the
  topic and queue go to ``REAL_TOPIC``/``REAL_QID``, and the message is stored in
  ``rmq_sys_wheel_timer`` queue 0.

Out (``TimerMessageStore.convert`` / ``convertMessage``): the stored record's body,
flag, sysflag, born time and host, reconsume times and properties, plus
``TIMER_ENQUEUE_MS`` (the unit's write time, ``Long.MAX_VALUE`` for a message that was
due before it was enqueued) and ``TIMER_DEQUEUE_MS`` (now), ``WAIT=false``; to
``REAL_TOPIC``/``REAL_QID``, or, for a unit that rolls, back to ``rmq_sys_wheel_timer``
queue 0 with ``TIMER_ROLL_TIMES`` one higher. ``REAL_TOPIC`` and ``REAL_QID`` stay in the
delivered record: ``convertMessage`` removes them from the map after it has made the
properties string that is stored (a 5.3.3 consumer sees both).

Pure: no I/O, the clock is a parameter.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from mqstore.commitlog import format as fmt
from mqstore.commitlog.dispatch_rule import gets_unit
from mqstore.message import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC, Message
from mqstore.schedule import redelivery

TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
"""``TimerMessageStore.TIMER_TOPIC`` (``rmq_sys_`` + ``wheel_timer``), one queue."""
TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
TIMER_REQUESTS: Final = frozenset((TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS))
"""The properties that ask for a delivery time: a message with none of them is never
changed by :func:`to_timer` (the put path tests this first, in C)."""
TIMER_OUT_MS: Final = "TIMER_OUT_MS"
TIMER_ENQUEUE_MS: Final = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS: Final = "TIMER_DEQUEUE_MS"
TIMER_ROLL_TIMES: Final = "TIMER_ROLL_TIMES"
START_DELIVER_TIME: Final = "__STARTDELIVERTIME"
"""Aliyun ONS's delivery time property: RocketMQ 5.3.3's broker does not act on it."""
LONG_MAX: Final = (1 << 63) - 1
UNIQ_KEY: Final = "UNIQ_KEY"


def illegal_remark(max_delay_sec: int) -> str:
    """``SendMessageProcessor``'s remark for WHEEL_TIMER_MSG_ILLEGAL (response code 13)."""
    return (f"timer message illegal, the delay time should not be bigger than the max delay "
            f"{max_delay_sec * 1000}ms; or if set del msg, the delay time should be bigger "
            "than the current time")  # fmt: skip


def not_enabled_remark() -> str:
    """``SendMessageProcessor``'s remark for WHEEL_TIMER_NOT_ENABLE (response code 1)."""
    return "accurate timer message is not enabled, timerWheelEnable is false"


class TimerVerdict(enum.Enum):
    """Why :func:`to_timer` did not return a message to store."""

    ILLEGAL = "WHEEL_TIMER_MSG_ILLEGAL"
    NOT_ENABLED = "WHEEL_TIMER_NOT_ENABLE"


@dataclass(frozen=True, slots=True)
class TimerRules:
    """The put side's timer settings (``StoreConfig.timer_*``)."""

    precision_ms: int = 1000
    max_delay_sec: int = 3 * 24 * 3600
    enabled: bool = True

    def apply(self, msg: Message) -> Message | TimerVerdict:
        """:func:`to_timer` now."""
        return to_timer(msg, time.time_ns() // 1_000_000, precision_ms=self.precision_ms,
                        max_delay_sec=self.max_delay_sec, enabled=self.enabled)  # fmt: skip

    def remark(self, verdict: TimerVerdict) -> str:
        """RocketMQ's remark for a refusal."""
        if verdict is TimerVerdict.NOT_ENABLED:
            return not_enabled_remark()
        return illegal_remark(self.max_delay_sec)


def is_timer_message(msg: Message) -> bool:
    """``HookUtils.checkIfTimerMessage`` without its side effect (see :func:`to_timer`)."""
    props = msg.properties
    if not props or msg.topic == TIMER_TOPIC or TIMER_OUT_MS in props:
        return False
    if not gets_unit(msg.sys_flag):  # NOT or COMMIT, the same test as the dispatch rule's
        return False
    return TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props or TIMER_DELAY_MS in props


def to_timer(
    msg: Message, now_ms: int, *, precision_ms: int, max_delay_sec: int, enabled: bool = True
) -> Message | TimerVerdict:
    """The message to store for a put of ``msg`` (the module docstring's "In").

    Messages that are not timer messages come back unchanged.

    >>> m = Message(topic="T", body=b"x", queue_id=2, properties={"TIMER_DELAY_SEC": "3"})
    >>> out = to_timer(m, 10_500, precision_ms=1000, max_delay_sec=60)
    >>> out.topic, out.queue_id, out.properties["TIMER_OUT_MS"], out.properties["REAL_QID"]
    ('rmq_sys_wheel_timer', 0, '13000', '2')
    >>> to_timer(m, 10_500, precision_ms=1000, max_delay_sec=2)
    <TimerVerdict.ILLEGAL: 'WHEEL_TIMER_MSG_ILLEGAL'>
    """
    if msg.delay_level > 0:
        props = msg.properties
        if TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props or TIMER_DELAY_MS in props:
            kept = {k: v for k, v in props.items()
                    if k not in (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)}  # fmt: skip
            return dataclasses.replace(msg, properties=kept)
        return msg
    if not is_timer_message(msg):
        return msg
    if not enabled:
        return TimerVerdict.NOT_ENABLED
    props = msg.properties
    try:
        if TIMER_DELAY_SEC in props:
            deliver = now_ms + int(props[TIMER_DELAY_SEC]) * 1000
        elif TIMER_DELAY_MS in props:
            deliver = now_ms + int(props[TIMER_DELAY_MS])
        else:
            deliver = int(props[TIMER_DELIVER_MS])
    except ValueError:
        return TimerVerdict.ILLEGAL
    if deliver <= now_ms:
        return msg
    if deliver - now_ms > max_delay_sec * 1000:
        return TimerVerdict.ILLEGAL
    if deliver % precision_ms == 0:
        deliver -= precision_ms
    else:
        deliver = deliver // precision_ms * precision_ms
    out = dict(props)
    out[TIMER_OUT_MS] = str(deliver)
    out[PROPERTY_REAL_TOPIC] = msg.topic
    out[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    return dataclasses.replace(msg, topic=TIMER_TOPIC, queue_id=0, properties=out)


def due_message(
    rec: fmt.MessageRecord, *, enqueue_ms: int, now_ms: int, roll: bool
) -> Message | None:
    """The message a due (or rolling) unit puts (the module docstring's "Out"); None
    when the record has no ``REAL_TOPIC`` / numeric ``REAL_QID`` to deliver to."""
    props = dict(rec.properties)
    props[TIMER_ENQUEUE_MS] = str(enqueue_ms)
    if roll:
        props[TIMER_ROLL_TIMES] = str(_int(props.get(TIMER_ROLL_TIMES), 0) + 1)
    props[TIMER_DEQUEUE_MS] = str(now_ms)
    if roll:
        topic, queue_id = rec.topic, rec.queue_id
    else:
        topic = props.get(PROPERTY_REAL_TOPIC, "")
        qid = props.get(PROPERTY_REAL_QUEUE_ID, "")
        if not topic or not qid.isdigit():
            return None
        queue_id = int(qid)
    return redelivery(rec, topic, queue_id, props)


DeliveryKey = tuple[str, str, int]
"""(UNIQ_KEY, TIMER_OUT_MS, roll count or -1 for the final delivery): what one put of
the timer service is, so a recovery can tell the puts a crash cut short from the ones
that happened (:mod:`mqstore.timer.service`)."""


def delivery_key(topic: str, properties: Mapping[str, str]) -> DeliveryKey | None:
    """The key of a record the timer service put (None: not one of its puts).

    >>> delivery_key("T", {"UNIQ_KEY": "A", "TIMER_OUT_MS": "5000", "TIMER_DEQUEUE_MS": "1"})
    ('A', '5000', -1)
    >>> delivery_key(TIMER_TOPIC, {"UNIQ_KEY": "A", "TIMER_OUT_MS": "5000",
    ...                            "TIMER_DEQUEUE_MS": "1", "TIMER_ROLL_TIMES": "2"})
    ('A', '5000', 2)
    >>> delivery_key("T", {"UNIQ_KEY": "A"}) is None
    True
    """
    if TIMER_DEQUEUE_MS not in properties or TIMER_OUT_MS not in properties:
        return None
    roll = _int(properties.get(TIMER_ROLL_TIMES), 0) if topic == TIMER_TOPIC else -1
    return (properties.get(UNIQ_KEY, ""), properties[TIMER_OUT_MS], roll)


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default
