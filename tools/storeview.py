"""A read-only view of a store directory, for commands that only look (``mqstore consume``).

Contract: opening and reading a :class:`StoreView` writes nothing. It takes no lock, runs
no recovery, reads no checkpoint and creates no file or directory, so it works beside a
broker that holds the store (it sees what the broker's dispatcher has written so far) and
on a store that was never shut down cleanly. A path without a ``commitlog/`` directory is
refused with :class:`~mqstore.errors.NotAStoreError` instead of becoming a new store.

Messages are found as a consumer finds them: through the topic's ConsumeQueue units
(``consumequeue/TOPIC/QUEUE/``), then the CommitLog record each unit points at. Sizes are
read from the files themselves (segment names are their base offsets, a ConsumeQueue
file's length is its unit capacity), so no configuration is needed. A unit whose record
is gone (expired segment) or does not decode (a torn tail that recovery would trim) is
skipped.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from pathlib import Path

from mqstore.closeable import Closeable
from mqstore.commitlog import format as fmt
from mqstore.consumequeue import format as cqfmt
from mqstore.consumequeue.filter import parse_subscription
from mqstore.errors import NotAStoreError
from mqstore.records import StoredMessage, stored_message

_NAME_DIGITS = 20
_UNITS_PER_READ = 256


def _numbered(folder: Path) -> list[tuple[int, Path]]:
    """The 20-digit-named files of ``folder`` as (number, path), sorted; [] if absent."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = [
        (int(e.name), Path(e.path))
        for e in entries
        if len(e.name) == _NAME_DIGITS and e.name.isdigit() and e.is_file()
    ]
    return sorted(out)


class StoreView(Closeable):
    """Read-only access to the messages of the store at ``root`` (see the module doc).

    Raises:
        NotAStoreError: ``root`` does not exist, is not a directory, or has no
            ``commitlog/`` directory.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        if not self.root.exists():
            raise NotAStoreError(f"{self.root}: no such directory")
        if not self.root.is_dir():
            raise NotAStoreError(f"{self.root} is a file, not a store directory")
        if not (self.root / "commitlog").is_dir():
            raise NotAStoreError(f"{self.root} holds no store (no commitlog/ directory)")
        self._fds: dict[Path, int] = {}
        self._segments: list[tuple[int, Path]] = []
        self._bases: list[int] = []
        self._end = 0  # physical offset just past the last segment known

    def close(self) -> None:
        """Close the files read so far."""
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)

    def topics(self) -> list[str]:
        """Topics that have a ConsumeQueue directory, sorted."""
        cq = self.root / "consumequeue"
        return sorted(p.name for p in cq.iterdir() if p.is_dir()) if cq.is_dir() else []

    def queue_ids(self, topic: str) -> list[int]:
        """Queue ids of ``topic`` that have a ConsumeQueue directory, sorted."""
        folder = self.root / "consumequeue" / topic
        if not folder.is_dir():
            return []
        return sorted(int(p.name) for p in folder.iterdir() if p.is_dir() and p.name.isdigit())

    def messages(
        self, topic: str, queue_id: int, offset: int = 0, subscription: str = "*"
    ) -> Iterator[StoredMessage]:
        """Messages of one queue from queue offset ``offset`` on, filtered by tags as a
        consumer's pull is (``"*"``, or ``"TagA || TagB"``). Each is the store's own
        :class:`StoredMessage`, as its pulls return it (body decompressed)."""
        sub = parse_subscription(subscription)
        for queue_offset, phys, size, code in self._units(topic, queue_id, max(0, offset)):
            if not sub.matches_code(code):
                continue
            m = self._message(phys, size, queue_offset)
            if m is not None and sub.matches_tags(m.tags):
                yield m

    def _units(self, topic: str, queue_id: int, start: int) -> Iterator[tuple[int, int, int, int]]:
        """(queue offset, physical offset, size, tags code) of the written units from
        queue offset ``start``; pre-fill units are skipped, a zero unit ends the queue."""
        files = _numbered(self.root / "consumequeue" / topic / str(queue_id))
        for i, (base, path) in enumerate(files):
            end = files[i + 1][0] if i + 1 < len(files) else None
            first = base // cqfmt.UNIT_SIZE
            if end is not None and start * cqfmt.UNIT_SIZE >= end:
                continue
            pos = max(0, start - first) * cqfmt.UNIT_SIZE
            with open(path, "rb") as f:
                f.seek(pos)
                while chunk := f.read(cqfmt.UNIT_SIZE * _UNITS_PER_READ):
                    whole = len(chunk) - len(chunk) % cqfmt.UNIT_SIZE
                    for k, (phys, size, code) in enumerate(cqfmt.iter_units(chunk[:whole])):
                        if size == 0:
                            return
                        unit = cqfmt.CqUnit(phys, size, code)
                        if not unit.is_blank:
                            yield first + (pos // cqfmt.UNIT_SIZE) + k, phys, size, code
                    pos += whole
                    if whole < len(chunk):
                        return

    def _message(self, phys: int, size: int, queue_offset: int) -> StoredMessage | None:
        """The record at physical offset ``phys``, or None when it is gone or torn."""
        found = self._segment_of(phys)
        if found is None:
            return None
        base, path = found
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, os.O_RDONLY)
        data = os.pread(fd, size, phys - base)
        info = fmt.scan(data, 0, len(data))
        if not isinstance(info, fmt.RecordInfo):
            return None
        return stored_message(info, data, queue_offset)

    def _segment_of(self, phys: int) -> tuple[int, Path] | None:
        """The segment (base offset, path) holding ``phys``; segments are listed again
        when ``phys`` lies past the last one known (the broker rolled a new one)."""
        if phys >= self._end:
            self._segments = _numbered(self.root / "commitlog")
            self._bases = [b for b, _ in self._segments]
            last = self._segments[-1] if self._segments else None
            self._end = last[0] + last[1].stat().st_size if last is not None else 0
        i = bisect.bisect_right(self._bases, phys) - 1
        return self._segments[i] if i >= 0 else None
