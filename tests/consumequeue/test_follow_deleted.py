"""A reader following queue files another process writes and deletes: files the
writer deletes between the reader's listing and its open never leave the reader
holding nothing for good."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mqstore.consumequeue.queue import ConsumeQueue
from mqstore.consumequeue.store import ConsumeQueueStore

UNITS_PER_FILE = 10
FILE_SIZE = UNITS_PER_FILE * 20
DISPATCHED = 1 << 40
"""Far past every unit's record: every unit written counts as dispatched."""


def written_queue(root: Path, n: int) -> ConsumeQueue:
    """Queue T-0 of ``n`` units, unit i pointing at CommitLog offset 100 * i."""
    cq = ConsumeQueue(root / "T" / "0", "T", 0, FILE_SIZE)
    for i in range(n):
        assert cq.put(100 * i, 100, 0, i)
    cq.flush(0)
    return cq


def expire_first_files(directory: Path, count: int) -> list[str]:
    """Delete the ``count`` oldest files as the writer's cleanup does; return the
    listing taken just before (what a reader racing the cleanup saw)."""
    listed = sorted(os.listdir(directory))
    for name in listed[:count]:
        os.unlink(directory / name)
    return listed


def stale_listing(
    monkeypatch: pytest.MonkeyPatch, directory: Path, listed: list[str], times: int
) -> None:
    """The next ``times`` listings of ``directory`` return ``listed`` (taken before
    files were deleted); later ones read the directory again."""
    real: Callable[[Path], list[str]] = os.listdir
    left = [times]

    def listdir(path: Path) -> list[str]:
        if Path(path) == directory and left[0] > 0:
            left[0] -= 1
            return list(listed)
        return real(path)

    monkeypatch.setattr(os, "listdir", listdir)


def expired_queue(root: Path) -> tuple[Path, list[str]]:
    """Queue T-0 of 35 units whose first two files the writer deleted: (its directory,
    the listing taken just before)."""
    written_queue(root, 35)
    directory = root / "T" / "0"
    return directory, expire_first_files(directory, 2)


def test_a_reader_holding_no_file_starts_at_the_first_file_left_after_a_listed_one_is_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, listed = expired_queue(tmp_path)
    reader = ConsumeQueue(directory, "T", 0, FILE_SIZE)
    stale_listing(monkeypatch, directory, listed, times=1)
    reader.follow(DISPATCHED)
    assert reader.segments.min_offset == 2 * FILE_SIZE
    assert reader.max_offset == 35
    reader.follow_min(2_000)
    assert reader.min_offset == 20


def test_a_queue_found_with_every_listed_file_deleted_is_followed_at_the_next_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, listed = expired_queue(tmp_path)
    queues = ConsumeQueueStore(tmp_path, FILE_SIZE)
    queues.follow(lambda: DISPATCHED, lambda: 2_000)
    # Discovery and the first follow both list only the two files just deleted.
    stale_listing(monkeypatch, directory, listed[:2], times=2)
    first = queues.find("T", 0)
    assert first is not None
    assert first.max_offset == 0
    again = queues.find("T", 0)  # the writer's progress has not moved since
    assert again is first
    assert (again.min_offset, again.max_offset) == (20, 35)
