"""What keeps a small or preallocated store cheap to read: holes skipped, allocated bytes."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from mqstore.commitlog import format as fmt
from mqstore.message import host_bytes
from mqstore.tools.spark import audit, export, reindex
from mqstore.tools.spark.layout import discover
from mqstore.tools.spark.segscan import resync
from mqstore.tools.spark.session import QUICK_START_BYTES, quick_start

SEGMENT = 64 << 20
HOST = host_bytes(("127.0.0.1", 10911))


def _record(phys: int, body: bytes = b"hello") -> bytes:
    return fmt.encode_raw(
        queue_id=0, flag=0, queue_offset=0, physical_offset=phys, sys_flag=0,
        born_timestamp=1, born_host=HOST, store_timestamp=1, store_host=HOST,
        reconsume_times=0, prepared_transaction_offset=0, body=body,
        crc=fmt.body_crc(body), topic=b"t", properties=b"", version=1,
    )  # fmt: skip


def _sparse_segment(root: Path, writes: dict[int, bytes]) -> Path:
    seg = root / "commitlog" / f"{0:020d}"
    seg.parent.mkdir(parents=True)
    with open(seg, "wb") as f:
        f.truncate(SEGMENT)
        for at, data in writes.items():
            f.seek(at)
            f.write(data)
    return seg


def test_resync_finds_a_record_after_a_hole(tmp_path):
    """Past zeros and a hole, resync lands on the next record that names its position,
    however its first non-zero byte falls."""
    far = 40 << 20
    seg = _sparse_segment(tmp_path, {0: _record(0), far: _record(far)})
    with open(seg, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        first_end = len(_record(0))
        assert resync(mm, 0, first_end, SEGMENT, str(seg)) == far
        assert resync(mm, 0, far + 1, SEGMENT, str(seg)) is None


def test_allocated_bytes_leave_out_a_preallocated_tail(tmp_path):
    """A 64 MiB segment with one record written counts its written blocks, not 64 MiB."""
    _sparse_segment(tmp_path, {0: _record(0)})
    layout = discover(tmp_path)
    assert layout.total_bytes == SEGMENT
    if os.stat(layout.segments[0].path).st_blocks * 512 < SEGMENT:  # the fs makes holes
        assert layout.data_bytes() <= 1 << 20


def test_a_large_input_keeps_the_optimising_jvm_for_a_job_whose_jvm_works():
    assert not quick_start(QUICK_START_BYTES + 1)
    assert not quick_start(None)
    assert quick_start(QUICK_START_BYTES)


def test_a_job_whose_work_runs_in_python_starts_the_quick_jvm_at_any_size():
    """Audit and reindex: the JVM only schedules tasks and moves small results, so C2's
    compile threads would cost seconds of CPU for nothing, at any store size."""
    assert quick_start(1 << 40, jvm_work=False)
    assert quick_start(None, jvm_work=False)


def test_audit_and_reindex_leave_the_work_to_python_and_export_to_the_jvm():
    assert (audit.JVM_WORK, reindex.JVM_WORK, export.JVM_WORK) == (False, False, True)
