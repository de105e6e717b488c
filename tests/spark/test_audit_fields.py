"""Header fields outside the body CRC and index entries, damaged one per record: each is
reported with its kind, the file and the record's (or entry's) offset, on a store the
project wrote and on a copy of the one RocketMQ 4.9.8 wrote. One audit per store: the
damaged records are far enough apart not to mask each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqstore.index import format as ifmt
from tests.rmq498 import copy_store
from tests.spark.damage import Rec, read_field, records, write_field
from tests.spark.storegen import engine_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SLOTS, NUM = 53, 300

DAMAGE = {
    # kind: (field, new value from the old one)
    "bad_reconsume_times": ("reconsume_times", lambda v, r: -1),
    "bad_prepared_offset": ("prepared_offset", lambda v, r: r.offset - 7),
    "bad_sysflag": ("sys_flag", lambda v, r: v | 0x4000),
    "bad_born_timestamp": ("born_timestamp", lambda v, r: -v),
    "born_timestamp_skew": ("born_timestamp", lambda v, r: r.store_ts + 86_400_000),
    "store_time_outlier": ("store_timestamp", lambda v, r: v + 3_600_000),
    "bad_host": ("store_port", lambda v, r: 0x7FFF0000),
}


def _damage(root: Path) -> dict[str, Rec]:
    """One record per kind of DAMAGE, 20 records apart, damaged; kind -> record."""
    recs = records(root)
    chosen = {}
    for n, (kind, (field, new)) in enumerate(DAMAGE.items()):
        r = recs[30 + 20 * n]
        write_field(root, r, field, new(read_field(root, r, field), r))
        chosen[kind] = r
    return chosen


def _negative_index_entry(root: Path, slots: int) -> tuple[str, int, Any]:
    """Entry 5 of the first index file: its CommitLog offset made negative."""
    path = sorted((root / "index").iterdir())[0]
    pos = ifmt.entry_position(slots, 5)
    with open(path, "r+b") as f:
        f.seek(pos)
        e = ifmt.Entry(*ifmt.ENTRY.unpack(f.read(ifmt.ENTRY_SIZE)))
        f.seek(pos)
        f.write(ifmt.ENTRY.pack(e.key_hash, -e.phy_offset - 1, e.time_diff, e.prev_index))
    return f"index/{path.name}", pos, e


def _audit(root: Path) -> Any:
    from mqstore.tools.spark.audit import run_audit

    return run_audit(root)


@pytest.fixture(scope="module")
def ours(spark, tmp_path_factory) -> tuple[Any, dict[str, Rec], tuple[str, int, Any]]:
    root = engine_store(tmp_path_factory.mktemp("fields") / "store", SLOTS, NUM)
    chosen = _damage(root)
    entry = _negative_index_entry(root, SLOTS)
    return _audit(root), chosen, entry


@pytest.fixture(scope="module")
def theirs(spark, tmp_path_factory) -> tuple[Any, dict[str, Rec], tuple[str, int, Any]]:
    root = copy_store(tmp_path_factory.mktemp("rmq") / "store")
    chosen = _damage(root)
    entry = _negative_index_entry(root, 500)
    return _audit(root), chosen, entry


def _at(report: Any, file: str, offset: int) -> set[str]:
    return {f.kind for f in report.findings if (f.file, f.offset) == (file, offset)}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_header_field_damage_is_found_on_our_store(ours, kind):
    report, chosen, _ = ours
    r = chosen[kind]
    assert kind in _at(report, r.file, r.pos), report.summary(60)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_header_field_damage_is_found_on_the_rocketmq_store(theirs, kind):
    report, chosen, _ = theirs
    r = chosen[kind]
    assert kind in _at(report, r.file, r.pos), report.summary(60)


@pytest.mark.parametrize("store", ["ours", "theirs"])
def test_a_negative_index_offset_is_dangling_and_its_record_misses_its_entry(store, request):
    report, _, (file, pos, entry) = request.getfixturevalue(store)
    assert "index_dangling" in _at(report, file, pos), report.summary(60)
    missing = [f for f in report.findings if f.kind == "index_missing"]
    assert any(f"log offset {entry.phy_offset}:" in f.detail for f in missing), report.summary(60)
    assert report.exit_code == 1
