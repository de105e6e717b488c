"""The index check reads, per scan range, only the entries that can point into it
(tools.spark.indexcheck.entry_slices), and every entry of a file out of log order."""

from __future__ import annotations

import itertools
import shutil
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.index import format as ifmt
from mqstore.tools.spark import indexcheck
from mqstore.tools.spark.layout import discover
from mqstore.tools.spark.reader import plan_ranges
from mqstore.tools.spark.segscan import Row
from mqstore.tools.spark.tasks import audit_task
from tests.spark.storegen import engine_store

SLOTS, NUM = 53, 300


def _index_bytes(phys: list[int], slots: int = 4) -> tuple[bytes, indexcheck.Geometry]:
    """An index file image whose entries 1..n hold physical offsets ``phys``."""
    g = indexcheck.Geometry(slots, len(phys) + 1)
    body = b"".join(ifmt.ENTRY.pack(7, p, 0, 0) for p in phys)
    return bytes(ifmt.entry_position(slots, 1)) + body, g


@given(
    st.lists(st.integers(0, 10_000), min_size=1, max_size=60),
    st.lists(st.integers(-5, 10_005), min_size=1, max_size=4),
)
@settings(max_examples=200, deadline=None)
def test_each_territory_gets_exactly_the_entries_that_point_into_it(
    phys: list[int], cuts: list[int]
) -> None:
    phys.sort()
    edges = [-(1 << 63), *sorted(set(cuts)), 1 << 63]
    territories = list(itertools.pairwise(edges))
    buf, g = _index_bytes(phys)
    got = indexcheck.entry_slices(buf, len(phys), g, territories)
    arr = np.array(phys)
    for lo, hi in territories:
        a, b = got[(lo, hi)]
        assert np.flatnonzero((arr >= lo) & (arr < hi)).tolist() == list(range(a, b))


def test_a_file_out_of_log_order_has_no_slices() -> None:
    buf, g = _index_bytes([100, 300, 200])
    assert indexcheck.entry_slices(buf, 3, g, [(-(1 << 63), 1 << 63)]) == {}


