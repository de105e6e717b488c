"""RocketMQ 5's timer files, byte for byte: timer-log units, wheel slots, the checkpoint.

Layouts (docs/timer.md §2; upstream ``store/timer/TimerLog.java``, ``TimerWheel.java``,
``Slot.java``, ``TimerCheckpoint.java``), all big-endian:

* **Timer-log unit**, :data:`UNIT_SIZE` = 52 bytes: size (int, 52), previous unit of
  the same slot (long, -1 for none), magic (int: :data:`MAGIC_DEFAULT`, plus
  :data:`MAGIC_ROLL` for a unit that only waits for the next round), write time (long,
  the enqueue's ``currWriteTimeMs``), delay (int, due time minus write time), CommitLog
  offset and size of the ``rmq_sys_wheel_timer`` record (long, int), Java
  ``String.hashCode`` of its real topic (int), reserved (long, 0). A file's tail too short
  for a unit plus :data:`MIN_BLANK_LEN` holds a blank: its length (int), 0 (long),
  :data:`BLANK_MAGIC` (int).
* **Wheel slot**, :data:`SLOT_SIZE` = 32 bytes: due time / precision (long), first and
  last unit position (long, long), count (int), magic (int). The wheel has
  ``2 * SLOTS_TOTAL`` slots (14 days of 1 s); a due time's slot is
  ``time / precision % (2 * SLOTS_TOTAL)``; a slot whose stored time differs is empty.
* **Checkpoint** (``config/timercheck``, one 4 KiB page): last read time, timer-log
  flushed position, timer-queue offset, master timer-queue offset, data-version state
  version, timestamp and counter (seven longs). mqstore adds two longs after them, which
  RocketMQ does not read: :data:`EXT_MAGIC` and the CommitLog offset from which a crash
  recovery looks for deliveries already made (:mod:`mqstore.timer.service`).

Pure: no I/O.
"""

from __future__ import annotations

import mmap
import struct
from typing import Final, NamedTuple

Buffer = bytes | bytearray | memoryview | mmap.mmap

UNIT_SIZE: Final = 52
MIN_BLANK_LEN: Final = 4 + 8 + 4
BLANK_MAGIC: Final = (0xBBCCDDEE ^ (1880681586 + 8)) - (1 << 32)
"""``TimerLog.BLANK_MAGIC_CODE`` (``0xBBCCDDEE ^ 1880681586 + 8`` as a Java int)."""
MAGIC_DEFAULT: Final = 1
MAGIC_ROLL: Final = 1 << 1
MAGIC_DELETE: Final = 1 << 2
SLOT_SIZE: Final = 32
SLOTS_TOTAL: Final = 7 * 24 * 3600
"""``TIMER_WHEEL_TTL_DAY * DAY_SECS``: the wheel file holds twice as many slots."""
WHEEL_BYTES: Final = SLOTS_TOTAL * 2 * SLOT_SIZE
CHECKPOINT_BYTES: Final = 4096
EXT_MAGIC: Final = 0x6D71_7374_5449_4D52  # "mqstTIMR"
NO_POS: Final = -1

_UNIT = struct.Struct(">iqiqiqiiq")
_SLOT = struct.Struct(">qqqii")
_CHECKPOINT = struct.Struct(">qqqqqqqqq")


class Unit(NamedTuple):
    """One timer-log unit."""

    prev_pos: int
    magic: int
    write_ms: int
    delay_ms: int
    offset_py: int
    size_py: int
    topic_hash: int = 0

    @property
    def due_ms(self) -> int:
        """The slot time the unit waits for (write time + delay)."""
        return self.write_ms + self.delay_ms

    @property
    def rolls(self) -> bool:
        """Whether the unit only waits for the next round (``MAGIC_ROLL``)."""
        return bool(self.magic & MAGIC_ROLL)


def encode_unit(u: Unit) -> bytes:
    """The 52 bytes of a unit.

    >>> len(encode_unit(Unit(-1, MAGIC_DEFAULT, 1000, 5000, 64, 200)))
    52
    """
    return _UNIT.pack(UNIT_SIZE, u.prev_pos, u.magic, u.write_ms, u.delay_ms, u.offset_py,
                      u.size_py, u.topic_hash, 0)  # fmt: skip


