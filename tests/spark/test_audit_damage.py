"""``mqstore audit`` lists the ranges recovery fenced off, and a store of junk is not CLEAN."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mqstore import Message, PutStatus
from tests.helpers import make_store, reopen

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FILE_SIZE = 64 * 1024


def _audit(root: Path):  # type: ignore[no-untyped-def]
    from mqstore.tools.spark.audit import run_audit

    return run_audit(root)


def test_audit_lists_exactly_the_fenced_ranges(spark, tmp_path: Path):
    s = make_store(tmp_path, commitlog_file_size=FILE_SIZE, message_index_enable=False)
    puts = []
    for i in range(400):
        r = s.put_message(Message(topic="orders", body=f"m{i:04d}-".encode() + b"b" * 400))
        assert r.status is PutStatus.PUT_OK
        puts.append(r)
    s.close()
    rng = random.Random(5)
    for r in (puts[250], puts[300], puts[301], puts[370]):  # 300 and 301: one range
        at = r.physical_offset + r.size - 100
        seg = s.root / "commitlog" / f"{at - at % FILE_SIZE:020d}"
        with open(seg, "r+b") as f:
            f.seek(at % FILE_SIZE)
            f.write(rng.randbytes(8))
    s = reopen(s.cfg)
    ranges = s.damage
    s.close()
    assert len(ranges) == 3
    report = _audit(s.root)
    fenced = [f for f in report.findings if f.kind == "fenced_damage"]
    assert [(f.file, f.offset) for f in fenced] == [
        (f"commitlog/{r.start - r.start % FILE_SIZE:020d}", r.start % FILE_SIZE) for r in ranges
    ]
    for f, r in zip(fenced, ranges, strict=True):
        assert f"[{r.start}, {r.end})" in f.detail and r.reason in f.detail
    assert not report.clean and report.exit_code == 1


def test_a_commitlog_of_random_bytes_is_not_clean(spark, tmp_path: Path):
    seg = tmp_path / "store" / "commitlog" / f"{0:020d}"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(random.Random(9).randbytes(1 << 20))
    report = _audit(tmp_path / "store")
    assert report.records == 0
    assert [f.kind for f in report.errors] == ["no_valid_record"]
    assert report.exit_code == 1 and "CLEAN" not in report.summary().splitlines()[0]