def _index_findings(root: Path) -> Counter[str]:
    """The index findings of every scan range's task, run here without Spark."""
    layout = discover(root)
    ranges = plan_ranges(layout, 1 << 20)
    files = indexcheck.index_files(layout.index_dir)
    iplan = indexcheck.plan(layout, ranges, indexcheck.Geometry(SLOTS, NUM), files)
    now = int(time.time() * 1000)
    rows = [r for rng in ranges for r in audit_task([rng], now, iplan) if isinstance(r, Row)]
    return Counter(r.kind for r in rows if r.kind and r.kind.startswith("index"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mqstore.consumequeue.dispatch")
    return engine_store(tmp_path_factory.mktemp("slices") / "store", SLOTS, NUM)


def test_an_entry_pointing_back_into_an_earlier_range_is_checked_there(
    store: Path, tmp_path: Path
) -> None:
    # the newest file's middle entry made to point at offset 1: out of log order
    root = tmp_path / "s"
    shutil.copytree(store, root)
    assert len(plan_ranges(discover(root), 1 << 20)) > 2
    assert _index_findings(root) == {}
    last = sorted((root / "index").iterdir())[-1]
    with open(last, "r+b") as f:
        h = ifmt.read_header(f.read(ifmt.HEADER_SIZE))
        pos = ifmt.entry_position(SLOTS, h.index_count // 2)
        f.seek(pos)
        e = ifmt.Entry(*ifmt.ENTRY.unpack(f.read(ifmt.ENTRY_SIZE)))
        f.seek(pos)
        f.write(ifmt.ENTRY.pack(*e._replace(phy_offset=1)))  # into the first range
    # and the record it indexed has lost that key's entry
    assert _index_findings(root) == {"index_dangling": 1, "index_missing": 1}


@given(
    st.lists(st.lists(st.integers(-3, 3), max_size=7), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(-3, 3), st.booleans()), max_size=30),
)
@settings(max_examples=200, deadline=None)
def test_an_entry_key_matches_when_it_is_one_of_its_records_keys(
    keys: list[list[int]], entries: list[tuple[int, int, bool]]
) -> None:
    recs = _range_keys([0] * len(keys), [0] * len(keys), keys)
    ents = [(r % len(keys), h, f) for r, h, f in entries]
    j = np.array([r for r, _, _ in ents], np.int64)
    h = np.array([x for _, x, _ in ents], np.int64)
    found = np.array([f for _, _, f in ents], np.bool_)
    got = indexcheck._key_ok(recs, j, found, h)
    assert got.tolist() == [f and x in keys[r] for r, x, f in ents]


class _Chunk:
    """What the index check reads of a bulk scan's chunk."""

    def __init__(self, offs: list[int], flags: list[int], rec: list[int], hashes: list[int]):
        self.physical_offset = np.array(offs, np.int64)
        self.store_timestamp = self.physical_offset + 1000
        self.sys_flag = np.array(flags, np.int64)
        self.key_record = np.array(rec, np.int64)
        self.key_hash = np.array(hashes, np.int32)

    def __len__(self) -> int:
        return int(self.physical_offset.size)


@pytest.mark.parametrize("rolled_back", [False, True])
def test_a_rolled_back_record_has_no_index_keys(rolled_back: bool) -> None:
    from mqstore.commitlog import format as fmt
    from mqstore.tools.spark.segscan import RecordColumns

    flag = fmt.TRANSACTION_ROLLBACK_TYPE if rolled_back else fmt.TRANSACTION_COMMIT_TYPE
    cols = RecordColumns(keys=True)
    cols.add(_Chunk([100, 200], [0, flag], [0, 0, 1, 1], [1, 2, 3, 4]), 0)  # type: ignore[arg-type]
    cols.add(_Chunk([300], [0], [0], [5]), 0)  # type: ignore[arg-type]
    keys = indexcheck._RangeKeys.of(cols)
    got = [keys.hashes[keys.starts[i] : keys.starts[i + 1]].tolist() for i in range(3)]
    assert got == [[1, 2], [] if rolled_back else [3, 4], [5]]


def _range_keys(offs: list[int], ts: list[int], keys: list[list[int]]) -> indexcheck._RangeKeys:
    """_RangeKeys of records (sorted offsets) with these store times and key hashes."""
    starts = np.r_[0, np.cumsum([len(k) for k in keys])].astype(np.int64)
    rec = np.repeat(np.arange(len(keys)), [len(k) for k in keys]).astype(np.int64)
    off = np.array(offs, np.int64)
    unique = bool((off[1:] != off[:-1]).all()) if off.size > 1 else True
    flat = np.array([h for k in keys for h in k], np.int32)
    return indexcheck._RangeKeys(off, np.array(ts, np.int64), starts, flat, rec, unique)


def _want(begin: int, ts: int) -> int:
    return min(max((ts - begin) // 1000, 0), ifmt.INT_MAX) if begin > 0 else 0


_records = st.lists(
    st.tuples(
        st.sampled_from([1, 1, 1, 2, 0]),
        st.integers(0, 9_000),
        st.lists(st.integers(-3, 3), max_size=3),
    ),
    max_size=8,
)
_faults = st.lists(st.tuples(st.integers(0, 40), st.sampled_from("phkt")), max_size=2)


@given(
    _records,
    _faults,
    st.tuples(st.integers(0, 3), st.integers(0, 3)),
    st.tuples(st.sampled_from([-1, 0, 1_000, 5_000]), st.sampled_from([-1, 0, 2_000])),
    st.tuples(st.sampled_from([-1, 10, 25]), st.sampled_from([1 << 20, 40, 70])),
)
@settings(max_examples=400, deadline=None)
def test_entry_findings_follow_the_lookup_rules_for_runs_of_keys_and_others(
    records: list[tuple[int, int, list[int]]],
    faults: list[tuple[int, str]],
    trim: tuple[int, int],
    begins: tuple[int, int],
    bounds: tuple[int, int],
) -> None:
    # records at 10, 20, ... (a step of 0 repeats an offset); the file holds their keys
    # in the dispatcher's order, some entries then damaged
    import tempfile

    offs = list(itertools.accumulate(10 * (s or (i == 0)) for i, (s, _, _) in enumerate(records)))
    offs = [10 + o for o in offs]
    keys = [k for _, _, k in records]
    ts = [t for _, t, _ in records]
    begin, prev_end = begins
    ents = [[h, offs[r], 0] for r, k in enumerate(keys) for h in k]
    for n, (_h, p, _) in enumerate(ents, 1):
        ents[n - 1][2] = _want(prev_end if n == 1 else begin, ts[offs.index(p)])
    for i, kind in faults:
        if ents:
            e = ents[i % len(ents)]
            e[{"p": 1, "h": 0, "k": 0, "t": 2}[kind]] += {"p": 1, "h": 7, "k": 1, "t": 1}[kind]
    first, stop = min(trim[0], len(ents)), max(len(ents) - trim[1], 0)
    lo, hi = bounds
    g = indexcheck.Geometry(4, len(ents) + 1)
    body = b"".join(ifmt.ENTRY.pack(h, p, d, 0) for h, p, d in ents)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "idx"
        path.write_bytes(bytes(ifmt.entry_position(4, 1)) + body)
        info = indexcheck.IndexFileInfo(str(path), "idx", len(ents) + 1, begin, prev_end,
                                        {(lo, hi): (first, stop)})  # fmt: skip
        iplan = indexcheck.IndexPlan((), g, 0, {}, {})
        recs = _range_keys(offs, ts, keys)
        rows = indexcheck._check_entries(info, iplan, recs, (lo, hi), [], None)
    got = sorted((r.kind, r.offset) for r in rows)
    want = []
    for n in range(first + 1, stop + 1):
        h, p, d = ents[n - 1]
        if not lo <= p < hi:
            continue
        pos = ifmt.entry_position(4, n)
        if p not in offs:
            want.append(("index_dangling", pos))
        elif h not in keys[offs.index(p)]:
            want.append(("index_wrong_key", pos))
        elif (b := prev_end if n == 1 else begin) >= 0 and d != _want(b, ts[offs.index(p)]):
            want.append(("index_time", pos))
    assert got == sorted(want)


@given(_records, st.integers(0, 30), st.integers(0, 30))
@settings(max_examples=300, deadline=None)
def test_a_run_of_keys_in_record_order_is_matched_as_one(
    records: list[tuple[int, int, list[int]]], a: int, m: int
) -> None:
    offs = [10 * (i + 1) for i in range(len(records))]
    keys = [k for _, _, k in records]
    recs = _range_keys(offs, [0] * len(offs), keys)
    q = min(a, recs.hashes.size)
    run = slice(q, min(q + m, recs.hashes.size))
    h, j = recs.hashes[run], recs.key_record[run]
    phy = recs.offset[j]
    got = recs.in_key_order(phy, h.astype(np.int64))
    if h.size and q == recs.starts[j[0]] + keys[j[0]].index(int(h[0])):
        assert got is not None
    if got is not None:
        assert got.tolist() == j.tolist()
