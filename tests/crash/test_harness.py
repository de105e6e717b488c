"""The crash harness itself: the consistency checker finds what it claims to find, and
the power-loss layer does what its model says (tests/helpers.py, tests/powerloss.py).

A checker that never complains and a fault layer that never loses anything would make
every crash test pass, so each promise is tested against a log damaged on purpose.
"""

from __future__ import annotations

import errno
import os
import random
import struct
from pathlib import Path

import pytest

from mqstore import FlushDiskType, Message, PutStatus, _platform
from mqstore.commitlog import format as fmt
from mqstore.message_store import CrashImage
from tests.commitlog.test_cursor import plain_record
from tests.helpers import check_consistency, make_store, reopen, scan_log
from tests.powerloss import PAGE, SECTOR, DiskModel, power_loss
from tests.sabotage import set_bytes

pytestmark = pytest.mark.crash

FILE_SIZE = 8192


def _log(tmp_path: Path, n: int = 30, **cfg) -> tuple[Path, list]:
    """A closed store with ``n`` messages over several 8 KiB segments; (root, results)."""
    s = make_store(tmp_path, commitlog_file_size=FILE_SIZE, message_index_enable=False, **cfg)
    rs = [
        s.put_message(Message(topic="orders", body=b"body %03d " % i + bytes(300), queue_id=i % 2))
        for i in range(n)
    ]
    s.close()
    return s.root, rs


def _patch(root: Path, offset: int, data: bytes) -> None:
    seg = root / "commitlog" / f"{offset - offset % FILE_SIZE:020d}"
    buf = seg.read_bytes()
    seg.write_bytes(set_bytes(buf, offset % FILE_SIZE, data))


def _problems(root: Path) -> str:
    return "\n".join(check_consistency(root, FILE_SIZE))


# ------------------------------------------------------------ the checker


def test_checker_passes_a_clean_log(tmp_path: Path):
    root, rs = _log(tmp_path)
    assert check_consistency(root, FILE_SIZE, end=rs[-1].physical_offset + rs[-1].size) == []
    assert len(scan_log(root, FILE_SIZE).records) == len(rs)


def test_checker_reports_a_bad_body_crc(tmp_path: Path):
    root, rs = _log(tmp_path)
    _patch(root, rs[25].physical_offset + rs[25].size - 120, b"\xff")  # a body byte
    assert "bad_crc" in _problems(root)


def test_checker_reports_a_segment_that_does_not_end_in_a_blank(tmp_path: Path):
    root, rs = _log(tmp_path)
    _patch(root, rs[3].physical_offset + fmt.MAGIC_POS, b"\0\0\0\1")
    assert "ends without a blank record" in _problems(root)


def test_checker_reports_a_wrong_physical_offset_field(tmp_path: Path):
    root, rs = _log(tmp_path)
    _patch(root, rs[2].physical_offset + fmt.PHYSICAL_OFFSET_POS, struct.pack(">q", 12345))
    assert f"record at {rs[2].physical_offset} says PHYSICALOFFSET 12345" in _problems(root)


def test_checker_reports_a_duplicate_queue_offset(tmp_path: Path):
    root, rs = _log(tmp_path)
    q = struct.pack(">q", rs[2].queue_offset - 1)  # rs[2] repeats rs[0]'s offset in queue 0
    _patch(root, rs[2].physical_offset + fmt.QUEUE_OFFSET_POS, q)
    assert "duplicate: orders-0" in _problems(root)


def test_checker_reports_a_queue_offset_gap(tmp_path: Path):
    root, rs = _log(tmp_path)
    q = struct.pack(">q", rs[2].queue_offset + 1)
    _patch(root, rs[2].physical_offset + fmt.QUEUE_OFFSET_POS, q)
    assert "gap: orders-0" in _problems(root)


def test_checker_accepts_transaction_half_messages_without_queue_offsets(tmp_path: Path):
    s = make_store(tmp_path, commitlog_file_size=FILE_SIZE)
    s.put_message(Message(topic="orders", body=b"a"))
    half = s.put_message(Message(topic="orders", body=b"h", sys_flag=fmt.TRANSACTION_PREPARED_TYPE))
    s.put_message(Message(topic="orders", body=b"b"))
    s.close()
    assert half.queue_offset == 0
    assert check_consistency(s.root, FILE_SIZE) == []
    _patch(s.root, half.physical_offset + fmt.QUEUE_OFFSET_POS, struct.pack(">q", 1))
    assert "half/rollback record" in _problems(s.root)


def test_checker_reports_a_blank_record_in_the_middle(tmp_path: Path):
    root, rs = _log(tmp_path)
    _patch(root, rs[1].physical_offset, fmt.encode_blank(rs[1].size)[:8])
    assert f"blank record at {rs[1].physical_offset} claims {rs[1].size}" in _problems(root)


