"""Slave-side check that the master's bytes continue the slave's own log.

The protocol (Rule 5) guarantees frames arrive at the slave's end offset. It cannot see
*content*: a slave whose log was written elsewhere (a former master, a wrong directory)
may end at an offset the master also has, yet in the middle of one of the master's
records. Appending there would splice two logs into garbage that recovery later cuts
off silently. So the slave walks the record headers as the stream passes and checks,
before each append, that every record start the stream crosses really is one:

* ``[size][BLANK magic]`` with ``size`` = the bytes left in the file: the next record
  is at the next file boundary (the rest of the file is padding);
* ``[size][V1|V2 magic]`` with a plausible size that fits the file, and the record's
  PHYSICALOFFSET field equal to where it sits. RocketMQ writes that field into every
  record, so two different logs almost never agree on it at the same position.

Worked example (file size 4096): the slave recovered to 1000, a record boundary of
its own log. The master's log has a record at 980 (size 172), so the master's bytes
at 1000 are in the middle of that record: the first frame's first eight bytes are not
``[size][magic]`` and :class:`DivergenceError` is raised before anything is appended.

What it cannot catch: two logs with records of the same sizes at the same offsets but
different contents (say, the same producer run twice). Only a content hash exchange
(RocketMQ 5's epochs) could, and the 4.9 wire format has none.
"""

from __future__ import annotations

import struct

from store.commitlog import format as fmt
from store.errors import StoreError

_SIZE_MAGIC = struct.Struct(">ii")
_PHYS = struct.Struct(">q")
_HEADER_NEEDED = fmt.PHYSICAL_OFFSET_POS + _PHYS.size
_RECORD_MAGICS = frozenset((fmt.MAGIC_V1, fmt.MAGIC_V2))


class DivergenceError(StoreError):
    """The master's log and this slave's disagree; replication stops rather than corrupt data."""


class LogContinuity:
    """Tracks where the next record starts in the slave's log and checks incoming bytes.

    Args:
        file_size: the commitlog file size.
        next_record: where the next record starts; the slave's max offset after
            recovery (a record boundary). None for an empty log: the first frame's
            offset (a file start) is taken as a record start.

    Not thread-safe: the slave's single replication thread owns it.
    """

    def __init__(self, file_size: int, next_record: int | None) -> None:
        self._file_size = file_size
        self._next = next_record
        self._carry = b""  # bytes of a record header cut by the end of the last payload

    @property
    def next_record(self) -> int | None:
        """Where the next record header is expected (None before any data)."""
        return self._next

    def check(self, offset: int, payload: bytes) -> None:
        """Check the record starts inside ``payload`` (which will be appended at ``offset``).

        Call before appending; on success the state moves past ``payload``.

        Raises:
            DivergenceError: a record start holds something that is not a record.
        """
        if self._next is None:
            self._next = offset
        data = self._carry + payload if self._carry else payload
        base = offset - len(self._carry)
        pos = self._next - base
        fs = self._file_size
        while pos < len(data):
            at = base + pos
            left = fs - at % fs
            if left < fmt.END_FILE_MIN_BLANK_LENGTH:  # no room for even a blank: padding
                pos += left
                continue
            if pos + _SIZE_MAGIC.size > len(data):
                break
            size, magic = _SIZE_MAGIC.unpack_from(data, pos)
            if magic == fmt.BLANK_MAGIC and size == left:
                pos += left
                continue
            if magic not in _RECORD_MAGICS or not fmt.MIN_RECORD_SIZE <= size <= left:
                raise DivergenceError(
                    f"diverging data: the master's bytes at offset {at} are not a record "
                    f"(size {size}, magic {magic & 0xFFFFFFFF:#010x}) but the slave's log has a "
                    "record boundary there: the two logs differ before this offset"
                )
            if pos + _HEADER_NEEDED > len(data):
                break
            (phys,) = _PHYS.unpack_from(data, pos + fmt.PHYSICAL_OFFSET_POS)
            if phys != at:
                raise DivergenceError(
                    f"diverging data: the master's record at offset {at} says it was written "
                    f"at {phys}: the slave's log and the master's differ before this offset"
                )
            pos += size
        self._next = base + pos
        end = offset + len(payload)
        self._carry = bytes(data[pos:]) if self._next < end else b""


__all__ = ["DivergenceError", "LogContinuity"]
