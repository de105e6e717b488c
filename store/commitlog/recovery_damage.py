"""The quarantine: CommitLog ranges recovery fenced off as damaged, kept across opens.

Recovery (``recovery_policy`` KEEP) finds damage only in the window it scans (the last
three segments after a clean close, from the checkpoint after a crash). Once a range
is fenced, the consume queues skip it for good, but a later open whose window has
moved on would not see it again. So the ranges found are added to ``damage.json`` in
the store's root, and what the store and ``mqstore audit`` report is that list:

* a range found again (the same bytes are still damaged) is kept once; ranges that
  overlap are merged (the first one's reason is kept);
* a range wholly below the log's first byte (its segments were deleted by cleanup)
  or at or past the recovered end (a later cut dropped it) is dropped.

The file is replaced atomically (written, synced, renamed, directory synced). An
unreadable or malformed file is logged and taken as empty: it is a report, and the
damage it listed is still fenced in the consume queues; the next recovery that meets
the bytes lists them again.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mqstore import _platform

log = logging.getLogger(__name__)

DAMAGE_FILE = "damage.json"
"""Name of the quarantine file in the store's root."""
_VERSION = 1


@dataclass(frozen=True, slots=True)
class DamagedRange:
    """Bytes of the log that hold no valid record, fenced off with valid records after.

    ``start`` is where the first bad record begins, ``end`` where the next record that
    checks out begins (log offsets). ``messages_lost`` counts the queue offsets missing
    between the records on either side, for the queues seen on both sides (a lower
    bound: a queue whose every message was inside is not seen).
    """

    start: int
    end: int
    reason: str
    messages_lost: int

    @property
    def size(self) -> int:
        """Bytes fenced off."""
        return self.end - self.start

    def __str__(self) -> str:
        return (
            f"[{self.start}, {self.end}) ({self.size} bytes, at least "
            f"{self.messages_lost} messages lost): {self.reason}"
        )


class Quarantine:
    """The fenced ranges of one store, sorted by start and disjoint, and their file.

    Read from any thread (:meth:`covers`, :attr:`ranges`); changed only by recovery,
    before the store serves anything.
    """

    __slots__ = ("_ranges", "_starts", "path")

    def __init__(self, path: Path, ranges: tuple[DamagedRange, ...] = ()) -> None:
        self.path = path
        self._ranges = _merged(ranges)
        self._starts = [r.start for r in self._ranges]

    @classmethod
    def load(cls, path: Path) -> Quarantine:
        """The quarantine recorded at ``path``; empty when there is no file, or (logged)
        when it cannot be read."""
        try:
            raw = path.read_text()
        except FileNotFoundError:
            return cls(path)
        except OSError as e:
            log.warning("damage list %s unreadable, taken as empty: %s", path, e)
            return cls(path)
        try:
            return cls(path, _parse(json.loads(raw)))
        except (ValueError, TypeError, KeyError) as e:
            log.warning("damage list %s malformed, taken as empty: %s", path, e)
            return cls(path)

    @property
    def ranges(self) -> tuple[DamagedRange, ...]:
        """The fenced ranges, by start."""
        return self._ranges

    def covers(self, offset: int) -> bool:
        """Whether log ``offset`` lies inside a fenced range."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return i >= 0 and offset < self._ranges[i].end

    def update(self, found: tuple[DamagedRange, ...], *, min_offset: int, end: int) -> bool:
        """Add the ranges one recovery ``found``, drop those below ``min_offset`` or at
        or past the log's ``end``; return whether the list changed."""
        kept = [
            DamagedRange(r.start, min(r.end, end), r.reason, r.messages_lost)
            for r in (*self._ranges, *found)
            if r.end > min_offset and r.start < end
        ]
        ranges = _merged(tuple(kept))
        if ranges == self._ranges:
            return False
        self._ranges = ranges
        self._starts = [r.start for r in ranges]
        return True

    def save(self) -> None:
        """Write the list durably (the file is removed when the list is empty).

        Raises:
            OSError: the file could not be written or synced.
        """
        if not self._ranges:
            if self.path.exists():
                self.path.unlink()
                _platform.fsync_dir(self.path.parent)
            return
        doc = {
            "version": _VERSION,
            "ranges": [asdict(r) for r in self._ranges],
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, (json.dumps(doc, indent=1) + "\n").encode())
            _platform.fdatasync(fd, what=str(tmp))
        finally:
            os.close(fd)
        tmp.replace(self.path)
        _platform.fsync_dir(self.path.parent)


def read_ranges(root: Path) -> tuple[DamagedRange, ...]:
    """The ranges recorded in ``root``'s quarantine file (empty if none), for readers
    that do not open the store (``mqstore audit``)."""
    return Quarantine.load(root / DAMAGE_FILE).ranges


def _parse(doc: Any) -> tuple[DamagedRange, ...]:
    if not isinstance(doc, dict) or doc.get("version") != _VERSION:
        raise ValueError("not a version 1 damage list")
    out = []
    for r in doc["ranges"]:
        start, end, lost = int(r["start"]), int(r["end"]), int(r["messages_lost"])
        if not 0 <= start < end:
            raise ValueError(f"range [{start}, {end}) is empty or negative")
        out.append(DamagedRange(start, end, str(r["reason"]), lost))
    return tuple(out)


def _merged(ranges: tuple[DamagedRange, ...]) -> tuple[DamagedRange, ...]:
    """Sorted by start, overlapping ranges merged (the earlier one's reason kept)."""
    out: list[DamagedRange] = []
    for r in sorted(ranges, key=lambda r: (r.start, r.end)):
        if out and r.start < out[-1].end:
            p = out[-1]
            out[-1] = DamagedRange(
                p.start, max(p.end, r.end), p.reason, max(p.messages_lost, r.messages_lost)
            )
        else:
            out.append(r)
    return tuple(out)