def test_checker_reports_bytes_after_the_end(tmp_path: Path):
    root, rs = _log(tmp_path)
    end = rs[-1].physical_offset + rs[-1].size
    _patch(root, end + 1000, b"junk")
    assert f"non-zero byte at {end + 1000} after the end of data at {end}" in _problems(root)


def test_checker_reports_torn_properties(tmp_path: Path):
    root, rs = _log(tmp_path)
    last = rs[-1]
    _patch(root, last.physical_offset + last.size - 5, bytes(5))
    assert "properties end in zeros" in _problems(root)


def test_checker_reports_bytes_after_a_torn_last_record(tmp_path: Path):
    root, rs = _log(tmp_path)
    last = rs[-1]
    end = last.physical_offset + last.size
    _patch(root, end - 5, bytes(5))
    _patch(root, end + 1000, b"junk")
    problems = _problems(root)
    assert f"record at {last.physical_offset}: properties end in zeros (torn)" in problems
    assert f"non-zero byte at {end + 1000} after the end of data at {end}" in problems


def test_checker_reports_a_segment_its_records_fill_without_a_blank(tmp_path: Path):
    log = tmp_path / "store" / "commitlog"
    log.mkdir(parents=True)
    data = bytearray()
    while FILE_SIZE - len(data) > 400:
        data += plain_record(len(data))
    fill = FILE_SIZE - len(data) - len(plain_record(0, body=b""))
    data += plain_record(len(data), body=b"x" * fill)
    assert len(data) == FILE_SIZE
    (log / f"{0:020d}").write_bytes(data)
    second = plain_record(FILE_SIZE)
    (log / f"{FILE_SIZE:020d}").write_bytes(second + bytes(FILE_SIZE - len(second)))
    assert f"segment {0:020d} ends without a blank record" in _problems(tmp_path / "store")


def test_checker_reports_a_segment_of_the_wrong_size(tmp_path: Path):
    root, _rs = _log(tmp_path)
    seg = root / "commitlog" / f"{FILE_SIZE:020d}"
    seg.write_bytes(seg.read_bytes()[:100])
    assert f"size 100 != segment size {FILE_SIZE}" in _problems(root)


# ------------------------------------------------------- the power-loss model


def _fake_store(tmp_path: Path, pages: int = 4) -> tuple[Path, Path, CrashImage]:
    """A store directory with one zeroed segment, for driving the model by hand."""
    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    seg = root / "commitlog" / f"{0:020d}"
    seg.write_bytes(bytes(pages * PAGE))
    return root, seg, CrashImage({str(seg): (0, pages * PAGE)}, str(root / "checkpoint"))


def test_unsynced_pages_are_kept_dropped_or_torn_at_sector_boundaries(tmp_path: Path):
    fates = set()
    for seed in range(30):
        root, seg, image = _fake_store(tmp_path / str(seed), pages=8)
        model = DiskModel(root)
        seg.write_bytes(b"\xaa" * (8 * PAGE))  # written, never synced
        report = power_loss(image, random.Random(seed), model)
        assert report.kept + report.dropped + report.torn == 8
        data = seg.read_bytes()
        for p in range(8):
            page = data[p * PAGE : (p + 1) * PAGE]
            new = page.rstrip(b"\0")
            assert set(new) <= {0xAA} and len(new) % SECTOR == 0  # a prefix of new sectors
            assert page[len(new) :] == bytes(PAGE - len(new))
            fates.add({0: "dropped", PAGE: "kept"}.get(len(new), "torn"))
    assert fates == {"kept", "dropped", "torn"}


def test_bytes_covered_by_a_completed_fdatasync_always_survive(tmp_path: Path):
    for seed in range(10):
        root, seg, image = _fake_store(tmp_path / str(seed))
        model = DiskModel(root)
        with model.installed(), open(seg, "r+b") as f:
            f.write(b"\x11" * (2 * PAGE))
            f.flush()
            _platform.fdatasync(f.fileno(), what=str(seg))
            f.write(b"\x22" * (2 * PAGE))  # after the sync: uncertain
        power_loss(image, random.Random(seed), model)
        assert seg.read_bytes()[: 2 * PAGE] == b"\x11" * (2 * PAGE)


def test_a_failed_fdatasync_makes_nothing_durable(tmp_path: Path):
    root, seg, image = _fake_store(tmp_path)
    model = DiskModel(root)
    with model.installed():
        model.fail_syncs(errno.EIO)
        with open(seg, "r+b") as f:
            f.write(b"\x11" * PAGE)
            f.flush()
            with pytest.raises(OSError):
                _platform.fdatasync(f.fileno(), what=str(seg))
    report = power_loss(image, random.Random(0), model, p_keep=0.0, p_drop=1.0)
    assert report.dropped == 1
    assert seg.read_bytes() == bytes(4 * PAGE)


