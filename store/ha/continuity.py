"""Slave side: the master's bytes must continue our log, and are appended whole records at a time.

Two jobs, one walk over the record headers of the incoming stream.

**Divergence.** The protocol (Rule 5) guarantees frames arrive at the slave's end
offset. It cannot see *content*: a slave whose log was written elsewhere (a former
master, a wrong directory) may end at an offset the master also has, yet in the middle
of one of the master's records. Appending there would splice two logs into garbage.
So every record start the stream crosses must really be one:

* ``[size][BLANK magic]`` with ``size`` = the bytes left in the file: the rest of the
  file is padding and the next record is at the next file boundary;
* ``[size][V1|V2 magic]`` with a plausible size that fits the file, and the record's
  PHYSICALOFFSET field equal to where it sits. RocketMQ writes that field into every
  record, so two different logs almost never agree on it at the same position.

**Whole records.** Frames are cut every 32 KiB, not at record ends. Appending a frame
as it comes would leave the slave's log ending inside a record most of the time, and
everything that reads the log up to its end (the ConsumeQueue dispatcher, recovery
after a crash) would meet a torn record. So bytes are handed out for appending only up
to the end of the last *complete* record (a blank counts with its padding); the rest
waits for the next frame. The slave's max offset, and so its report, is always a
record boundary; a record is acknowledged only once all of it is appended.

Worked example (file size 4096): the slave recovered to 1000, a record boundary of
its own log. If the master's log has a record at 980 (size 172), the master's bytes at
1000 are inside it: the first frame's first eight bytes are not ``[size][magic]`` and
:class:`DivergenceError` is raised before anything is appended. If instead the master
has records at 1000 (size 300) and 1300 (size 300) and the frame is [1000, 1400), the
first 300 bytes are handed out and 100 wait for the frame that completes record 1300.

What it cannot catch: two logs with records of the same sizes at the same offsets but
different contents (say, the same producer run twice). Only a content hash exchange
(RocketMQ 5's epochs) could, and the 4.9 wire format has none.
"""

from __future__ import annotations

import struct

from mqstore.commitlog import format as fmt
from mqstore.errors import StoreError

_SIZE_MAGIC = struct.Struct(">ii")
_PHYS = struct.Struct(">q")
_HEADER_NEEDED = fmt.PHYSICAL_OFFSET_POS + _PHYS.size
_RECORD_MAGICS = frozenset((fmt.MAGIC_V1, fmt.MAGIC_V2))


class DivergenceError(StoreError):
    """The master's log and this slave's disagree; replication stops rather than corrupt data."""


class LogContinuity:
    """Checks incoming bytes against the record layout and releases whole records.

    Args:
        file_size: the commitlog file size.
        start: the slave log's end, a record boundary (as after recovery); None for an
            empty log, whose first frame starts a file.

    Not thread-safe: the slave's single replication thread owns it.
    """

    def __init__(self, file_size: int, start: int | None) -> None:
        self._file_size = file_size
        self._start = start
        self._pending = b""  # bytes from self._start on: an incomplete record

    @property
    def start(self) -> int | None:
        """Where the next released bytes go: the end of what was released so far."""
        return self._start

    @property
    def pending(self) -> int:
        """Bytes received but held back (an incomplete record)."""
        return len(self._pending)

    def reset(self, start: int | None) -> None:
        """Drop held-back bytes and restart at ``start`` (a new session resumes there)."""
        self._start = start
        self._pending = b""

    def feed(self, offset: int, payload: bytes) -> tuple[int, memoryview]:
        """Take the frame ``payload`` at ``offset``; return ``(at, data)`` ready to append.

        ``data`` (possibly empty) is every complete record now available, starting at
        ``at``; it lies in one commitlog file (frames and records never cross one).

        Raises:
            ValueError: ``offset`` does not continue what was fed before.
            DivergenceError: a record start holds something that is not that record.
        """
        if self._start is None:
            self._start = offset
        base = self._start
        if offset != base + len(self._pending):
            raise ValueError(
                f"frame at {offset} does not continue the stream at {base + len(self._pending)}"
            )
        data = self._pending + payload if self._pending else payload
        pos = self._complete_prefix(base, data)
        view = memoryview(data)
        self._pending = bytes(view[pos:])
        self._start = base + pos
        return base, view[:pos]

    def _complete_prefix(self, base: int, data: bytes) -> int:
        """Length of the longest prefix of ``data`` (at ``base``) made of whole records."""
        fs = self._file_size
        n = len(data)
        pos = 0
        while pos < n:
            at = base + pos
            left = fs - at % fs
            if left < fmt.END_FILE_MIN_BLANK_LENGTH:  # no room for even a blank: padding
                if pos + left > n:
                    return pos
                pos += left
                continue
            if pos + _SIZE_MAGIC.size > n:
                return pos
            size, magic = _SIZE_MAGIC.unpack_from(data, pos)
            if magic == fmt.BLANK_MAGIC and size == left:
                if pos + left > n:
                    return pos
                pos += left
                continue
            if magic not in _RECORD_MAGICS or not fmt.MIN_RECORD_SIZE <= size <= left:
                raise DivergenceError(
                    f"diverging data: the master's bytes at offset {at} are not a record "
                    f"(size {size}, magic {magic & 0xFFFFFFFF:#010x}) but the slave's log has a "
                    "record boundary there: the two logs differ before this offset"
                )
            if pos + _HEADER_NEEDED > n:
                return pos
            (phys,) = _PHYS.unpack_from(data, pos + fmt.PHYSICAL_OFFSET_POS)
            if phys != at:
                raise DivergenceError(
                    f"diverging data: the master's record at offset {at} says it was written "
                    f"at {phys}: the slave's log and the master's differ before this offset"
                )
            if pos + size > n:
                return pos
            pos += size
        return pos


__all__ = ["DivergenceError", "LogContinuity"]
