"""A full disk: RocketMQ's disk guard, and an index that runs out of space.

* The guard (``mqstore.cleanup.DiskGuard``): above ``disk_space_warning_level_ratio``
  used, puts return SERVICE_NOT_AVAILABLE with a "disk full" error and reads go on;
  below it puts resume by themselves (cleanup round, created file, ``check_disk``).
* The index reserves space before writing into its sparse file: on ENOSPC it is
  disabled ("index disabled until space is available") instead of the process dying
  of SIGBUS, consume queues keep being built, and it catches up when space is back.

Real tmpfs mounts where the test may mount one (root), run in a child process so a
SIGBUS fails the test instead of killing the run; a ``statvfs`` hook and the
``before_index_allocate`` fault point elsewhere.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mqstore import Message, MessageStore, PutStatus, faults
from mqstore.index import file as ifile
from mqstore.status import GetStatus
from tests.cq_consistency import check_cq_consistency
from tests.helpers import make_store, mounted_tmpfs, reopen, until

REPO = Path(__file__).resolve().parents[2]


def _fake_statvfs(used: float):
    real = os.statvfs("/")

    def statvfs(_path: str) -> os.statvfs_result:
        blocks = 1_000_000
        free = int(blocks * (1 - used))
        return os.statvfs_result(
            (real.f_bsize, real.f_frsize, blocks, free, free, 100, 50, 50, 0, 255)
        )

    return statvfs


def _pull_all(s: MessageStore, topic: str, queue_id: int = 0) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    while True:
        r = s.get_message("g", topic, queue_id, offset, 32)
        if r.status is not GetStatus.FOUND:
            return out
        out.extend(m.body for m in r.messages)
        offset = r.next_begin_offset


def _wait(cond, timeout: float = 30.0) -> bool:
    try:
        until(cond, timeout, 0.02)
    except AssertionError:
        return False
    return True


# ------------------------------------------------------------ statvfs hook


@pytest.fixture
def guarded(tmp_path: Path):
    s = make_store(tmp_path, clean_resource_interval_ms=50)
    yield s
    s.close()


def test_disk_over_the_warning_ratio_refuses_puts_and_keeps_reads(guarded: MessageStore):
    s = guarded
    before = [b"before %d" % i for i in range(20)]
    for b in before:
        assert s.put_message(Message(topic="t", body=b, keys="k")).status is PutStatus.PUT_OK
    s.disk_guard.statvfs = _fake_statvfs(0.95)
    assert s.check_disk() == pytest.approx(0.95)
    assert s.disk_full is not None and "disk full" in s.disk_full
    r = s.put_message(Message(topic="t", body=b"refused"))  # fast path message
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and not r.status.stored
    assert "disk full" in (r.error or "")
    general = s.put_message(Message(topic="t", body=b"x", properties={"a": "b"}))
    assert general.status is PutStatus.SERVICE_NOT_AVAILABLE
    batch = s.put_messages([Message(topic="t", body=b"y")] * 3)
    assert {x.status for x in batch} == {PutStatus.SERVICE_NOT_AVAILABLE}
    assert s.wait_dispatched(60)
    assert _pull_all(s, "t") == before  # reads keep working
    assert len(s.query_by_key("t", "k").messages) == 20


def test_writes_resume_by_themselves_below_the_ratio(guarded: MessageStore):
    s = guarded
    s.disk_guard.statvfs = _fake_statvfs(0.93)
    assert _wait(lambda: s.disk_full is not None)  # a cleanup round noticed
    assert s.put_message(Message(topic="t", body=b"no")).status is PutStatus.SERVICE_NOT_AVAILABLE
    s.disk_guard.statvfs = _fake_statvfs(0.50)
    assert _wait(lambda: s.disk_full is None)  # no call from the test: the next round
    assert s.put_message(Message(topic="t", body=b"yes")).status is PutStatus.PUT_OK
    assert s.wait_dispatched(60)
    assert _pull_all(s, "t") == [b"yes"]


def test_segment_creation_checks_the_disk(tmp_path: Path):
    s = make_store(tmp_path, commitlog_file_size=8192, clean_resource_interval_ms=3_600_000)
    try:
        assert s.put_message(Message(topic="t", body=bytes(500))).status is PutStatus.PUT_OK
        s.disk_guard.statvfs = _fake_statvfs(0.97)
        stored = 1
        while s.put_message(Message(topic="t", body=bytes(500))).status is PutStatus.PUT_OK:
            stored += 1
            assert stored < 100, "rolling a segment did not check the disk"
        assert len(s.segments.files) == 2  # the roll's check refused the put after it
        assert s.disk_full is not None
        s.disk_guard.statvfs = os.statvfs
        s.check_disk()
        assert s.put_message(Message(topic="t", body=b"again")).status is PutStatus.PUT_OK
    finally:
        s.close()
    assert check_cq_consistency(s.root, s.cfg) == []


def test_guard_off_below_the_ratio_on_a_real_disk(guarded: MessageStore):
    ratio = guarded.check_disk()
    if ratio > guarded.cfg.disk_space_warning_level_ratio:
        pytest.skip(f"this machine's disk is {ratio:.0%} full")
    assert guarded.disk_full is None


# ------------------------------------------------- index out of space (hook)


def test_index_out_of_space_keeps_queues_flowing_and_catches_up(tmp_path: Path):
    s = make_store(tmp_path)
    try:
        first = [b"m%d" % i for i in range(10)]
        for b in first:
            s.put_message(Message(topic="t", body=b, keys=b.decode()))
        assert s.wait_dispatched(60)
        with faults.inject("before_index_allocate", faults.raise_oserror(errno.ENOSPC)):
            # 4096 entries fit one reservation: force the next one to be needed.
            more = [b"n%d" % i for i in range(5000)]
            for b in more:
                r = s.put_message(Message(topic="t", body=b, keys=b.decode()))
                assert r.status is PutStatus.PUT_OK
            assert _wait(lambda: s.dispatch_behind_bytes == 0)
            assert s.index_disabled is not None
            assert "index disabled until space is available" in s.index_disabled
            assert _pull_all(s, "t") == first + more  # CQ kept flowing
            assert len(s.query_by_key("t", "m3").messages) == 1  # indexed before
        assert _wait(lambda: s.index_disabled is None, 15.0)  # space back: caught up
        assert s.wait_dispatched(60)
        assert [m.body for m in s.query_by_key("t", "n4999").messages] == [b"n4999"]
        assert [m.body for m in s.query_by_key("t", "n10").messages] == [b"n10"]
    finally:
        s.close()
    assert check_cq_consistency(s.root, s.cfg) == []
    assert not (s.root / "abort").exists()


def test_index_still_out_of_space_at_close_is_caught_up_on_reopen(tmp_path: Path):
    s = make_store(tmp_path)
    with faults.inject("before_index_allocate", faults.raise_oserror(errno.ENOSPC)):
        bodies = [b"k%d" % i for i in range(5000)]
        for b in bodies:
            s.put_message(Message(topic="t", body=b, keys=b.decode()))
        assert _wait(lambda: s.dispatch_behind_bytes == 0)
        s.close()
    assert (s.root / "abort").exists()  # index incomplete: the next open catches it up
    s = reopen(s.cfg)
    try:
        assert s.wait_dispatched(60)
        assert [m.body for m in s.query_by_key("t", "k4998").messages] == [b"k4998"]
        assert _pull_all(s, "t") == bodies
    finally:
        s.close()
    assert check_cq_consistency(s.root, s.cfg) == []


def test_reservation_leaves_index_bytes_unchanged_and_files_sparse(tmp_path: Path, monkeypatch):
    def build(path: Path) -> bytes:
        f = ifile.IndexFile(path, 5_000_000, 20_000_000, create=True)
        for i in range(2000):
            f.put_hashes([i * 7919 % 2_000_000_011, i], 1000 + i, 1_700_000_000_000 + i)
        f.flush()
        data = Path(path).read_bytes()
        f.close()
        return data

    reserved = build(tmp_path / "20260101000000000")
    blocks = os.stat(tmp_path / "20260101000000000").st_blocks * 512
    monkeypatch.setattr(ifile, "reserve", lambda *a, **k: None)
    plain = build(tmp_path / "20260101000000001")
    assert reserved == plain
    assert blocks < 40 << 20, f"{blocks} bytes allocated of a 420 MB file"


# ------------------------------------------------------------------- tmpfs


@pytest.fixture
def tmpfs(tmp_path: Path):
    """A 4 MiB tmpfs mounted for the test (root only; skipped where mount is refused)."""
    with mounted_tmpfs(tmp_path, "4m") as mnt:
        yield mnt


def _run_child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


PRELUDE = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from mqstore import Message, PutStatus
    from mqstore.status import GetStatus
    from tests.helpers import make_store, reopen
    from tests.cq_consistency import check_cq_consistency

    def pull_all(s, topic):
        out, off = [], 0
        while True:
            r = s.get_message("g", topic, 0, off, 32)
            if r.status is not GetStatus.FOUND:
                return out
            out.extend(m.body for m in r.messages)
            off = r.next_begin_offset

    def wait(cond, timeout=30.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end and not cond():
            time.sleep(0.02)
        return cond()

    def fill(path, leave):
        # Take the tmpfs's space but ``leave`` bytes.
        st = os.statvfs(path.parent)
        size = max(0, st.f_bavail * st.f_frsize - leave)
        with open(path, "wb") as f:
            f.write(bytes(size))
    """
)


