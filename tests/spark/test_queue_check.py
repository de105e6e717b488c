"""The per-queue check on the driver (tools.spark.queues.check_queue) on hand-made columns
and a real ConsumeQueue file: records out of log order, duplicates, prepared halves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mqstore.commitlog import format as fmt
from mqstore.consumequeue import format as cqfmt
from mqstore.tools.spark.layout import CqFile
from mqstore.tools.spark.queues import QueueContext, check_queue
from mqstore.tools.spark.reader import RECORD_DTYPE, queue_records

TOPIC = "orders"


def _context(tmp_path: Path, units: list[tuple[int, int, int]]) -> QueueContext:
    """One ConsumeQueue file of (offset, size, tag code) units for queue 0."""
    path = tmp_path / f"{0:020d}"
    path.write_bytes(b"".join(cqfmt.encode_unit(*u) for u in units).ljust(20 * 64, b"\0"))
    cq = CqFile(str(path), f"consumequeue/{TOPIC}/0/{path.name}", TOPIC, 0, 0, 20 * 64)
    return QueueContext((0,), ("commitlog/00000000000000000000",), 0,
                        {(TOPIC, 0): (cq,)}, {}, 20 * 64)  # fmt: skip


def _records(rows: list[tuple[int, int, int, int]]) -> dict[str, np.ndarray]:
    """Columns of records given as (offset, size, queue offset, sys_flag)."""
    a = np.array(rows, np.int64).reshape(-1, 4)
    n = a.shape[0]
    return {
        "offset": a[:, 0], "size": a[:, 1], "queue_offset": a[:, 2], "sys_flag": a[:, 3],
        "store_ts": np.arange(n, dtype=np.int64) + 1000, "tags_code": np.zeros(n, np.int64),
    }  # fmt: skip


def test_a_repeated_queue_offset_is_one_duplicate_and_its_unit_names_the_earlier_record(
    tmp_path: Path,
) -> None:
    ctx = _context(tmp_path, [(0, 100, 0), (100, 100, 0), (200, 100, 0)])
    # given out of log order, as values joined from several ranges may be
    rec = _records([(300, 100, 2, 0), (0, 100, 0, 0), (200, 100, 2, 0), (100, 100, 1, 0)])
    found, stats = check_queue(TOPIC, 0, rec, ctx)
    assert [f.kind for f in found] == ["queue_duplicate"]
    assert found[0].offset == 300
    assert stats is not None and stats.count == 4


def test_a_prepared_half_owns_no_queue_offset_and_no_unit(tmp_path: Path) -> None:
    ctx = _context(tmp_path, [(0, 100, 0), (200, 100, 0)])
    prepared = fmt.TRANSACTION_PREPARED_TYPE
    rec = _records([(0, 100, 0, 0), (100, 100, 0, prepared), (200, 100, 1, 0)])
    found, stats = check_queue(TOPIC, 0, rec, ctx)
    assert found == []
    assert stats is not None and (stats.count, stats.not_dispatched) == (2, 1)


def test_records_in_log_order_with_a_wrong_unit_give_its_finding(tmp_path: Path) -> None:
    ctx = _context(tmp_path, [(0, 100, 0), (100, 99, 0), (200, 100, 0)])
    rec = _records([(0, 100, 0, 0), (100, 100, 1, 0), (200, 100, 2, 0)])
    found, _ = check_queue(TOPIC, 0, rec, ctx)
    assert [(f.kind, f.offset) for f in found] == [("cq_wrong_size", 20)]


class _Columns:
    """What queue_records reads of a scan's RecordColumns."""

    def __init__(self, topic_id: list[int], queue_id: list[int]) -> None:
        n = len(topic_id)
        self.values = {
            "topic_id": np.array(topic_id, np.int64), "queue_id": np.array(queue_id, np.int64),
            "offset": np.arange(n, dtype=np.int64) * 100, "size": np.full(n, 100, np.int64),
            "queue_offset": np.arange(n, dtype=np.int64), "sys_flag": np.zeros(n, np.int64),
            "store_ts": np.arange(n, dtype=np.int64), "tags_code": np.zeros(n, np.int64),
        }  # fmt: skip
        self.topics = ["a", "b"]

    def column(self, name: str) -> np.ndarray:
        return self.values[name]


@pytest.mark.parametrize("big", [0, 1000, -7])
def test_records_are_grouped_per_queue_in_log_order_whatever_the_queue_ids(big: int) -> None:
    qids = [3 + big, 5, 3 + big, 5, 3 + big]
    packed = queue_records(_Columns([1, 0, 1, 0, 1], qids))  # type: ignore[arg-type]
    got = [(t, q, np.frombuffer(b, RECORD_DTYPE)["offset"].tolist()) for t, q, b in packed]
    groups = {("b", 3 + big): [0, 200, 400], ("a", 5): [100, 300]}
    assert got == sorted((t, q, offs) for (t, q), offs in groups.items())


def test_records_past_the_last_unit_are_one_missing_run(tmp_path: Path) -> None:
    ctx = _context(tmp_path, [(0, 100, 0)])
    rec = _records([(0, 100, 0, 0), (100, 100, 1, 0), (200, 100, 2, 0)])
    found, _ = check_queue(TOPIC, 0, rec, ctx)
    assert [(f.kind, f.offset) for f in found] == [("cq_missing", 20)]
    assert "queue offsets 1..2 (2 messages)" in found[0].detail


def test_a_bad_unit_is_reported_and_its_record_has_no_unit(tmp_path: Path) -> None:
    ctx = _context(tmp_path, [(0, 100, 0), (-5, 100, 0), (200, 100, 0)])
    rec = _records([(0, 100, 0, 0), (100, 100, 1, 0), (200, 100, 2, 0)])
    found, _ = check_queue(TOPIC, 0, rec, ctx)
    assert sorted((f.kind, f.offset) for f in found) == [("cq_bad_unit", 20), ("cq_missing", 20)]


def test_units_past_the_last_record_are_one_orphan_run(tmp_path: Path) -> None:
    ctx = _context(tmp_path, [(0, 100, 0), (100, 100, 0), (200, 100, 0)])
    rec = _records([(0, 100, 0, 0)])
    found, _ = check_queue(TOPIC, 0, rec, ctx)
    assert [(f.kind, f.offset) for f in found] == [("cq_orphan", 20)]
    assert "(2 units)" in found[0].detail
