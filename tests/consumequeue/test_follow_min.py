"""ConsumeQueue.follow_min: a follower's minimum is never left at the maximum while a
unit at or past the CommitLog's start is readable."""

from __future__ import annotations

from pathlib import Path

from mqstore.consumequeue.queue import ConsumeQueue

UNITS_PER_FILE = 10


def written_queue(root: Path, n: int) -> ConsumeQueue:
    """A queue of ``n`` units, unit i pointing at CommitLog offset 100 * i."""
    cq = ConsumeQueue(root / "T" / "0", "T", 0, UNITS_PER_FILE * 20)
    for i in range(n):
        assert cq.put(100 * i, 100, 0, i)
    return cq


def test_minimum_is_the_first_unit_at_or_past_the_log_start(tmp_path: Path) -> None:
    cq = written_queue(tmp_path, 35)
    cq.follow_min(1_700)
    assert cq.min_offset == 17


def test_minimum_search_meeting_an_unreadable_file_scans_unit_by_unit(
    tmp_path: Path,
) -> None:
    cq = written_queue(tmp_path, 50)
    # The file holding units 20-29 closed under the search (as one another process
    # deleted would be, once let go of): the binary search probes it, takes its
    # units for "below", and would answer 30 instead of 10.
    cq.segments.files[2].close()
    cq.follow_min(1_000)
    assert cq.min_offset == 10


def test_minimum_is_the_maximum_when_every_unit_points_below_the_log_start(
    tmp_path: Path,
) -> None:
    cq = written_queue(tmp_path, 35)
    cq.follow_min(10_000)
    assert cq.min_offset == cq.max_offset == 35
