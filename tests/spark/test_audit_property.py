"""Property: one random field of a record header, a consume-queue unit or an index entry
damaged is reported (some finding), or the new value is one the audit documents as
harmless or undecidable (docs/audit.md §3); never CLEAN by silence. One Spark session for
the module (tests/spark/conftest.py); few examples: each is an audit."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.consumequeue import format as cqfmt
from mqstore.index import format as ifmt
from mqstore.tools.spark.headercheck import CLOCK_SKEW_MS, MAX_BORN_AGE_MS
from tests.spark.damage import FIELDS, records
from tests.spark.storegen import engine_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SLOTS, NUM = 53, 300
UNDECIDABLE_SYSFLAG_BITS = 0x2 | 0x40 | 0x80 | 0x8
"""MULTI_TAGS, NEED_UNWRAP, INNER_BATCH, and NOT <-> COMMIT (both dispatched alike):
values a producer or broker may set, nothing in the store contradicts them."""


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return engine_store(tmp_path_factory.mktemp("prop") / "store", SLOTS, NUM, count=200)


def _rw(path: Path, at: int, fmt: str, value: int | None = None) -> int:
    with open(path, "r+b") as f:
        f.seek(at)
        old = int(struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0])
        if value is not None:
            f.seek(at)
            f.write(struct.pack(fmt, value))
    return old


def _width(fmt: str) -> st.SearchStrategy[int]:
    bits = 8 * struct.calcsize(fmt)
    return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _harmless_header(name: str, old: int, new: int, rec: Any) -> bool:
    if name in ("born_port", "store_port"):
        return 0 <= new <= 0xFFFF
    if name == "reconsume_times":
        return new >= 0
    if name == "born_timestamp":
        return rec.store_ts - MAX_BORN_AGE_MS <= new <= rec.store_ts + CLOCK_SKEW_MS and new > 0
    if name == "store_timestamp":
        return abs(new - old) <= CLOCK_SKEW_MS
    if name == "sys_flag":
        return ((old ^ new) & ~UNDECIDABLE_SYSFLAG_BITS & 0xFFFFFFFF) == 0
    return False


damage = st.one_of(
    st.tuples(st.just("header"), st.sampled_from(sorted(FIELDS)), st.integers(20, 180),
              st.data()),
    st.tuples(st.just("unit"), st.sampled_from([(0, ">q"), (8, ">i"), (12, ">q")]),
              st.integers(0, 10), st.data()),
    st.tuples(st.just("entry"), st.sampled_from([(0, ">i"), (4, ">q"), (12, ">i"), (16, ">i")]),
              st.integers(1, 250), st.data()),
)  # fmt: skip


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(damage)
def test_single_field_damage_is_found_or_harmless(spark, base, tmp_path_factory, case):
    from mqstore.tools.spark.audit import run_audit

    where, what, n, data = case
    root = tmp_path_factory.mktemp("case") / "store"
    shutil.copytree(base, root)
    harmless = False
    if where == "header":
        fmt, at = FIELDS[what]
        rec = records(root)[n]
        new = data.draw(_width(fmt))
        old = _rw(root / rec.file, rec.pos + at, fmt, new)
        harmless = new == old or _harmless_header(what, old, new, rec)
    elif where == "unit":
        at, fmt = what
        cq = sorted((root / "consumequeue" / "orders" / "0").iterdir())[0]
        new = data.draw(_width(fmt))
        harmless = _rw(cq, n * cqfmt.UNIT_SIZE + at, fmt, new) == new
    else:
        at, fmt = what
        ix = sorted((root / "index").iterdir())[0]
        new = data.draw(_width(fmt))
        harmless = _rw(ix, ifmt.entry_position(SLOTS, n) + at, fmt, new) == new
    report = run_audit(root)
    shutil.rmtree(root)
    if not harmless:
        assert report.findings, (where, what, n, new, report.summary())
