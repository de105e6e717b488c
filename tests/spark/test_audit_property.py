"""Property, one test each for a record header, a consume-queue unit and an index entry:
one random field damaged is reported (some finding), or the new value is one the audit
documents as harmless or undecidable (docs/audit.md §3); never CLEAN by silence. Every
header field is drawn from (tests.spark.damage.FIELDS), every unit and entry field. One
Spark session for the module (tests/spark/conftest.py); few examples: each is an audit."""

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
    if name in ("flag", "born_ip", "store_ip"):
        return True  # the producer's own flag; any IPv4 address is one a host may have
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


PROPERTY = settings(
    max_examples=4, deadline=None, derandomize=True, database=None,
    suppress_health_check=list(HealthCheck),
)  # fmt: skip
"""Few examples (each is an audit), the same in every run: a machine's load or a random
seed never decides what is tried, and any example that fails fails every run."""


def _audited(base: Path, tmp_path_factory: Any, damage: Any) -> tuple[Any, bool]:
    """A copy of ``base`` damaged by ``damage(root) -> harmless``, audited and removed:
    (report, harmless)."""
    from mqstore.tools.spark.audit import run_audit

    root = tmp_path_factory.mktemp("case") / "store"
    shutil.copytree(base, root)
    try:
        harmless = damage(root)
        return run_audit(root), harmless
    finally:
        shutil.rmtree(root)


@PROPERTY
@given(st.sampled_from(sorted(FIELDS)), st.integers(20, 180), st.data())
def test_single_header_field_damage_is_found_or_harmless(
    spark, base, tmp_path_factory, name, n, data
):
    fmt, at = FIELDS[name]
    new = data.draw(_width(fmt), label="value")

    def damage(root: Path) -> bool:
        rec = records(root)[n]
        old = _rw(root / rec.file, rec.pos + at, fmt, new)
        return new == old or _harmless_header(name, old, new, rec)

    report, harmless = _audited(base, tmp_path_factory, damage)
    if not harmless:
        assert report.findings, (name, n, new, report.summary())


@PROPERTY
@given(st.sampled_from([(0, ">q"), (8, ">i"), (12, ">q")]), st.integers(0, 10), st.data())
def test_single_consume_queue_unit_field_damage_is_found(
    spark, base, tmp_path_factory, field, n, data
):
    at, fmt = field
    new = data.draw(_width(fmt), label="value")

    def damage(root: Path) -> bool:
        cq = sorted((root / "consumequeue" / "orders" / "0").iterdir())[0]
        return _rw(cq, n * cqfmt.UNIT_SIZE + at, fmt, new) == new

    report, unchanged = _audited(base, tmp_path_factory, damage)
    if not unchanged:
        assert report.findings, (field, n, new, report.summary())


@PROPERTY
@given(
    st.sampled_from([(0, ">i"), (4, ">q"), (12, ">i"), (16, ">i")]), st.integers(1, 250),
    st.data(),
)  # fmt: skip
def test_single_index_entry_field_damage_is_found(spark, base, tmp_path_factory, field, n, data):
    at, fmt = field
    new = data.draw(_width(fmt), label="value")

    def damage(root: Path) -> bool:
        ix = sorted((root / "index").iterdir())[0]
        return _rw(ix, ifmt.entry_position(SLOTS, n) + at, fmt, new) == new

    report, unchanged = _audited(base, tmp_path_factory, damage)
    if not unchanged:
        assert report.findings, (field, n, new, report.summary())
