"""Damage gives a report of bounded size, and an unreadable file is exit 2, not a traceback."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from tests.spark.storegen import build_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEGMENT = 1 << 20


def _store(root: Path, count: int) -> Path:
    from mqstore import Message, MessageStore, StoreConfig

    cfg = StoreConfig(
        root_dir=str(root), commitlog_file_size=SEGMENT, max_hash_slot_num=4001,
        max_index_num=4 * count,
    )  # fmt: skip
    with MessageStore.open(cfg) as store:
        for i in range(count):
            r = store.put_message(Message(topic="orders", body=b"x" * 100, keys=[f"k{i}"]))
            assert r.status.stored
    return root


def test_truncated_middle_segment_gives_a_bounded_report(spark, tmp_path):
    from mqstore.tools.spark.audit import main
    from mqstore.tools.spark.segscan import MAX_PER_KIND

    root = _store(tmp_path / "s", 16_000)
    segments = sorted((root / "commitlog").iterdir())
    assert len(segments) >= 3
    os.truncate(segments[1], SEGMENT // 10)  # ~4,000 records and ~8,000 index entries cut
    report = tmp_path / "report.json"
    assert main([str(root), "--report", str(report)]) == 1
    assert report.stat().st_size < 10 << 20
    findings = json.loads(report.read_text())["findings"]
    listed = Counter((f["file"], f["kind"]) for f in findings)
    assert max(listed.values()) <= MAX_PER_KIND + 1
    more = [f for f in findings if f["kind"] == "index_dangling" and "more" in f["detail"]]
    assert more, "the dangling entries beyond the cap are counted, not listed"
    orphans = [f for f in findings if f["kind"] == "cq_orphan"]
    assert len(orphans) == 1 and "units" in orphans[0]["detail"]  # the cut: one run


def test_worker_that_cannot_read_a_segment_exits_2(spark, tmp_path, monkeypatch, capsys):
    from mqstore.tools.spark import audit

    gen = build_store(tmp_path / "s", 50)
    seg = Path(gen.segments[0])
    real_plan = audit.plan_ranges

    def plan_then_hide(*args, **kwargs):  # the driver sees the file, the tasks do not
        ranges = real_plan(*args, **kwargs)
        seg.rename(tmp_path / "elsewhere")
        return ranges

    monkeypatch.setattr(audit, "plan_ranges", plan_then_hide)
    assert audit.main([str(gen.root)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("mqstore audit: cannot read")
    assert str(seg) in last and "same path" in last
