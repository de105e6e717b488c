"""``store_time_outlier`` judges every record, whatever chunk or range it ends or starts:
a chunk's last record against the next chunk's first (pure, any split), a range's first
and last records by the driver against the neighbouring ranges, and the log's own first
and last records against their one neighbour (a store read in small ranges, no Spark)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.tools.spark.headercheck import CLOCK_SKEW_MS, StoreTimes
from tests.spark import storegen
from tests.spark.damage import records, write_field

HOUR = 3_600_000


def _judge(chunks: list[tuple[np.ndarray, np.ndarray]]) -> set[int]:
    """Positions found by one StoreTimes fed the chunks (positions, times) in turn."""
    times, found = StoreTimes(), set()
    for pos, ts in chunks:
        found |= {h[0] for h in times.judge(pos, ts, np.zeros(ts.size, np.bool_))}
    return found


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 2 * CLOCK_SKEW_MS), min_size=3, max_size=40),
    st.data(),
)
def test_any_split_into_chunks_judges_what_one_chunk_judges(steps: list[int], data):
    ts = np.cumsum(np.asarray(steps, np.int64)) + 1_700_000_000_000
    jumps = data.draw(st.sets(st.integers(0, ts.size - 1), max_size=4))
    for j in jumps:
        ts[j] += HOUR  # an outlier unless its neighbours jumped too
    pos = np.arange(ts.size, dtype=np.int64) * 100
    cuts = sorted(data.draw(st.sets(st.integers(1, ts.size - 1), max_size=ts.size)))
    bounds = [0, *cuts, ts.size]
    chunks = [(pos[a:b], ts[a:b]) for a, b in itertools.pairwise(bounds)]
    assert _judge(chunks) == _judge([(pos, ts)])


def test_the_last_record_of_a_chunk_is_judged_when_the_next_chunk_comes():
    ts = np.arange(6, dtype=np.int64) * 1000 + 1_700_000_000_000
    ts[2] += HOUR
    pos = np.arange(6, dtype=np.int64) * 100
    assert _judge([(pos[:3], ts[:3]), (pos[3:], ts[3:])]) == {200}


@pytest.mark.spark
def test_outliers_at_range_edges_and_at_both_ends_of_the_log_are_found(tmp_path: Path):
    from mqstore.tools.spark.audit import _collect
    from mqstore.tools.spark.layout import discover
    from mqstore.tools.spark.reader import plan_ranges
    from mqstore.tools.spark.segscan import RecordColumns, scan_range

    gen = storegen.build_store(tmp_path / "s", 120)
    recs = records(gen.root)
    layout = discover(gen.root)
    ranges = plan_ranges(layout, 8 * 1024)
    assert len(ranges) >= 3
    starts = {(f"commitlog/{r.name}", r.start) for r in ranges}
    range_heads = [i for i, r in enumerate(recs) if (r.file, r.pos) in starts]
    # the log's first and last records, and the first and last records of the second range
    chosen = {0, range_heads[1], range_heads[2] - 1, len(recs) - 1}
    for i in chosen:
        write_field(gen.root, recs[i], "store_timestamp", recs[i].store_ts + HOUR)
    rows = []
    for rng in plan_ranges(discover(gen.root), 8 * 1024):
        data = Path(rng.path).read_bytes()
        rows += list(scan_range(data, rng, int(time.time() * 1000), RecordColumns()))
    found, _ = _collect(rows, discover(gen.root))
    hits = {(f.file, f.offset) for f in found if f.kind == "store_time_outlier"}
    assert hits == {(recs[i].file, recs[i].pos) for i in chosen}
