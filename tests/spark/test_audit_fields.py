"""Header fields outside the body CRC and index entries, damaged one per record: each is
reported with its kind, the file and the record's (or entry's) offset, on a store the
project wrote and on a copy of the one RocketMQ 4.9.8 wrote. One audit per store: the
damaged records are far enough apart not to mask each other. Two more per store: a
record's QUEUEOFFSET that no longer matches its consume queue, and a born host flagged
IPv6 while it holds an IPv4 address (docs/audit.md §3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mqstore.commitlog import format as fmt
from mqstore.consumequeue import format as cqfmt
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


UNIT = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")])
QUEUE_OFFSET_SHIFT = 1000
"""Added to one record's QUEUEOFFSET: past every queue's end in both stores."""
EXTRA = ("queue_offset", "host_family")
"""Damage whose findings are not one header kind at the record (the tests say which)."""


def _damage(root: Path) -> dict[str, Rec]:
    """One record per kind of DAMAGE, then one per EXTRA, 20 records apart, damaged;
    kind (or EXTRA name) -> record."""
    recs = records(root)
    chosen = {}
    for n, (kind, (field, new)) in enumerate(DAMAGE.items()):
        r = recs[30 + 20 * n]
        write_field(root, r, field, new(read_field(root, r, field), r))
        chosen[kind] = r
    r = chosen["queue_offset"] = recs[30 + 20 * len(DAMAGE)]
    write_field(root, r, "queue_offset", read_field(root, r, "queue_offset") + QUEUE_OFFSET_SHIFT)
    r = chosen["host_family"] = recs[50 + 20 * len(DAMAGE)]
    assert not r.sys_flag & fmt.BORNHOST_V6_FLAG
    write_field(root, r, "sys_flag", r.sys_flag | fmt.BORNHOST_V6_FLAG)
    return chosen


def _unit_of(root: Path, rec: Rec) -> tuple[str, int]:
    """(file, byte position) of the consume-queue unit that points at ``rec``."""
    for path in sorted((root / "consumequeue").rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        units = np.frombuffer(data, UNIT, len(data) // cqfmt.UNIT_SIZE)
        hits = np.flatnonzero(units["offset"] == rec.offset)
        if hits.size:
            return path.relative_to(root).as_posix(), int(hits[0]) * cqfmt.UNIT_SIZE
    raise AssertionError(f"no unit points at {rec}")


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


Damaged = tuple[Any, dict[str, Rec], tuple[str, int, Any], tuple[str, int]]
"""The audit's report, the damaged records, the damaged index entry, and the unit that
points at the record whose QUEUEOFFSET was shifted."""


def _damaged(root: Path, slots: int) -> Damaged:
    unit = _unit_of(root, records(root)[30 + 20 * len(DAMAGE)])
    chosen = _damage(root)
    entry = _negative_index_entry(root, slots)
    return _audit(root), chosen, entry, unit


@pytest.fixture(scope="module")
def ours(spark, tmp_path_factory) -> Damaged:
    return _damaged(engine_store(tmp_path_factory.mktemp("fields") / "store", SLOTS, NUM), SLOTS)


@pytest.fixture(scope="module")
def theirs(spark, tmp_path_factory) -> Damaged:
    return _damaged(copy_store(tmp_path_factory.mktemp("rmq") / "store"), 500)


def _at(report: Any, file: str, offset: int) -> set[str]:
    return {f.kind for f in report.findings if (f.file, f.offset) == (file, offset)}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_header_field_damage_is_found_on_our_store(ours, kind):
    report, chosen, _, _ = ours
    r = chosen[kind]
    assert kind in _at(report, r.file, r.pos), report.summary(60)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_header_field_damage_is_found_on_the_rocketmq_store(theirs, kind):
    report, chosen, _, _ = theirs
    r = chosen[kind]
    assert kind in _at(report, r.file, r.pos), report.summary(60)


@pytest.mark.parametrize("store", ["ours", "theirs"])
def test_a_negative_index_offset_is_dangling_and_its_record_misses_its_entry(store, request):
    report, _, (file, pos, entry), _ = request.getfixturevalue(store)
    assert "index_dangling" in _at(report, file, pos), report.summary(60)
    missing = [f for f in report.findings if f.kind == "index_missing"]
    assert any(f"log offset {entry.phy_offset}:" in f.detail for f in missing), report.summary(60)
    assert report.exit_code == 1


@pytest.mark.parametrize("store", ["ours", "theirs"])
def test_a_queue_offset_its_consume_queue_lacks_is_found_at_record_and_unit(store, request):
    report, chosen, _, (unit_file, unit_pos) = request.getfixturevalue(store)
    r = chosen["queue_offset"]
    assert "queue_gap" in _at(report, r.file, r.pos), report.summary(60)
    assert "cq_orphan" in _at(report, unit_file, unit_pos), report.summary(60)


@pytest.mark.parametrize("store", ["ours", "theirs"])
def test_an_ipv4_born_host_under_the_ipv6_bit_is_found_at_its_record(store, request):
    report, chosen, _, _ = request.getfixturevalue(store)
    r = chosen["host_family"]
    assert "length_mismatch" in _at(report, r.file, r.pos), report.summary(60)
