"""``ConsumeQueue.truncate_dirty`` (the cut before a crash restart re-dispatches) reads a
file's units as one array; it must cut exactly where the walk back unit by unit cuts,
and ask ``verify`` about the same units in the same order, on any queue: blank
pre-fill, expired head files, units that point anywhere (a torn or damaged tail)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.consumequeue.format import BLANK_SIZE, UNIT_SIZE, encode_unit, is_blank
from mqstore.consumequeue.queue import ConsumeQueue

UNITS = 7
FILE = UNITS * UNIT_SIZE

Unit = tuple[int, int, int]


def walked_back(
    cq: ConsumeQueue, physical_offset: int, fails: set[int], calls: list[int]
) -> tuple[int, bool]:
    """The reference: the walk back from the last unit, one ``unit_at`` at a time."""
    low = cq.segments.min_offset // UNIT_SIZE
    cut = cq.max_offset
    torn = False
    while cut > low:
        u = cq.unit_at(cut - 1)
        if u is None or is_blank(*u):
            break
        if u[0] < physical_offset:
            calls.append(cut - 1)
            if cut - 1 not in fails:
                break
            torn = True
        cut -= 1
    return cut, torn


unit_kinds = st.one_of(
    st.just("good"),
    st.just("good"),
    st.just("good"),
    st.just("blank"),
    st.tuples(
        st.integers(-(1 << 63), (1 << 63) - 1),
        st.integers(-(1 << 31), (1 << 31) - 1),
        st.integers(-(1 << 63), (1 << 63) - 1),
    ),
)


def build(directory: Path, kinds: list[object], expired_files: int) -> list[Unit]:
    """Write the queue's files: ``good`` units point at increasing offsets, ``blank``
    is the pre-fill unit, a tuple is written as it is (damage)."""
    units: list[Unit] = []
    phys = 0
    for k in kinds:
        if k == "good":
            units.append((phys, 100, 7))
            phys += 100
        elif k == "blank":
            units.append((0, BLANK_SIZE, 0))
        else:
            assert isinstance(k, tuple)
            units.append(k)
    directory.mkdir(parents=True)
    for f in range(expired_files, -(-len(units) // UNITS)):
        part = units[f * UNITS : (f + 1) * UNITS]
        data = b"".join(encode_unit(*u) for u in part)
        (directory / f"{f * FILE:020d}").write_bytes(data.ljust(FILE, b"\0"))
    return units


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kinds=st.lists(unit_kinds, min_size=1, max_size=40),
    expired_files=st.integers(0, 2),
    cut_at=st.integers(-100, 4500),
    fails=st.sets(st.integers(0, 40), max_size=12),
    with_verify=st.booleans(),
)
def test_cut_and_verify_calls_are_those_of_the_walk_unit_by_unit(
    tmp_path_factory: pytest.TempPathFactory,
    kinds: list[object],
    expired_files: int,
    cut_at: int,
    fails: set[int],
    with_verify: bool,
) -> None:
    directory = tmp_path_factory.mktemp("q") / "T" / "0"
    build(directory, kinds, expired_files)
    cq = ConsumeQueue(directory, "T", 0, FILE)
    cq.load()
    cq.recover()
    top = cq.max_offset
    want_calls: list[int] = []
    fail_set = fails if with_verify else set()
    want_cut, want_torn = walked_back(cq, cut_at, fail_set, want_calls)

    got_calls: list[int] = []

    def verify(q: ConsumeQueue, queue_offset: int, unit: Unit) -> bool:
        assert q is cq and unit == cq.unit_at(queue_offset)
        got_calls.append(queue_offset)
        return queue_offset not in fails

    replay = cq.truncate_dirty(cut_at, verify if with_verify else None)
    if not with_verify:
        want_calls = []
    assert got_calls == want_calls
    assert cq.max_offset == min(want_cut, top)
    assert replay == (cq.max_physic_offset if want_torn else None)
    cq.close()


def test_cut_many_files_back_keeps_the_units_before_it(tmp_path: Path) -> None:
    """The crash-restart case: the cut is files before the end (every unit after it
    walked over), the units before it stay as they were."""
    directory = tmp_path / "T" / "0"
    units = build(directory, ["good"] * (UNITS * 30 + 3), 0)
    cq = ConsumeQueue(directory, "T", 0, FILE)
    cq.load()
    cq.recover()
    assert cq.truncate_dirty(100 * 40 + 50) is None  # unit 40 starts before, 41 after
    assert cq.max_offset == 41
    assert cq.max_physic_offset == 4100
    assert [cq.unit_at(q) for q in range(41)] == units[:41]
    assert cq.unit_at(41) is None
    cq.close()
