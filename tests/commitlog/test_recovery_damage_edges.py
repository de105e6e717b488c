"""``is_damage`` at its edges: the shortest zero run that counts as a lost sector, and
a bad range that no mapped segment covers in full (recovery's damage judgement,
``mqstore.commitlog.recovery``; the module docstring has the rules).

Each case is a real segment file whose bad range holds non-zero bytes except where the
case puts zeros, judged after an unclean shutdown whose checkpoint says nothing in the
range was synced (so only the bytes decide)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.commitlog.recovery import SECTOR, KeepRule, is_damage
from mqstore.commitlog.segments import Segments

SIZE = 4 * SECTOR
NOT_SYNCED = KeepRule(flushed_timestamp=0, clean_shutdown=False)
"""Nothing was synced: the record after the range does not vouch for it."""
LATER = 1_700_000_000_000
"""The store timestamp of the good record after each range."""


@pytest.fixture
def segments(tmp_path: Path) -> Iterator[Segments]:
    segs = Segments(tmp_path, SIZE)
    for start in range(0, 3 * SIZE, SIZE):
        segs.create(start).view[:] = b"\xee" * SIZE  # damage everywhere: no zero byte
    yield segs
    segs.close()


def _zero(segs: Segments, start: int, end: int) -> None:
    mf = segs.find(start)
    assert mf is not None
    rel = start - mf.file_from_offset
    mf.view[rel : rel + end - start] = bytes(end - start)


def test_bytes_without_a_zero_run_are_damage(segments: Segments) -> None:
    assert is_damage(segments, 100, 2 * SECTOR + 4, LATER, NOT_SYNCED)


def test_a_zero_run_of_four_bytes_at_the_ranges_end_is_a_lost_sector(
    segments: Segments,
) -> None:
    end = 2 * SECTOR + 4  # the last sector's part of the range: 4 zero bytes
    _zero(segments, 2 * SECTOR, end)
    assert not is_damage(segments, 100, end, LATER, NOT_SYNCED)


def test_a_zero_run_of_three_bytes_at_the_ranges_end_is_damage(
    segments: Segments,
) -> None:
    end = 2 * SECTOR + 3  # 3 zeros: a record's TOTALSIZE may hold as many
    _zero(segments, 2 * SECTOR, end)
    assert is_damage(segments, 100, end, LATER, NOT_SYNCED)


def test_a_zero_run_of_four_bytes_at_the_ranges_start_is_a_lost_sector(
    segments: Segments,
) -> None:
    start = SECTOR - 4
    _zero(segments, start, SECTOR)
    assert not is_damage(segments, start, 3 * SECTOR, LATER, NOT_SYNCED)


def test_a_bad_range_over_a_segment_no_longer_mapped_is_not_damage(segments: Segments) -> None:
    """Nothing says the bytes of a segment that is not there were synced: such a range
    is a torn tail, however the bytes around it look."""
    del segments.files[1], segments._starts[1]  # the middle segment is gone from the mapping
    assert segments.find(SIZE) is None
    assert not is_damage(segments, 100, 2 * SIZE + 100, LATER, NOT_SYNCED)


def test_a_bad_range_over_a_missing_segment_is_damage_when_the_next_record_was_synced(
    segments: Segments,
) -> None:
    del segments.files[1], segments._starts[1]
    synced = KeepRule(flushed_timestamp=LATER + 1, clean_shutdown=False)
    assert is_damage(segments, 100, 2 * SIZE + 100, LATER, synced)
