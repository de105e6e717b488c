"""Recovery: torn tails are truncated, not corruption; start files; the real RocketMQ log."""

from __future__ import annotations

import shutil
from pathlib import Path

from mqstore import Message, MessageStore, StoreConfig
from mqstore.checkpoint import Checkpoint
from mqstore.commitlog import format as fmt
from mqstore.commitlog.recovery import RecoveryMode, abnormal_start_index
from mqstore.commitlog.segments import Segments
from mqstore.config import RecoveryPolicy

SIZE = 16 * 1024


def cfg(root: Path, **kw) -> StoreConfig:
    return StoreConfig(root_dir=root, commitlog_file_size=SIZE, **kw)


def fill(root: Path, n: int, **kw) -> list[int]:
    with MessageStore.open(cfg(root, **kw)) as s:
        return [
            s.put_message(Message(topic="t", body=f"m{i}".encode() * 20)).physical_offset
            for i in range(n)
        ]


def segment(root: Path, start: int = 0) -> Path:
    return root / "commitlog" / f"{start:020d}"


def test_clean_shutdown_without_trust_runs_normal_recovery(tmp_path: Path):
    fill(tmp_path, 5)
    with MessageStore.open(cfg(tmp_path, trust_clean_close=False)) as s:
        assert s.recovery is not None
        assert s.recovery.mode is RecoveryMode.NORMAL
        assert s.recovery.records == 5


def test_abort_file_forces_abnormal_recovery(tmp_path: Path):
    s = MessageStore.open(cfg(tmp_path))
    s.put_message(Message(topic="t", body=b"x"))
    s.abandon()
    assert (tmp_path / "abort").exists()
    with MessageStore.open(cfg(tmp_path)) as s2:
        assert s2.recovery is not None
        assert s2.recovery.mode is RecoveryMode.ABNORMAL
    assert not (tmp_path / "abort").exists()


def test_torn_tail_is_truncated_not_reported_as_corruption(tmp_path: Path):
    offs = fill(tmp_path, 4)
    path = segment(tmp_path)
    data = bytearray(path.read_bytes())
    # tear the last record: keep only its first 30 bytes
    last = offs[-1]
    data[last + 30 : last + 400] = bytes(370)
    path.write_bytes(bytes(data))
    with MessageStore.open(cfg(tmp_path)) as s:
        assert s.recovery is not None
        assert s.recovery.end_offset == last
        assert s.max_physical_offset == last
        assert s.next_queue_offset("t", 0) == 3
        assert s.put_message(Message(topic="t", body=b"after")).queue_offset == 3


def test_stale_bytes_after_cut_are_zeroed(tmp_path: Path):
    offs = fill(tmp_path, 3)
    path = segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[offs[1] + 95] ^= 0xFF  # corrupt record 1's body: records 1 and 2 are cut
    path.write_bytes(bytes(data))
    with MessageStore.open(cfg(tmp_path, recovery_policy=RecoveryPolicy.TRUNCATE)) as s:
        assert s.max_physical_offset == offs[1]
    assert path.read_bytes()[offs[1] : offs[1] + 2000] == bytes(2000)


def test_crc_failure_stops_recovery_at_that_record(tmp_path: Path):
    offs = fill(tmp_path, 3)
    path = segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[offs[2] + 100] ^= 0x01
    path.write_bytes(bytes(data))
    with MessageStore.open(cfg(tmp_path, recovery_policy=RecoveryPolicy.TRUNCATE)) as s:
        assert s.recovery is not None
        assert "bad_crc" in s.recovery.stop_reason
        assert [r.physical_offset for r in s.iter_records()] == offs[:2]


def test_recovery_continues_across_blank_ended_segments(tmp_path: Path):
    offs = fill(tmp_path, 200)
    assert offs[-1] > 2 * SIZE
    with MessageStore.open(cfg(tmp_path)) as s:
        assert s.recovery is not None
        assert s.recovery.end_offset == s.max_physical_offset > offs[-1]
        assert len(s.iter_records()) == 200


def test_abnormal_recovery_starts_from_newest_segment_older_than_checkpoint(tmp_path: Path):
    fill(tmp_path, 300)
    segs = Segments(tmp_path / "commitlog", SIZE)
    segs.load()
    assert len(segs.files) >= 4
    first_of_2 = fmt.decode(segs.files[2].view, 0)
    assert isinstance(first_of_2, fmt.Record)
    cp = Checkpoint(tmp_path / "checkpoint")
    cp.physic_msg_timestamp = cp.logics_msg_timestamp = first_of_2.record.store_timestamp + 3000
    assert abnormal_start_index(segs, cp) >= 2
    cp.physic_msg_timestamp = cp.logics_msg_timestamp = 0
    assert abnormal_start_index(segs, cp) == 0
    cp.close()
    segs.close()


def test_real_rocketmq_commitlog_recovers_to_its_blank_record(real_store_copy: Path):
    with MessageStore.open(StoreConfig(root_dir=real_store_copy, commitlog_file_size=8192)) as s:
        assert s.recovery is not None
        assert (s.recovery.records, s.recovery.end_offset) == (47, 8084)
        assert s.next_queue_offset("abc", 0) == 47
        r = s.put_message(Message(topic="abc", body=b"written by mqstore"))
        assert (r.physical_offset, r.queue_offset) == (8192, 47)
    log0 = (real_store_copy / "commitlog" / "00000000000000000000").read_bytes()
    assert isinstance(fmt.decode(log0, 8084), fmt.EndOfSegment)
    with MessageStore.open(StoreConfig(root_dir=real_store_copy, commitlog_file_size=8192)) as s:
        assert len(s.iter_records()) == 48


def test_real_rocketmq_store_with_abort_file_recovers_abnormally(
    real_store_copy: Path, real_fixtures: Path
):
    shutil.copy(real_fixtures / "shaoxubao-c4dcaab0" / "abort", real_store_copy / "abort")
    with MessageStore.open(StoreConfig(root_dir=real_store_copy, commitlog_file_size=8192)) as s:
        assert s.recovery is not None
        assert s.recovery.mode is RecoveryMode.ABNORMAL
        assert s.recovery.end_offset == 8084
