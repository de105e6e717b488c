"""Many queues cost what they hold: sparse files, a bounded set of mappings, flushes of
what is dirty (issue 14).

Queue files are sized but allocated as units are written (a page reserved ahead of
the write position); only the files in use are mapped (``MappingPool``); a reader
whose file was unmapped mid-read keeps its view and remaps for the next read; a full
disk at a reservation is an ``OSError`` from ``put`` (nothing written), never SIGBUS;
for a store, a refused put (CREATE_MAPPED_FILE_FAILED) with nothing acknowledged lost.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore import Message, MessageStore, PutStatus, faults
from mqstore.consumequeue.format import UNIT_SIZE
from mqstore.consumequeue.mappings import MappingPool
from mqstore.consumequeue.queue import ConsumeQueue
from mqstore.consumequeue.store import ConsumeQueueStore
from tests.cq_consistency import check_cq_consistency
from tests.helpers import make_store, mounted_tmpfs, reopen

FILE_SIZE = 300_000 * UNIT_SIZE  # RocketMQ's default queue file: 5.7 MiB


def allocated(path: Path) -> int:
    """Bytes really allocated under ``path`` (``du``)."""
    if path.is_file():
        return path.stat().st_blocks * 512
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_queue_file_with_one_unit_occupies_one_page_of_disk(tmp_path: Path):
    cq = ConsumeQueue(tmp_path / "T" / "0", "T", 0, FILE_SIZE)
    assert cq.put(1000, 200, 7, 0)
    cq.flush(0)
    (f,) = (tmp_path / "T" / "0").iterdir()
    assert f.stat().st_size == FILE_SIZE
    assert allocated(f) <= 8 * 1024
    cq.close()


def test_a_queue_file_is_allocated_as_its_units_grow(tmp_path: Path):
    cq = ConsumeQueue(tmp_path / "T" / "0", "T", 0, FILE_SIZE)
    for i in range(1000):  # 20,000 bytes: five pages
        cq.put(1000 + i * 100, 100, 0, i)
    (f,) = (tmp_path / "T" / "0").iterdir()
    assert 20_000 <= allocated(f) <= 28 * 1024
    assert [cq.unit_at(q) for q in (0, 999)] == [(1000, 100, 0), (1000 + 999 * 100, 100, 0)]
    cq.close()


def test_unmapped_mid_read_a_queue_returns_the_same_units(tmp_path: Path):
    pool = MappingPool(1)
    a = ConsumeQueue(tmp_path / "A" / "0", "A", 0, 100 * UNIT_SIZE, pool)
    b = ConsumeQueue(tmp_path / "B" / "0", "B", 0, 100 * UNIT_SIZE, pool)
    for i in range(250):  # three files
        a.put(10_000 + i * 50, 50, i, i)
    b.put(1, 1, 0, 0)
    expected = [a.unit_at(q) for q in range(250)]
    held = a.units_from(120)  # a view of A's second file
    assert held is not None
    got = []
    for q in range(250):
        got.append(a.unit_at(q))
        assert b.unit_at(0) == (1, 1, 0)  # maps B's file: A's is unmapped
        assert not any(mf.is_mapped for mf in a.segments.files)
    assert got == expected
    assert bytes(held[:UNIT_SIZE]) == bytes(a.units_from(120)[:UNIT_SIZE])  # type: ignore[index]
    a.close()
    b.close()


def test_puts_round_robin_over_more_queues_than_the_pool_maps_map_no_file(tmp_path: Path):
    # Mapping an evicted queue's file to write one unit would evict another queue's
    # file, which the next put maps again: a written queue file that is not mapped is
    # written without mapping it.
    queues = ConsumeQueueStore(tmp_path, 1000 * UNIT_SIZE, max_mapped_files=2)
    for q in range(3):
        for i in range(10):
            queues.put("T", i, 100 + (q * 10 + i) * 10, 10, 0, q, 1)
    assert len(queues.pool) == 0
    assert [queues.find("T", i).unit_at(2) for i in (0, 9)] == [(300, 10, 0), (390, 10, 0)]
    queues.close()


def test_idle_queues_hold_no_mapping_and_no_descriptor(tmp_path: Path):
    queues = ConsumeQueueStore(tmp_path, 1000 * UNIT_SIZE, max_mapped_files=16)
    before = open_fds()
    for i in range(500):
        queues.put(f"T{i // 50}", i % 50, 100 + i * 10, 10, 0, 0, 1)
    assert len(queues.pool) <= 16
    mapped = sum(mf.is_mapped for cq in queues.all() for mf in cq.segments.files)
    assert mapped <= 16
    assert open_fds() - before <= 2 * 16 + 4  # a mapping's descriptor and mmap's copy
    assert all(queues.find(f"T{i // 50}", i % 50).unit_at(0) == (100 + i * 10, 10, 0)
               for i in range(500))  # fmt: skip
    queues.close()


def _one_unit_in_each_of_100_queues(directory: Path) -> ConsumeQueueStore:
    """Queues T/0..T/99 in ``directory``, one unit each (queue i's points at 100 + 10 i),
    nothing flushed."""
    queues = ConsumeQueueStore(directory, 1000 * UNIT_SIZE)
    for i in range(100):
        queues.put("T", i, 100 + i * 10, 10, 0, 0, 1)
    return queues


def test_a_flush_visits_only_the_queues_written_since(tmp_path: Path):
    queues = _one_unit_in_each_of_100_queues(tmp_path)
    assert queues.dirty_count == 100
    queues.flush(0)
    assert queues.dirty_count == 0
    assert all(cq.flushed_all for cq in queues.all())
    queues.put("T", 7, 5000, 10, 0, 1, 2)
    assert queues.dirty_count == 1
    queues.close()


def test_a_periodic_flush_after_writes_paused_syncs_every_queue_waiting(tmp_path: Path):
    # One unit per queue never reaches two pages: without a sync once writes pause,
    # the units of a burst over many queues waited for the complete flush or the close.
    queues = _one_unit_in_each_of_100_queues(tmp_path)
    queues.flush(2)  # the round that finds them written: each below two pages
    assert queues.dirty_count == 100
    queues.flush(2)  # nothing written since that round: every queue waiting is synced
    assert queues.dirty_count == 0
    assert all(cq.flushed_all for cq in queues.all())
    queues.close()


def test_a_close_syncs_no_queue_without_unflushed_units(tmp_path: Path):
    s = _store(tmp_path)
    for i in range(100):
        assert s.put_message(Message(topic=f"T{i // 10}", body=b"x", queue_id=i % 10)).status.stored
    assert s.wait_dispatched(30)
    for _ in range(10):  # writes paused: the round after one that saw them syncs them
        if not s.queues.dirty_count:
            break
        s.logics.flusher.flush_once()
    assert s.queues.dirty_count == 0
    synced: list[str] = []
    queue_dir = str(s.cfg.consume_queue_path)
    with faults.inject("before_fdatasync", lambda what, **_: synced.append(what)):
        s.close()
    # Neither a queue file's fdatasync nor a syncfs of the queues' filesystem; the
    # close did sync the rest (the checkpoint, the queue summary beside the queues).
    assert [w for w in synced if queue_dir + os.sep in w or w.endswith(queue_dir)] == []
    assert any(w.endswith("consumequeue.summary.tmp") for w in synced)


def test_a_full_disk_at_a_reservation_fails_the_unit_before_writing_it(tmp_path: Path):
    cq = ConsumeQueue(tmp_path / "T" / "0", "T", 0, FILE_SIZE)
    for i in range(204):  # the first page: 204 units
        cq.put(1000 + i * 10, 10, 0, i)

    def enospc(**_context: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    faults.register("before_reserve", enospc)
    try:
        with pytest.raises(OSError, match="No space"):
            cq.put(1000 + 204 * 10, 10, 0, 204)
        assert cq.max_offset == 204
    finally:
        faults.clear("before_reserve")
    assert cq.put(1000 + 204 * 10, 10, 0, 204)  # space again: the same unit goes in
    assert cq.unit_at(204) == (1000 + 204 * 10, 10, 0)
    cq.close()


def _store(tmp_path: Path, **cfg: object) -> MessageStore:
    sizes: dict[str, object] = {
        "commitlog_file_size": 4 << 20,
        "commitlog_reserve_chunk": 256 << 10,
        "mapped_file_size_consume_queue": 3000 * UNIT_SIZE,  # 60 KB: the checker reads it all
        "max_hash_slot_num": 1024,
        "max_index_num": 8192,
        "max_mapped_consume_queue_files": 64,
    }
    sizes.update(cfg)
    return make_store(tmp_path, **sizes)


@pytest.mark.slow
def test_a_store_with_thousands_of_queues_stays_within_its_disk_budget(tmp_path: Path):
    s = _store(tmp_path)
    n = 2000
    for i in range(n):
        r = s.put_message(Message(topic=f"T{i // 100}", body=b"m%d" % i, queue_id=i % 100))
        assert r.status is PutStatus.PUT_OK
    assert s.wait_dispatched(120)
    cfg, held = s.cfg, s.max_physical_offset
    s.close()
    assert allocated(cfg.consume_queue_path) <= n * 8 * 1024  # 60 KB files, a page each
    (segment,) = cfg.commitlog_path.iterdir()
    assert segment.stat().st_size == 4 << 20
    assert allocated(segment) <= held + (256 << 10) + 4096  # held plus the reservation
    s = reopen(cfg)
    try:
        for i in range(0, n, 97):
            got = s.get_message("g", f"T{i // 100}", i % 100, 0, 4)
            assert [m.body for m in got.messages] == [b"m%d" % i]
        assert len(s.logics.queues.pool) <= 64
    finally:
        s.close()
    assert check_cq_consistency(cfg.root, cfg) == []


def test_a_commitlog_segment_reserves_ahead_and_a_full_disk_refuses_the_put(tmp_path: Path):
    s = _store(tmp_path)
    body = bytes(1000)
    for _ in range(200):  # ~230 KB: inside the first reservation
        assert s.put_message(Message(topic="T", body=body)).status is PutStatus.PUT_OK
    (segment,) = s.cfg.commitlog_path.iterdir()
    assert allocated(segment) <= (256 + 8) << 10

    def enospc(**_context: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    faults.register("before_reserve", enospc)
    try:
        refused = [s.put_message(Message(topic="T", body=body)).status for _ in range(100)]
    finally:
        faults.clear("before_reserve")
    assert PutStatus.CREATE_MAPPED_FILE_FAILED in refused
    stored = 200 + refused.count(PutStatus.PUT_OK)
    for _ in range(100):  # space again: puts go on past the old reservation
        assert s.put_message(Message(topic="T", body=body)).status is PutStatus.PUT_OK
    assert s.wait_dispatched(30)
    assert s.get_message("g", "T", 0, 0, 1).max_offset == stored + 100
    cfg = s.cfg
    s.close()
    assert check_cq_consistency(cfg.root, cfg) == []


FULL_DISK_CHILD = r"""
import os, sys, time
from pathlib import Path
from mqstore import Message, PutStatus
from tests.helpers import make_store, mounted_tmpfs, reopen
from tests.cq_consistency import check_cq_consistency

mnt = Path(sys.argv[1])
# Sparse CommitLog segments and queue files on a small tmpfs, the disk guard off (ratio
# 1.0): only the reservations stand between a full disk and SIGBUS. Puts are acked
# ahead of the dispatcher, whose queue files (a page each) then need more than the
# space left: the tmpfs is large enough to hold them once the filler goes.
s = make_store(mnt, commitlog_file_size=1 << 20, commitlog_reserve_chunk=64 << 10,
               mapped_file_size_consume_queue=3000 * 20, max_hash_slot_num=256,
               max_index_num=2048, max_mapped_consume_queue_files=16,
               disk_space_warning_level_ratio=1.0, clean_resource_interval_ms=50)
with open(mnt / "filler", "wb", buffering=0) as f:  # leave 256 KiB
    st = os.statvfs(mnt)
    f.write(bytes(max(0, st.f_bavail * st.f_frsize - (256 << 10))))
acked, refused = [], []
for i in range(5000):  # a new queue per message
    topic, qid = f"T{i // 100}", i % 100
    r = s.put_message(Message(topic=topic, body=b"m%d" % i, queue_id=qid))
    if r.status is PutStatus.PUT_OK:
        acked.append((topic, qid, r.queue_offset, b"m%d" % i))
    else:
        refused.append(r)
        if len(refused) > 20:
            break
assert refused, "the disk never filled"
assert {r.status for r in refused} <= {PutStatus.CREATE_MAPPED_FILE_FAILED}, refused[:3]
assert all("No space" in r.error for r in refused), refused[0]
(mnt / "filler").unlink()
assert s.put_message(Message(topic="after", body=b"after")).status is PutStatus.PUT_OK
end = time.monotonic() + 60
while time.monotonic() < end and s.dispatch_behind_bytes:
    time.sleep(0.05)
assert s.dispatch_behind_bytes == 0, "dispatch did not resume"
for topic, qid, qoff, body in acked:
    got = s.get_message("g", topic, qid, qoff, 1)
    assert [m.body for m in got.messages] == [body], (topic, qid, qoff, got.status)
cfg = s.cfg
s.close()
assert check_cq_consistency(cfg.root, cfg) == []
print("ok", len(acked), len(refused))
"""


@pytest.mark.slow
def test_a_full_disk_while_many_queues_are_created_refuses_puts_and_loses_nothing(
    tmp_path: Path,
):
    with mounted_tmpfs(tmp_path, "32m") as mnt:
        child = subprocess.run(
            [sys.executable, "-c", FULL_DISK_CHILD, str(mnt)],
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert child.returncode == 0, f"child exited {child.returncode}:\n{child.stderr[-3000:]}"
    assert child.stdout.startswith("ok ")


def test_a_new_queue_writes_its_first_unit_without_mapping_its_file(tmp_path: Path):
    pool = MappingPool(4)
    cq = ConsumeQueue(tmp_path / "T" / "0", "T", 0, FILE_SIZE, pool)
    fds = open_fds()
    assert cq.put(1000, 200, 7, 0)
    assert len(pool) == 0
    assert open_fds() == fds  # the creation descriptor is closed after the write
    assert allocated(tmp_path / "T" / "0") <= 8 * 1024
    assert cq.unit_at(0) == (1000, 200, 7)
    assert cq.put(1200, 200, 7, 1)  # later units go through the mapping
    assert [cq.unit_at(q) for q in (0, 1)] == [(1000, 200, 7), (1200, 200, 7)]
    cq.close()


def test_a_full_disk_at_a_new_queues_first_unit_fails_it_and_the_same_unit_goes_in_later(
    tmp_path: Path,
):
    cq = ConsumeQueue(tmp_path / "T" / "0", "T", 0, FILE_SIZE)

    def enospc(**_context: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    faults.register("before_reserve", enospc)
    try:
        with pytest.raises(OSError, match="No space"):
            cq.put(1000, 10, 0, 0)
        assert cq.max_offset == 0
    finally:
        faults.clear("before_reserve")
    assert cq.put(1000, 10, 0, 0)
    assert cq.unit_at(0) == (1000, 10, 0)
    cq.close()


def test_a_periodic_flush_looks_only_at_the_queues_written_since_the_last_one(tmp_path: Path):
    queues = _one_unit_in_each_of_100_queues(tmp_path)
    assert queues.touched_count == 100
    queues.flush(2)  # one unit each: below two pages, nothing synced
    assert (queues.dirty_count, queues.touched_count) == (100, 0)
    for k in range(410):  # two pages of queue 7
        queues.put("T", 7, 10_000 + k * 10, 10, 0, 1 + k, 2)
    assert queues.touched_count == 1
    queues.flush(2)
    assert queues.dirty_count == 99  # queue 7 passed two pages: synced
    assert queues.find("T", 7).flushed_all  # type: ignore[union-attr]
    queues.flush(0)
    assert (queues.dirty_count, queues.touched_count) == (0, 0)
    queues.close()


def test_a_periodic_flush_syncs_a_backlog_of_small_queues_at_once(tmp_path: Path):
    from mqstore.consumequeue.store import SYNCFS_BACKLOG

    queues = ConsumeQueueStore(tmp_path, 1000 * UNIT_SIZE)
    for i in range(SYNCFS_BACKLOG):
        queues.put(f"T{i // 100}", i % 100, 100 + i * 10, 10, 0, 0, 1)
    queues.flush(2)  # each below two pages, but too many waiting for the complete flush
    assert queues.dirty_count == 0
    assert all(cq.flushed_all for cq in queues.all())
    queues.close()