def decode_unit(buf: Buffer, pos: int = 0) -> Unit | None:
    """The unit at ``pos``; None for a blank, a wrong size or a bad magic (the end).

    >>> decode_unit(encode_unit(Unit(-1, 3, 1000, 5000, 64, 200, 7))).due_ms
    6000
    >>> decode_unit(bytes(52)) is None
    True
    """
    size, prev, magic, write, delay, off, sz, th, _ = _UNIT.unpack_from(buf, pos)
    if size != UNIT_SIZE or not magic_ok(magic) or magic == 0:
        return None
    return Unit(prev, magic, write, delay, off, sz, th)


def encode_blank(length: int) -> bytes:
    """The blank that fills a timer-log file's tail of ``length`` bytes (its first 16)."""
    return struct.pack(">iqi", length, 0, BLANK_MAGIC)


def magic_ok(magic: int) -> bool:
    """``TimerMessageStore.isMagicOK``: only the low four bits may be set."""
    return (magic | 0xF) == 0xF


class Slot(NamedTuple):
    """A wheel slot; ``time_ms`` is the due time it stands for."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int
    magic: int = 0


EMPTY_SLOT: Final = Slot(NO_POS, NO_POS, NO_POS, 0, 0)


def slot_index(time_ms: int, precision_ms: int) -> int:
    """``TimerWheel.getSlotIndex``.

    >>> slot_index(1_000, 1000), slot_index(2 * SLOTS_TOTAL * 1000 + 3_000, 1000)
    (1, 3)
    """
    return time_ms // precision_ms % (SLOTS_TOTAL * 2)


def encode_slot(s: Slot, precision_ms: int) -> bytes:
    """The 32 bytes of a slot (its time stored divided by the precision)."""
    return _SLOT.pack(s.time_ms // precision_ms, s.first_pos, s.last_pos, s.num, s.magic)


def decode_slot(buf: Buffer, pos: int, time_ms: int, precision_ms: int) -> Slot:
    """The slot at ``pos`` if it stands for ``time_ms``'s round, else :data:`EMPTY_SLOT`.

    >>> raw = encode_slot(Slot(5000, 52, 104, 2), 1000)
    >>> decode_slot(raw, 0, 5400, 1000), decode_slot(raw, 0, 6000, 1000) is EMPTY_SLOT
    (Slot(time_ms=5000, first_pos=52, last_pos=104, num=2, magic=0), True)
    """
    t, first, last, num, magic = _SLOT.unpack_from(buf, pos)
    if t != time_ms // precision_ms:
        return EMPTY_SLOT
    return Slot(t * precision_ms, first, last, num, magic)


class Checkpoint(NamedTuple):
    """``timercheck``'s fields; ``log_from`` -1 when the file has no mqstore extension."""

    last_read_ms: int = 0
    timer_log_flush_pos: int = 0
    queue_offset: int = 0
    master_queue_offset: int = 0
    state_version: int = 0
    version_timestamp: int = 0
    version_counter: int = 0
    log_from: int = -1


def encode_checkpoint(c: Checkpoint) -> bytes:
    """The checkpoint's bytes (72: RocketMQ's 56 and the extension)."""
    return _CHECKPOINT.pack(c.last_read_ms, c.timer_log_flush_pos, c.queue_offset,
                            c.master_queue_offset, c.state_version, c.version_timestamp,
                            c.version_counter, EXT_MAGIC, c.log_from)  # fmt: skip


def decode_checkpoint(buf: Buffer) -> Checkpoint:
    """The fields of a checkpoint page (RocketMQ's or ours).

    >>> cp = decode_checkpoint(encode_checkpoint(Checkpoint(5000, 52, 3, 3, log_from=640)))
    >>> cp.last_read_ms, cp.timer_log_flush_pos, cp.queue_offset, cp.log_from
    (5000, 52, 3, 640)
    """
    a, b, c, d, e, f, g, magic, log_from = _CHECKPOINT.unpack_from(buf, 0)
    return Checkpoint(a, b, c, d, e, f, g, log_from if magic == EXT_MAGIC else -1)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, as a signed int).

    >>> java_string_hash("TopicTest"), java_string_hash("")
    (-1902610879, 0)
    """
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
