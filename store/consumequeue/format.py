"""The ConsumeQueue unit format: the ONE place that knows its byte layout.

A consume queue for (topic, queueId) lives in ``consumequeue/{topic}/{queueId}/`` as
files of ``UNITS_PER_FILE`` (300,000) units, named by their first *logical byte*
offset (queue offset x 20) as a 20-digit decimal, so names are multiples of
6,000,000. Each unit is 20 bytes, big-endian::

    off  size  field
    0    8     commitlog offset   physical offset of the record
    8    4     size               TOTALSIZE of the record
    12   8     tags code          Java String.hashCode(TAGS) sign-extended; for
                                  SCHEDULE_TOPIC_XXXX the deliver timestamp (ms)

A *blank* unit ``(0, 0x7FFFFFFF, 0)`` pre-fills a queue's first file up to its first
real unit when the queue starts past offset 0. An all-zero unit is never-written
space: ``size == 0`` ends a scan.

Worked example: the record at physical offset 0 of size 209 tagged ``TagA`` gives
``00 00 00 00 00 00 00 00 | 00 00 00 d1 | 00 00 00 00 00 27 a8 07``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np

UNIT_SIZE: Final = 20
UNITS_PER_FILE: Final = 300_000
FILE_SIZE: Final = UNIT_SIZE * UNITS_PER_FILE
MSG_TAG_OFFSET_INDEX: Final = 12
BLANK_SIZE: Final = 0x7FFFFFFF

_UNIT: Final = struct.Struct(">qiq")
pack_unit: Final = _UNIT.pack
"""``pack_unit(physical_offset, size, tags_code)``: :func:`encode_unit` without its
call frame (the dispatcher's per-unit path)."""


@dataclass(frozen=True, slots=True)
class CqUnit:
    """One consume-queue unit."""

    physical_offset: int
    size: int
    tags_code: int

    @property
    def is_blank(self) -> bool:
        """A pre-fill unit: counts as valid but points at no message."""
        return self.physical_offset == 0 and self.size == BLANK_SIZE and self.tags_code == 0

    @property
    def is_valid(self) -> bool:
        """RocketMQ's recovery test: offset >= 0 and size > 0 (blank units included)."""
        return self.physical_offset >= 0 and self.size > 0


def encode_unit(physical_offset: int, size: int, tags_code: int) -> bytes:
    """Encode one 20-byte unit.

    >>> encode_unit(0, 209, 2598919).hex()
    '0000000000000000000000d1000000000027a807'
    """
    return _UNIT.pack(physical_offset, size, tags_code)


BLANK_UNIT: Final = _UNIT.pack(0, BLANK_SIZE, 0)

UNITS_LOW_TAGS: Final = np.dtype(
    [("phys", ">i8"), ("size", ">i4"), ("tags_high", ">i4"), ("tags_low", ">i4")]
)
"""A unit with its tags code's low 32 bits apart (the tag-code test reads only those)."""


def decode_unit(buf: bytes | bytearray | memoryview, pos: int = 0) -> CqUnit:
    """Decode the unit at ``buf[pos:pos+20]``."""
    return CqUnit(*_UNIT.unpack_from(buf, pos))


def unpack_unit(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int, int]:
    """(physical offset, size, tags code) without building an object: for hot scans."""
    return _UNIT.unpack_from(buf, pos)


def is_blank(phys: int, size: int, tags: int) -> bool:
    """Whether a unit's fields are the blank (pre-fill) unit's."""
    return phys == 0 and size == BLANK_SIZE and tags == 0


def iter_units(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, int, int]]:
    """All units of a buffer whose length is a multiple of 20, as tuples."""
    return _UNIT.iter_unpack(buf)


def file_name_for(queue_offset: int) -> str:
    """Name of the file holding ``queue_offset``: its first logical byte offset, 20 digits."""
    return f"{(queue_offset * UNIT_SIZE) // FILE_SIZE * FILE_SIZE:020d}"