FILL_CHILD = PRELUDE + textwrap.dedent(
    """
    mnt = Path(sys.argv[1])
    # No forced cleanup (over 85% it would delete the oldest segments, freeing space
    # by expiring messages): here space comes back only when the filler goes.
    s = make_store(mnt, commitlog_file_size=128 * 1024, clean_resource_interval_ms=50,
                   clean_file_forcibly_enable=False)
    fill(mnt / "filler", 1536 * 1024)
    stored, refused = [], None
    for i in range(100000):
        body = bytes([i % 251]) * 1000 + b"%d" % i
        r = s.put_message(Message(topic="orders", body=body, keys="k%d" % i))
        if r.status is not PutStatus.PUT_OK:
            refused = r
            break
        stored.append(body)
    assert refused is not None, "never filled up"
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE, refused
    assert "disk full" in refused.error and s.disk_full, refused
    assert s.wait_dispatched(30)
    assert pull_all(s, "orders") == stored  # reads keep working while full
    with open(mnt / "filler", "ab", buffering=0) as f:  # and every last block: stays full
        try:
            while True:
                f.write(bytes(4096))
        except OSError:
            pass
    s.check_disk()
    assert s.put_message(Message(topic="orders", body=b"x")).status is not PutStatus.PUT_OK
    (mnt / "filler").unlink()  # free space: writes resume by themselves
    assert wait(lambda: s.disk_full is None), "writes did not resume"
    for i in range(10):
        body = b"after %d" % i
        r = s.put_message(Message(topic="orders", body=body, keys="after%d" % i))
        assert r.status is PutStatus.PUT_OK, r
        stored.append(body)
    s.close()
    s = reopen(s.cfg)
    assert pull_all(s, "orders") == stored
    assert [m.body for m in s.query_by_key("orders", "k0").messages] == [stored[0]]
    s.close()
    assert check_cq_consistency(s.root, s.cfg) == []
    print("ok", len(stored))
    """
)


