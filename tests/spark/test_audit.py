"""The Spark audit: real RocketMQ files are clean, injected faults are reported exactly."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.spark import storegen
from tests.spark.storegen import build_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _audit(spark, root: Path, **kw):
    from mqstore.tools.spark.audit import run_audit

    return run_audit(root, **kw)


@pytest.mark.parametrize(
    "origin", ["shaoxubao-c4dcaab0/unit_test_store/commitlog", "apache-4e25b979/commitlog"]
)
def test_real_rocketmq_commitlog_is_clean(spark, real_fixtures, tmp_path, origin):
    root = tmp_path / "store"
    shutil.copytree(real_fixtures / origin, root / "commitlog")
    report = _audit(spark, root)
    assert report.findings == []
    assert report.clean and report.exit_code == 0
    assert report.records == 47
    [q] = report.queues
    assert (q.topic, q.queue_id, q.count, q.min_queue_offset, q.max_queue_offset) == (
        "abc",
        0,
        47,
        0,
        46,
    )
    assert q.bytes == 47 * 172


def test_real_broker_layout_with_nested_commitlog_is_found(spark, real_fixtures, tmp_path):
    root = tmp_path / "broker"
    src = real_fixtures / "shaoxubao-c4dcaab0"
    shutil.copytree(src / "unit_test_store", root / "unit_test_store")
    report = _audit(spark, root)
    assert report.records == 47
    assert report.findings == []


def test_generated_store_is_clean(spark, tmp_path):
    gen = build_store(tmp_path / "s")
    report = _audit(spark, gen.root, report=tmp_path / "r.json")
    assert report.findings == []
    assert report.records == 600
    assert report.segments == len(gen.segments) > 1
    assert sum(q.count for q in report.queues) == 600
    assert report.checks["consumequeue"].startswith("checked")
    assert report.checks["checkpoint"] == "checked"
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["clean"] is True and data["records"] == 600 and len(data["queues"]) == 6


def _faulty_store(tmp_path: Path) -> storegen.GeneratedStore:
    count = 600
    gen = build_store(
        tmp_path / "faulty",
        count,
        skip={("orders", 1): {5}},
        no_cq_unit={count - 1},
    )
    # 1. flipped body byte of orders/0 queue offset 11 (not compressed)
    w = next(r for r in gen.records if (r.topic, r.queue_id, r.queue_offset) == ("orders", 0, 11))
    assert not w.compressed
    seg, pos = gen.segment_of(w.physical_offset)
    body_at = seg.read_bytes().find(w.body, pos, pos + w.size)
    assert body_at > pos
    storegen.flip_byte(seg, body_at + 3)
    # 2. truncated ConsumeQueue file: 5 units and 7 bytes of a sixth remain
    storegen.shrink(gen.cq_path("payments", 1), 5 * 20 + 7)
    # 3. a unit with the wrong size
    storegen.set_unit_size(gen.cq_path("orders", 0), 3, 4242)
    # 4. the queue-offset gap was made by skip= above
    # 5. torn tail: the second half of the last record never reached the disk
    last = gen.records[-1]
    seg, pos = gen.segment_of(last.physical_offset)
    assert seg == gen.segments[-1]
    storegen.zero(seg, pos + last.size // 2, pos + last.size)
    return gen


def test_injected_faults_are_reported_exactly(spark, tmp_path):
    gen = _faulty_store(tmp_path)
    report = _audit(spark, gen.root, report=tmp_path / "r.json")
    kinds = Counter(f.kind for f in report.findings)
    assert kinds == {
        "bad_crc": 1,
        "cq_truncated": 1,
        "cq_wrong_size": 1,
        "queue_gap": 1,
        "torn_tail": 1,
    }, report.summary()
    by_kind = {f.kind: f for f in report.findings}
    crc_rec = next(
        r for r in gen.records if (r.topic, r.queue_id, r.queue_offset) == ("orders", 0, 11)
    )
    seg, pos = gen.segment_of(crc_rec.physical_offset)
    assert by_kind["bad_crc"].file == f"commitlog/{seg.name}"
    assert by_kind["bad_crc"].offset == pos
    assert by_kind["cq_truncated"].file == "consumequeue/payments/1/00000000000000000000"
    assert by_kind["cq_wrong_size"].offset == 3 * 20
    assert "4242" in by_kind["cq_wrong_size"].detail
    assert "orders/1: queue offsets 5..5" in by_kind["queue_gap"].detail
    tail = gen.records[-1]
    assert by_kind["torn_tail"].offset == gen.segment_of(tail.physical_offset)[1]
    assert report.exit_code == 1
    data = json.loads((tmp_path / "r.json").read_text())
    assert sorted(f["kind"] for f in data["findings"]) == sorted(kinds)
    assert {f["severity"] for f in data["findings"] if f["kind"] == "torn_tail"} == {"warning"}


def test_split_ranges_give_the_same_report(spark, tmp_path):
    gen = _faulty_store(tmp_path)
    whole = _audit(spark, gen.root)
    split = _audit(spark, gen.root, split_bytes=8 * 1024)
    assert split.findings == whole.findings
    assert split.queues == whole.queues
    assert split.records == whole.records == 599


def test_a_queue_offset_repeated_in_a_later_segment_is_one_duplicate(spark, tmp_path):
    import struct

    from mqstore.commitlog import format as fmt

    gen = build_store(tmp_path / "dup", 300)
    queue = [r for r in gen.records if (r.topic, r.queue_id) == ("orders", 0)]
    early, late = queue[1], queue[-2]
    seg, pos = gen.segment_of(late.physical_offset)
    assert seg != gen.segment_of(early.physical_offset)[0]  # another range: a second job
    with open(seg, "r+b") as f:
        f.seek(pos + fmt.QUEUE_OFFSET_POS)
        f.write(struct.pack(">q", early.queue_offset))
    report = _audit(spark, gen.root)
    kinds = Counter(f.kind for f in report.findings)
    assert kinds == {"queue_duplicate": 1, "queue_gap": 1, "cq_orphan": 1}, report.summary()
    dup = next(f for f in report.findings if f.kind == "queue_duplicate")
    assert (dup.file, dup.offset) == (f"commitlog/{seg.name}", pos)
    assert f"queue offset {early.queue_offset} again" in dup.detail


def test_cli_exit_codes(spark, tmp_path, capsys):
    from mqstore.tools.spark.audit import main

    gen = build_store(tmp_path / "ok", 50)
    assert main([str(gen.root)]) == 0
    assert "CLEAN" in capsys.readouterr().out
    storegen.set_unit_size(gen.cq_path("orders", 0), 0, 1)
    out = tmp_path / "r.json"
    assert main([str(gen.root), "--report", str(out)]) == 1
    assert json.loads(out.read_text())["findings"][0]["kind"] == "cq_wrong_size"
    assert main([str(tmp_path / "missing")]) == 2
    assert main(["--no-such-flag"]) == 2
