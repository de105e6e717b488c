"""Queue checks split over scan ranges (tools.spark.queueparts): each range's part checked
in its task, the parts joined on the driver, give what the whole-queue check
(tools.spark.queues.check_queue) gives for the same records and ConsumeQueue files."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.commitlog import format as fmt
from mqstore.consumequeue import format as cqfmt
from mqstore.tools.spark.layout import CqFile
from mqstore.tools.spark.queueparts import check_all, merge, part
from mqstore.tools.spark.queues import QueueContext, check_queue

TOPIC = "orders"
PER_FILE = 8  # units per ConsumeQueue file: queues span several files
FLAGS = (0, 0, 0, fmt.TRANSACTION_COMMIT_TYPE, fmt.TRANSACTION_PREPARED_TYPE,
         fmt.TRANSACTION_ROLLBACK_TYPE)  # fmt: skip
UNIT_KINDS = ("right", "right", "right", "offset", "size", "tags", "zero", "blank", "bad",
              "none")  # fmt: skip


def _columns(rows: list[tuple[int, int, int, int, int]]) -> dict[str, np.ndarray]:
    """Columns of records given as (offset, size, queue offset, sys_flag, tag code)."""
    a = np.array(rows, np.int64).reshape(-1, 5)
    return {
        "offset": a[:, 0], "size": a[:, 1], "queue_offset": a[:, 2], "sys_flag": a[:, 3],
        "store_ts": a[:, 0] // 10 + 1000, "tags_code": a[:, 4],
    }  # fmt: skip


def _unit(kind: str, rec: tuple[int, int, int, int, int] | None) -> bytes:
    off, size, _, _, tags = rec or (5000, 77, 0, 0, 3)  # no record: an orphan's values
    return {
        "right": cqfmt.encode_unit(off, size, tags),
        "offset": cqfmt.encode_unit(off + 1, size, tags),
        "size": cqfmt.encode_unit(off, size + 1, tags),
        "tags": cqfmt.encode_unit(off, size, tags + 1),
        "zero": bytes(cqfmt.UNIT_SIZE),
        "blank": cqfmt.BLANK_UNIT,
        "bad": cqfmt.encode_unit(-5, size, tags),
        "none": b"",
    }[kind]


def _files(root: Path, units: list[bytes], short_last: bool) -> tuple[CqFile, ...]:
    """The units written PER_FILE to a file (a unit of b"" ends the files there)."""
    data = b""
    for u in units:
        if not u:
            break
        data += u
    size = PER_FILE * cqfmt.UNIT_SIZE
    out = []
    for start in range(0, max(len(data), 1), size):
        chunk = data[start : start + size]
        path = root / f"{start:020d}"
        last = start + size >= len(data)
        path.write_bytes(chunk if last and short_last else chunk.ljust(size, b"\0"))
        rel = f"consumequeue/{TOPIC}/0/{path.name}"
        cq = CqFile(str(path), rel, TOPIC, 0, start // cqfmt.UNIT_SIZE, path.stat().st_size)
        out.append(cq)
    return tuple(out)


@st.composite
def queues(draw: st.DrawFn) -> dict[str, Any]:
    """Records of one queue in log order with odd queue offsets and flags, units of
    every kind for them (and past them), and cuts of the records into ranges."""
    n = draw(st.integers(0, 24))
    rows: list[tuple[int, int, int, int, int]] = []
    qo, off = draw(st.integers(0, 2)), 100
    for _ in range(n):
        qo = max(0, qo + draw(st.sampled_from((1, 1, 1, 1, 0, 2, 3, -2))))
        size = draw(st.integers(60, 90))
        rows.append((off, size, qo, draw(st.sampled_from(FLAGS)), draw(st.integers(0, 3))))
        off += size
    disp = {fmt.TRANSACTION_NOT_TYPE, fmt.TRANSACTION_COMMIT_TYPE}
    first: dict[int, tuple[int, int, int, int, int]] = {}
    for r in rows:
        if r[3] & fmt.TRANSACTION_MASK in disp:
            first.setdefault(r[2], r)
    top = max(first, default=-1) + draw(st.integers(0, 3))
    units = [_unit(draw(st.sampled_from(UNIT_KINDS)), first.get(q)) for q in range(top + 1)]
    cuts = sorted(set(draw(st.lists(st.integers(0, n), max_size=4))))
    return {
        "rows": rows, "units": units, "cuts": cuts, "short_last": draw(st.booleans()),
        "min_offset": draw(st.sampled_from((0, 0, 150))), "dir": draw(st.booleans()),
        "lost": draw(st.sampled_from(((), ((2, 4),)))),
    }  # fmt: skip


def _context(q: dict[str, Any], root: Path) -> QueueContext:
    files = _files(root, q["units"], q["short_last"])
    cq_files = {(TOPIC, 0): files} if q["dir"] else {}
    lost = {(TOPIC, 0): q["lost"]} if q["lost"] else {}
    return QueueContext((0,), ("commitlog/00000000000000000000",), q["min_offset"],
                        cq_files, lost, PER_FILE * cqfmt.UNIT_SIZE)  # fmt: skip


def _parts(q: dict[str, Any], ctx: QueueContext) -> list:
    rows, bounds = q["rows"], [0, *q["cuts"], len(q["rows"])]
    return [
        part(TOPIC, 0, _columns(rows[a:b]), ctx, rows[a][0])
        for a, b in itertools.pairwise(bounds)
        if b > a
    ]


@given(queues())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_parts_joined_give_the_whole_queue_check(q: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ctx = _context(q, Path(tmp))
        want_found, want_stats = check_queue(TOPIC, 0, _columns(q["rows"]), ctx)
        parts = _parts(q, ctx)
        got = merge(TOPIC, 0, parts, ctx) if parts else None
        disp = {fmt.TRANSACTION_NOT_TYPE, fmt.TRANSACTION_COMMIT_TYPE}
        owners: dict[int, set[int]] = {}
        bounds = [0, *q["cuts"], len(q["rows"])]
        for k, (a, b) in enumerate(itertools.pairwise(bounds)):
            for r in q["rows"][a:b]:
                if r[3] & fmt.TRANSACTION_MASK in disp:
                    owners.setdefault(r[2], set()).add(k)
        shared = any(len(v) > 1 for v in owners.values())
        if not parts:
            assert want_stats is None
            return
        if got is None:  # only when a queue offset has records in two ranges
            assert shared
            return
        found, stats = got
        assert sorted(found) == sorted(want_found)
        assert stats == want_stats


@pytest.mark.parametrize("shared", [False, True])
def test_a_queue_offset_in_two_ranges_is_left_to_the_records(tmp_path: Path, shared: bool) -> None:
    rows = [(100, 80, 0, 0, 0), (180, 80, 1, 0, 0), (260, 80, 1 if shared else 2, 0, 0)]
    units = [cqfmt.encode_unit(o, s, t) for o, s, _, _, t in rows]
    q = {"units": units, "short_last": False, "min_offset": 0, "dir": True, "lost": ()}
    ctx = _context(q, tmp_path)
    parts = [
        part(TOPIC, 0, _columns(rows[:2]), ctx, 100),
        part(TOPIC, 0, _columns(rows[2:]), ctx, 260),
    ]
    found, stats, redo = check_all(parts, [], ctx, [(TOPIC, 0)])
    assert redo == ({(TOPIC, 0)} if shared else set())
    if shared:
        assert (found, stats) == ([], [])  # the audit reads its records by a second job
    else:
        assert (found, [s.count for s in stats]) == ([], [3])


def test_a_queue_whose_files_overlap_sends_its_records(tmp_path: Path) -> None:
    import time

    from mqstore.tools.spark.layout import discover
    from mqstore.tools.spark.queueparts import QueuePart
    from mqstore.tools.spark.reader import plan_ranges
    from mqstore.tools.spark.tasks import audit_task
    from tests.spark.storegen import build_store

    gen = build_store(tmp_path / "s", 60)
    first = gen.cq_path("orders", 0)
    (first.parent / f"{cqfmt.UNIT_SIZE:020d}").write_bytes(first.read_bytes()[20:])  # units 1..
    layout = discover(gen.root)
    ctx = QueueContext.of(layout, [])
    assert ctx.packed == {("orders", 0)}
    now = int(time.time() * 1000)
    out = [v for rng in plan_ranges(layout) for v in audit_task([rng], now, None, ctx)]
    sent = {(v[0], v[1]): type(v[2]) for v in out if isinstance(v, tuple) and len(v) == 3}
    assert sent == {("orders", 0): bytes}
    assert {(p.topic, p.queue_id) for p in out if isinstance(p, QueuePart)} == {
        k for k in layout.cq_queues if k != ("orders", 0)
    }