def test_after_the_cut_every_sync_fails(tmp_path: Path):
    root, seg, _image = _fake_store(tmp_path)
    model = DiskModel(root)
    with model.installed(), open(seg, "r+b") as f:
        model.cut("test")
        with pytest.raises(OSError) as e:
            _platform.fdatasync(f.fileno(), what=str(seg))
    assert e.value.errno == errno.EIO


def test_checkpoint_rolls_back_to_its_last_synced_page(tmp_path: Path):
    root = tmp_path / "store"
    model = DiskModel(root)
    with model.installed():
        s = make_store(tmp_path, message_index_enable=False)
        s.put_message(Message(topic="orders", body=b"a"))
        s.flush()
        synced = (root / "checkpoint").read_bytes()
        s.checkpoint.logics_msg_timestamp += 1_000_000
        model.fail_syncs(errno.EIO)
        with pytest.raises(OSError):
            s.checkpoint.flush()  # the page is written in memory, its sync fails
        assert (root / "checkpoint").read_bytes() != synced
        image = s.abandon()
    power_loss(image, random.Random(0), model, p_keep=0.0, p_drop=1.0)
    assert (root / "checkpoint").read_bytes() == synced


def test_model_reports_a_flushed_position_no_sync_covered(tmp_path: Path):
    root = tmp_path / "store"
    model = DiskModel(root)
    with model.installed():
        s = make_store(tmp_path, flush_interval_commitlog_ms=60_000, message_index_enable=False)
        s.put_message(Message(topic="orders", body=b"never synced"))
        mf = s.segments.files[0]
        mf.flushed_position = mf.wrote_position  # an engine that lies about flushing
        image = s.abandon()
    report = power_loss(image, random.Random(0), model)
    assert report.violations and "never covered by a completed fdatasync" in report.violations[0]


@pytest.mark.parametrize("seed", range(6))
def test_crash_image_alone_keeps_the_flushed_prefix(tmp_path: Path, seed: int):
    """The fallback model (no DiskModel): flushed positions from abandon() are trusted."""
    rng = random.Random(seed)
    s = make_store(
        tmp_path,
        commitlog_file_size=FILE_SIZE,
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        flush_interval_commitlog_ms=60_000,
        message_index_enable=False,
    )
    flushed = [
        s.put_message(Message(topic="orders", body=os.urandom(200)))
        for _ in range(rng.randrange(1, 40))
    ]
    s.flush()
    unflushed = [
        s.put_message(Message(topic="orders", body=os.urandom(200)))
        for _ in range(rng.randrange(1, 40))
    ]
    image = s.abandon()
    before = {p: Path(p).read_bytes()[:f] for p, (f, _w) in image.segments.items()}
    report = power_loss(image, rng)
    assert {p: Path(p).read_bytes()[:f] for p, (f, _w) in image.segments.items()} == before
    s = reopen(s.cfg)
    try:
        for r in flushed:
            assert r.status is PutStatus.PUT_OK
            assert s.look_message_by_offset(r.physical_offset) is not None
        survivors = sum(s.look_message_by_offset(r.physical_offset) is not None for r in unflushed)
        assert survivors <= len(unflushed)
        assert check_consistency(s.root, FILE_SIZE, end=s.max_physical_offset) == []
        assert report.claimed_flushed == flushed[-1].physical_offset + flushed[-1].size
    finally:
        s.close()


@pytest.mark.parametrize("reserve_chunk", [0, 1 << 20], ids=["allocated", "sparse"])
def test_a_new_segment_passes_the_allocation_point_while_still_empty(
    tmp_path: Path, reserve_chunk: int
):
    """The disk model forgets a file it sees empty at ``before_allocate`` (a segment
    recovery deleted and the log created again under the same name, often with the same
    inode number, is new: zeros). A creation path that skipped the point let dropped
    pages of the new segment come back as the deleted one's records (duplicate queue
    offsets after a power loss)."""
    from mqstore import faults

    empty_at_the_point: set[int] = set()
    root = tmp_path / "store"

    def hook(**ctx: object) -> None:
        for p in (root / "commitlog").iterdir():
            if p.name.isdigit() and p.stat().st_size == 0:
                empty_at_the_point.add(int(p.name))

    s = make_store(
        tmp_path, commitlog_file_size=FILE_SIZE, commitlog_reserve_chunk=reserve_chunk,
        message_index_enable=False,
    )  # fmt: skip
    with faults.inject("before_allocate", hook):
        while len(s.segments.files) < 2:
            s.put_message(Message(topic="orders", body=bytes(500)))
    s.close()
    assert FILE_SIZE in empty_at_the_point
