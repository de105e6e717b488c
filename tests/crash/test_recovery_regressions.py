"""Deterministic reproductions of the engine bugs the randomized crash trials found.

Each test builds the exact disk state a trial stumbled on, so a regression shows up
on every run, not one run in forty.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mqstore import FlushDiskType, Message, MessageStore, PutStatus
from mqstore.commitlog.cursor import TORN_PROPERTIES
from mqstore.config import RecoveryPolicy
from tests.crash.lined_up import fixed_message, unsynced_store
from tests.helpers import check_consistency, make_store, reopen, scan_log, store_config
from tests.powerloss import PAGE, DiskModel, power_loss

pytestmark = pytest.mark.crash

FILE_SIZE = 16 * 1024


RECORD = 512
"""Record size of :func:`_fixed` messages: a sector, so records end on sector boundaries."""


def _fixed(i: int, size: int = RECORD) -> Message:
    """Messages whose records are all ``size`` bytes (so old and new ones line up)."""
    return fixed_message(f"message {i:04d} ", f"k{i:04d}", size)


def _async_store(tmp_path: Path, **cfg: object) -> MessageStore:
    return unsynced_store(tmp_path, FILE_SIZE, **cfg)


def _segment(root: Path) -> Path:
    return root / "commitlog" / f"{0:020d}"


def test_record_torn_inside_its_properties_is_cut_not_served(tmp_path: Path):
    """BODYCRC does not cover properties: zeroed trailing sectors used to pass."""
    s = _async_store(tmp_path)
    rs = [s.put_message(_fixed(i)) for i in range(5)]
    s.abandon()
    last = rs[-1]
    seg = _segment(s.root)
    data = bytearray(seg.read_bytes())
    data[last.physical_offset + last.size - 7 : last.physical_offset + last.size] = bytes(7)
    seg.write_bytes(bytes(data))
    s = reopen(s.cfg)
    try:
        assert s.recovery is not None
        assert TORN_PROPERTIES in s.recovery.stop_reason
        assert s.max_physical_offset == last.physical_offset
        assert s.look_message_by_offset(last.physical_offset) is None
        assert check_consistency(s.root, FILE_SIZE, end=s.max_physical_offset) == []
    finally:
        s.close()


def test_records_beyond_a_recovery_cut_never_come_back(tmp_path: Path):
    """Recovery zeroes the torn tail; unless that is synced before new records are
    appended at the cut, a second power loss can drop a page of new records and
    bring back old records after them, with queue offsets handed out again. (The
    "torn" record is made by flipping a byte of a synced one, which the KEEP policy
    rightly takes for damage: this runs under TRUNCATE, where any bad record cuts.)"""
    s = _async_store(tmp_path, recovery_policy=RecoveryPolicy.TRUNCATE)
    rs = [s.put_message(_fixed(i)) for i in range(40)]
    s.flush()
    s.close()
    # The last record of the first page is torn (bad CRC); the old records after it,
    # on the next pages, survived the first power loss intact.
    assert {r.size for r in rs} == {RECORD}
    k = PAGE // RECORD - 1
    cut = rs[k].physical_offset
    assert rs[k + 1].physical_offset == PAGE
    seg = _segment(s.root)
    data = bytearray(seg.read_bytes())
    data[cut + 100] ^= 0xFF
    seg.write_bytes(bytes(data))
    (s.root / "abort").write_text("crashed")

    model = DiskModel(s.root)
    with model.installed():
        s = reopen(s.cfg)
        assert s.max_physical_offset == cut
        new = s.put_message(_fixed(1000))
        assert (new.physical_offset, new.size) == (cut, rs[k].size)
        image = s.abandon()  # power fails before anything syncs the new record
    # The page holding the new record reached the disk, the pages after it did not.
    power_loss(
        image, random.Random(0), model, decide=lambda _p, page: "kept" if page == 0 else "dropped"
    )
    s = reopen(s.cfg)
    try:
        log = scan_log(s.root, FILE_SIZE)
        assert [phys for phys, _ in log.records][-1] == cut  # the new record ends the log
        assert s.max_physical_offset == cut + new.size
        assert check_consistency(s.root, FILE_SIZE, end=s.max_physical_offset) == []
    finally:
        s.close()


def test_abort_file_survives_a_power_loss(tmp_path: Path):
    """Without ``abort`` a crashed store runs normal recovery, which trusts all but the
    last three segments: the file must be durable once the store is open."""
    model = DiskModel(tmp_path / "store")
    with model.installed():
        image = make_store(tmp_path, message_index_enable=False).abandon()
    report = power_loss(image, random.Random(0), model, abort_lost=1.0)
    assert model.abort_synced
    assert not report.abort_lost
    assert (tmp_path / "store" / "abort").exists()


@pytest.mark.parametrize("clean", [True, False], ids=["clean-close", "crash"])
def test_queue_offsets_are_restored_across_many_segments(tmp_path: Path, clean: bool):
    """Normal recovery scans only the last three segments; the table must still count
    the records before them (it once took their offsets after the recovered ones')."""
    s = make_store(tmp_path, commitlog_file_size=4096, message_index_enable=False)
    for i in range(100):
        assert s.put_message(Message(topic="orders", body=bytes(200) + b"%d" % i)).status.ok
    if clean:
        s.close()
    else:
        s.abandon()
    assert len(list((s.root / "commitlog").iterdir())) > 3
    s = reopen(s.cfg)
    try:
        assert s.next_queue_offset("orders", 0) == 100
        assert s.put_message(Message(topic="orders", body=b"next")).queue_offset == 100
    finally:
        s.close()


def test_batch_results_carry_each_record_size(tmp_path: Path):
    s = make_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, message_index_enable=False)
    try:
        rs = s.put_messages([Message(topic="orders", body=b"x" * n) for n in (1, 10, 100)])
        assert all(r.status is PutStatus.PUT_OK for r in rs)
        for r in rs:
            rec = s.look_message_by_offset(r.physical_offset)
            assert rec is not None and r.size == rec.total_size > 0
    finally:
        s.close()


def test_store_config_helper_keeps_files_small(tmp_path: Path):
    cfg = store_config(tmp_path)
    assert cfg.commitlog_file_size <= 64 * 1024
    assert cfg.mapped_file_size_consume_queue <= 64 * 1024
