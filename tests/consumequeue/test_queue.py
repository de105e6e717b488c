"""ConsumeQueue units over small files: write rules, offsets, recovery, truncation, search."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.consumequeue.format import BLANK_UNIT, UNIT_SIZE, encode_unit
from mqstore.consumequeue.queue import ConsumeQueue
from mqstore.consumequeue.search import BoundaryType, offset_by_time

UNITS = 10
FILE = UNITS * UNIT_SIZE


def make(tmp_path: Path, name: str = "q") -> ConsumeQueue:
    return ConsumeQueue(tmp_path / name, "T", 0, FILE)


def fill(cq: ConsumeQueue, first: int, count: int, size: int = 100) -> None:
    """Units first..first+count-1 pointing at consecutive records of ``size`` bytes."""
    for q in range(first, first + count):
        assert cq.put(q * size, size, q, q)


def reopen(cq: ConsumeQueue) -> ConsumeQueue:
    cq.close()
    again = ConsumeQueue(cq.directory, cq.topic, cq.queue_id, cq.file_size)
    again.load()
    again.recover()
    return again


def raw(cq: ConsumeQueue) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(cq.directory.iterdir()))


def test_new_queue_has_no_units(tmp_path: Path):
    cq = make(tmp_path)
    assert (cq.min_offset, cq.max_offset) == (0, 0)
    assert cq.units_from(0) is None
    assert not (tmp_path / "q").exists()  # no directory until the first unit


def test_unit_n_sits_at_byte_n_times_20_across_files(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 25)
    assert cq.max_offset == 25
    assert sorted(p.name for p in cq.directory.iterdir()) == [
        f"{0:020d}",
        f"{FILE:020d}",
        f"{2 * FILE:020d}",
    ]
    data = raw(cq)
    assert data[13 * 20 : 14 * 20] == encode_unit(1300, 100, 13)
    assert cq.unit_at(13) == (1300, 100, 13)


def test_put_of_an_already_present_unit_is_skipped(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 5)
    before = raw(cq)
    assert not cq.put(300, 100, 3, 3)  # offset + size <= max physic offset
    assert cq.max_offset == 5 and raw(cq) == before


def test_put_below_the_write_position_is_skipped_even_with_a_larger_physical_offset(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 5)
    assert not cq.put(10_000, 100, 0, 2)  # "build repeatedly": expected < current
    assert cq.max_offset == 5


def test_queue_starting_past_zero_is_pre_filled_with_blank_units(tmp_path: Path):
    cq = make(tmp_path)
    assert cq.put(5000, 100, 7, 13)  # file 10..19, position 3
    assert [p.name for p in cq.directory.iterdir()] == [f"{FILE:020d}"]
    data = (cq.directory / f"{FILE:020d}").read_bytes()
    assert data[:60] == BLANK_UNIT * 3
    assert data[60:80] == encode_unit(5000, 100, 7)
    assert (cq.min_offset, cq.max_offset) == (13, 14)


def test_blank_unit_bytes_are_rocketmq_s(tmp_path: Path):
    assert BLANK_UNIT.hex() == "00000000000000007fffffff0000000000000000"


def test_a_gap_is_padded_with_blank_units_so_offsets_stay_in_place(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 3)
    assert cq.put(900, 100, 9, 8)
    assert cq.max_offset == 9
    assert cq.unit_at(8) == (900, 100, 9)
    assert raw(cq)[3 * 20 : 8 * 20] == BLANK_UNIT * 5


def test_blank_units_do_not_count_as_the_max_physical_offset(tmp_path: Path):
    cq = make(tmp_path)
    cq.put(5000, 100, 7, 13)
    again = reopen(cq)
    assert again.max_physic_offset == 5100
    assert again.put(5100, 50, 0, 14)


def test_recovery_stops_at_the_first_invalid_unit_and_zeroes_the_rest(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 25)
    cq.close()
    path = cq.directory / f"{2 * FILE:020d}"
    data = bytearray(path.read_bytes())
    data[2 * 20 : 3 * 20] = bytes(20)  # unit 22 lost: 23 and 24 after it are dirty
    path.write_bytes(bytes(data))
    again = ConsumeQueue(cq.directory, "T", 0, FILE)
    again.load()
    assert again.recover() == 22 * 20
    assert again.max_offset == 22
    assert again.max_physic_offset == 2200
    assert path.read_bytes()[2 * 20 :] == bytes(FILE - 40)


def test_recovery_deletes_files_after_the_end(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 12)
    cq.close()
    path = cq.directory / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[9 * 20 : 10 * 20] = bytes(20)
    path.write_bytes(bytes(data))
    again = ConsumeQueue(cq.directory, "T", 0, FILE)
    again.load()
    again.recover()
    assert again.max_offset == 9
    assert [p.name for p in cq.directory.iterdir()] == [f"{0:020d}"]


def test_recovery_trusts_files_before_the_third_to_last(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 45)  # 5 files
    cq.close()
    first = cq.directory / f"{0:020d}"
    first.write_bytes(bytes(FILE))  # damage that a scan from the 3rd-to-last never sees
    again = ConsumeQueue(cq.directory, "T", 0, FILE)
    again.load()
    again.recover()
    assert again.max_offset == 45


def test_reopen_after_a_clean_close_keeps_every_unit(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 17)
    cq.flush(0)
    again = reopen(cq)
    assert again.max_offset == 17
    assert [again.unit_at(q) for q in range(17)] == [(q * 100, 100, q) for q in range(17)]


def test_truncate_dirty_drops_units_at_and_past_the_physical_offset(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 25)
    cq.truncate_dirty(1250)  # units 0..12 end at or before 1300; 13.. start >= 1300
    assert cq.max_offset == 13
    assert cq.max_physic_offset == 1300
    assert [p.name for p in sorted(cq.directory.iterdir())] == [f"{0:020d}", f"{FILE:020d}"]
    assert cq.put(1300, 100, 99, 13)  # the next unit goes where the cut was


def test_truncate_dirty_at_a_file_boundary_keeps_an_empty_file(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 25)
    cq.truncate_dirty(2000)
    assert cq.max_offset == 20
    assert cq.put(2000, 100, 0, 20)
    assert cq.unit_at(20) == (2000, 100, 0)


def test_correct_min_offset_finds_the_first_unit_still_in_the_log(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 25)
    cq.correct_min_offset(1234)
    assert cq.min_offset == 13  # unit 12 starts at 1200 < 1234, unit 13 at 1300
    cq.correct_min_offset(1300)
    assert cq.min_offset == 13


def test_correct_min_offset_past_every_unit_makes_the_queue_empty(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 5)
    cq.correct_min_offset(10_000)
    assert cq.min_offset == cq.max_offset == 5


def test_correct_min_offset_skips_blank_units(tmp_path: Path):
    cq = make(tmp_path)
    cq.put(5000, 100, 7, 13)
    cq.min_logic_offset = FILE  # as after a reload: the file start
    cq.correct_min_offset(0)
    assert cq.min_offset == 13


def test_delete_expired_keeps_files_with_live_units_and_the_last(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 35)  # 4 files; file k's last unit points at (10k+9)*100
    assert cq.delete_expired(1500) == 1  # file 0's last unit 900 < 1500; file 1's 1900 is not
    assert cq.min_offset == 15
    assert cq.delete_expired(2000) == 1  # file 1: 1900 < 2000
    assert cq.min_offset == 20
    assert cq.delete_expired(10_000) == 1  # file 2; file 3 is the last
    assert cq.min_offset == cq.max_offset == 35
    assert [p.name for p in cq.directory.iterdir()] == [f"{3 * FILE:020d}"]


def test_units_from_returns_only_the_file_holding_the_offset(tmp_path: Path):
    cq = make(tmp_path)
    fill(cq, 0, 25)
    buf = cq.units_from(7)
    assert buf is not None and len(buf) == 3 * UNIT_SIZE
    buf = cq.units_from(22)
    assert buf is not None and len(buf) == 3 * UNIT_SIZE
    assert cq.units_from(25) is None
    assert cq.roll_next_file(7) == 10


# --------------------------------------------------------------- offset_by_time

TIMES = [100, 200, 200, 200, 300, 400, 400, 500]


@pytest.fixture
def timed(tmp_path: Path) -> ConsumeQueue:
    cq = make(tmp_path)
    fill(cq, 0, len(TIMES))
    return cq


def time_of(phys: int, _size: int) -> int:
    return TIMES[phys // 100]


@pytest.mark.parametrize(
    ("ts", "lower", "upper"),
    [
        (50, 0, 0),  # before everything
        (100, 0, 0),
        (150, 1, 0),  # between: lower = next after, upper = last before
        (200, 1, 3),  # a run of equal times: first / last of the run
        (250, 4, 3),
        (400, 5, 6),
        (500, 7, 7),
        (600, 8, 7),  # after everything: lower = max offset
    ],
)
def test_offset_by_time_edges(timed: ConsumeQueue, ts: int, lower: int, upper: int):
    assert offset_by_time(timed, ts, time_of, BoundaryType.LOWER) == lower
    assert offset_by_time(timed, ts, time_of, BoundaryType.UPPER) == upper


def test_offset_by_time_of_an_empty_queue_is_zero(tmp_path: Path):
    assert offset_by_time(make(tmp_path), 123, time_of) == 0


def test_offset_by_time_treats_units_without_their_record_as_oldest(timed: ConsumeQueue):
    def partly_gone(phys: int, size: int) -> int | None:
        return None if phys < 300 else time_of(phys, size)

    assert offset_by_time(timed, 250, partly_gone) == 4