INDEX_CHILD = PRELUDE + textwrap.dedent(
    """
    import mqstore.index.file as ifile
    mnt = Path(sys.argv[1])
    if sys.argv[2] == "noreserve":  # the old index: writes into holes of a sparse file
        ifile.reserve = lambda *a, **k: None
    # Index files of 8 MB (sparse) on a 4 MiB tmpfs; one 1 MiB CommitLog segment and
    # the consume queue file allocated before the disk fills (queue files are sparse:
    # allocated here by hand, so only the index runs out); the disk guard off (ratio
    # 1.0): the index meets ENOSPC between two checks, as with a disk filled by others.
    s = make_store(mnt, commitlog_file_size=1024 * 1024, max_hash_slot_num=1024,
                   max_index_num=400_000, mapped_file_size_consume_queue=20 * 4096,
                   disk_space_warning_level_ratio=1.0, clean_resource_interval_ms=50)
    stored = []
    for i in range(100):
        body = b"early %d" % i
        assert s.put_message(Message(topic="t", body=body, keys="e%d" % i)).status.ok
        stored.append(body)
    assert s.wait_dispatched(30) and s.index_disabled is None
    for cq_file in (s.cfg.consume_queue_path).rglob("0" * 20):
        fd = os.open(cq_file, os.O_RDWR)
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
        os.close(fd)
    with open(mnt / "filler", "wb", buffering=0) as f:  # every last block
        for chunk in (65536, 4096):
            try:
                while True:
                    f.write(bytes(chunk))
            except OSError:
                pass
    for i in range(2000):
        body = b"%d" % i + bytes(200)
        r = s.put_message(Message(topic="t", body=body, keys="key%d" % i))
        assert r.status is PutStatus.PUT_OK, r
        stored.append(body)
    assert wait(lambda: s.dispatch_behind_bytes == 0), "dispatch stalled"
    assert s.index_disabled and "index disabled until space" in s.index_disabled, s.index_disabled
    assert pull_all(s, "t") == stored  # consume queues kept flowing
    assert [m.body for m in s.query_by_key("t", "e7").messages] == [b"early 7"]
    (mnt / "filler").unlink()
    assert wait(lambda: s.index_disabled is None), "the index did not catch up"
    assert s.put_message(Message(topic="t", body=b"last", keys="last")).status.ok
    stored.append(b"last")
    assert s.wait_dispatched(30)
    assert [m.body for m in s.query_by_key("t", "last").messages] == [b"last"]
    assert [m.body for m in s.query_by_key("t", "key1999").messages] == [stored[-2]]
    s.close()
    assert check_cq_consistency(s.root, s.cfg) == []
    print("ok", len(stored))
    """
)


def test_full_tmpfs_refuses_puts_then_resumes_and_loses_nothing(tmpfs: Path):
    child = _run_child(FILL_CHILD, str(tmpfs))
    assert child.returncode == 0, f"child exited {child.returncode}:\n{child.stderr[-3000:]}"
    assert child.stdout.startswith("ok ")


def test_index_out_of_space_on_tmpfs_keeps_serving_and_does_not_die(tmpfs: Path):
    child = _run_child(INDEX_CHILD, str(tmpfs), "reserve")
    assert child.returncode == 0, f"child exited {child.returncode}:\n{child.stderr[-3000:]}"
    assert child.stdout.startswith("ok ")


def test_unreserved_index_dies_of_sigbus_on_the_same_tmpfs(tmpfs: Path):
    """The control: without the reservations the same run is killed by SIGBUS."""
    child = _run_child(INDEX_CHILD, str(tmpfs), "noreserve")
    assert child.returncode == -signal.SIGBUS, (child.returncode, child.stderr[-2000:])
