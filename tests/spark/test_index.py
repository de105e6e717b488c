"""Index files: the audit checks them against the CommitLog, reindex rebuilds them
byte for byte with the store's own IndexService (small geometry: 2+ files)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from mqstore.index import format as ifmt
from tests.spark.storegen import engine_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SLOTS, NUM = 53, 300  # 400 messages x 2 keys -> 3 files


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def index_store(tmp_path_factory) -> Path:
    pytest.importorskip("mqstore.consumequeue.dispatch")
    return engine_store(tmp_path_factory.mktemp("idx") / "store", SLOTS, NUM)


def _entry(path: Path, n: int) -> tuple[int, ifmt.Entry]:
    pos = ifmt.entry_position(SLOTS, n)
    with open(path, "rb") as f:
        f.seek(pos)
        return pos, ifmt.Entry(*ifmt.ENTRY.unpack(f.read(ifmt.ENTRY_SIZE)))


def _put(path: Path, pos: int, e: ifmt.Entry) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(ifmt.ENTRY.pack(*e))


def test_store_with_index_audits_clean(spark, index_store):
    from mqstore.tools.spark.audit import run_audit

    files = sorted((index_store / "index").iterdir())
    assert len(files) >= 2
    report = run_audit(index_store)  # geometry inferred from the files
    assert report.findings == [], report.summary()
    assert report.checks["index"] == f"checked ({len(files)} files, {SLOTS} slots x {NUM} entries)"


def test_injected_index_faults_are_reported_exactly(spark, index_store, tmp_path):
    import shutil

    from mqstore.tools.spark.audit import run_audit

    root = tmp_path / "s"
    shutil.copytree(index_store, root)
    first, second, third = sorted((root / "index").iterdir())[:3]
    # 1. dangling: entry 5 points one byte after its record
    pos5, e5 = _entry(first, 5)
    _put(first, pos5, e5._replace(phy_offset=e5.phy_offset + 1))
    # 2. wrong key: entry 9's hash replaced by one of the same slot (chains stay valid)
    pos9, e9 = _entry(first, 9)
    _put(first, pos9, e9._replace(key_hash=e9.key_hash + SLOTS))
    # 3. broken chain: entry 20 of the second file points forward
    pos20, e20 = _entry(second, 20)
    _put(second, pos20, e20._replace(prev_index=250))
    # 4. header: the third file's hashSlotCount one too high
    with open(third, "r+b") as f:
        h = ifmt.read_header(f.read(ifmt.HEADER_SIZE))
        f.seek(0)
        f.write(ifmt.HEADER.pack(*h._replace(hash_slot_count=h.hash_slot_count + 1)))
    # 5. time: entry 7 of the third file claims an hour later
    pos7, e7 = _entry(third, 7)
    _put(third, pos7, e7._replace(time_diff=e7.time_diff + 3600))
    report = run_audit(root, index_slots=SLOTS, index_num=NUM)
    got = Counter(f.kind for f in report.findings)
    assert got == {
        "index_dangling": 1, "index_wrong_key": 1, "index_header": 1, "index_time": 1,
        "index_bad_chain": 1 + (e20.prev_index > 0),  # and the entry it no longer links
        "index_missing": 2,  # the keys entries 5 and 9 no longer index
    }, report.summary()  # fmt: skip
    where = {f.kind: (f.file, f.offset) for f in report.findings}
    assert where["index_dangling"] == (f"index/{first.name}", pos5)
    assert where["index_wrong_key"] == (f"index/{first.name}", pos9)
    assert where["index_bad_chain"] == (f"index/{second.name}", pos20)
    assert where["index_header"] == (f"index/{third.name}", 32)
    assert where["index_time"] == (f"index/{third.name}", pos7)
    assert report.exit_code == 1


def test_reindex_rebuilds_index_byte_for_byte(spark, index_store, tmp_path):
    import shutil

    from mqstore.tools.spark.reindex import reindex_with

    expected = _tree(index_store / "index")
    summary = reindex_with(spark, index_store, tmp_path / "out")
    assert summary["index_files"] == len(expected) >= 2
    assert summary["index_geometry"] == (SLOTS, NUM)
    assert _tree(tmp_path / "out" / "index") == expected
    assert _tree(tmp_path / "out" / "consumequeue") == _tree(index_store / "consumequeue")
    # in place, the newest file lost: rebuilt under the remaining names, the last one new
    root = tmp_path / "inplace"
    shutil.copytree(index_store, root)
    (root / "index" / sorted(expected)[-1]).unlink()
    reindex_with(spark, root, index_slots=SLOTS, index_num=NUM)
    got = _tree(root / "index")
    assert sorted(got)[:-1] == sorted(expected)[:-1]  # the last one is named by the clock
    assert sorted(got)[-1] > sorted(expected)[-2]
    assert [got[n] for n in sorted(got)] == [expected[n] for n in sorted(expected)]
    assert not [p for p in root.iterdir() if p.name.startswith(".")]
