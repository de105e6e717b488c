"""The per-range record checks on their own (no Spark session needed, same markers)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.spark import storegen
from tests.spark.storegen import build_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _scan(root: Path, split: int = 1 << 30) -> tuple[list, int]:
    from mqstore.tools.spark.layout import discover
    from mqstore.tools.spark.reader import plan_ranges
    from mqstore.tools.spark.segscan import RecordColumns, scan_range

    findings = []
    records = 0
    for rng in plan_ranges(discover(root), split):
        cols = RecordColumns()
        rows = list(scan_range(Path(rng.path).read_bytes(), rng, int(time.time() * 1000), cols))
        findings += [r for r in rows if r.row_type == "finding"]
        records += len(cols)
    return findings, records


def _record(gen, index):
    w = gen.records[index]
    return w, *gen.segment_of(w.physical_offset)


def test_zeroed_header_inside_data_resumes_at_the_next_record(tmp_path):
    gen = build_store(tmp_path / "s", 200)
    _, seg, pos = _record(gen, 20)
    storegen.zero(seg, pos, pos + 8)
    findings, records = _scan(gen.root)
    assert [(f.kind, f.offset) for f in findings] == [("zeroed_gap", pos)]
    assert "resumes at" in findings[0].detail
    assert records == 199


def test_bad_magic_skips_exactly_one_record(tmp_path):
    gen = build_store(tmp_path / "s", 200)
    w, seg, pos = _record(gen, 30)
    storegen.flip_byte(seg, pos + 5)
    findings, records = _scan(gen.root)
    assert [(f.kind, f.offset) for f in findings] == [("bad_magic", pos)]
    assert f"skipped {w.size} bytes" in findings[0].detail
    assert records == 199


def test_segment_without_blank_record(tmp_path):
    gen = build_store(tmp_path / "s", 200)
    seg = gen.segments[0]
    last = max((w for w in gen.records if gen.segment_of(w.physical_offset)[0] == seg),
               key=lambda w: w.physical_offset)  # fmt: skip
    blank_at = gen.segment_of(last.physical_offset)[1] + last.size
    storegen.zero(seg, blank_at, blank_at + 8)
    findings, _ = _scan(gen.root)
    assert [(f.kind, f.file, f.offset) for f in findings] == [("missing_blank", seg.name, blank_at)]


def test_last_file_cut_inside_a_record_is_a_torn_tail(tmp_path):
    gen = build_store(tmp_path / "s", 200)
    w, seg, pos = _record(gen, 199)
    storegen.shrink(seg, pos + w.size - 10)
    findings, records = _scan(gen.root)
    assert [(f.kind, f.offset) for f in findings] == [("torn_tail", pos)]
    assert records == 199


def test_bad_text_record_is_skipped_by_its_trusted_size(tmp_path):
    gen = build_store(tmp_path / "s", 200)
    w, seg, pos = _record(gen, 5)
    storegen.flip_byte(seg, pos + w.size - 1)  # the 0x02 ending the properties -> 0xFD
    findings, records = _scan(gen.root, split=8 * 1024)
    assert [(f.kind, f.offset) for f in findings] == [("bad_text", pos)]
    assert records == 199


def test_a_record_whose_properties_end_in_a_zero_byte_is_a_torn_record(tmp_path):
    gen = build_store(tmp_path / "s", 200)
    w, seg, pos = _record(gen, 40)
    storegen.zero(seg, pos + w.size - 1, pos + w.size)  # the 0x02 ending the properties
    findings, records = _scan(gen.root)
    assert [(f.kind, f.offset) for f in findings] == [("torn_record", pos)]
    assert records == 199


def test_a_damaged_last_record_is_the_torn_tail_whatever_was_written(tmp_path):
    gen = build_store(tmp_path / "s", 200)
    _, seg, pos = _record(gen, 199)
    storegen.flip_byte(seg, pos + 5)  # MAGICCODE: every byte of it is still there
    findings, records = _scan(gen.root)
    assert [(f.kind, f.offset) for f in findings] == [("torn_tail", pos)]
    assert "bad_magic" in findings[0].detail
    assert records == 199


def test_preallocated_empty_segments_after_the_data_are_fine(tmp_path):
    gen = build_store(tmp_path / "s", 200)
    w, seg, pos = _record(gen, 199)
    storegen.zero(seg, pos + w.size // 2, pos + w.size)  # torn, and then...
    nxt = gen.root / "commitlog" / f"{int(seg.name) + gen.segment_size:020d}"
    nxt.write_bytes(bytes(gen.segment_size))  # ...the next file already allocated
    findings, records = _scan(gen.root)
    assert [(f.kind, f.file, f.offset) for f in findings] == [("torn_tail", seg.name, pos)]
    assert records == 199
