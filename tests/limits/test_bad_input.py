"""Bad input gets a clear status or error, and never costs a message already stored.

Each test stores a few messages first, feeds the store one kind of bad input, checks
the status or exception, then checks the earlier messages are still readable (and,
where the store's files were involved, the log is consistent).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore import (
    FlushDiskType,
    IllegalMessageError,
    IllegalTopicError,
    Message,
    MessageStore,
    PutStatus,
    SegmentLoadError,
    StoreLockedError,
    faults,
)
from mqstore.commitlog import format as fmt
from mqstore.config import RecoveryPolicy
from tests.helpers import check_consistency, make_store, mounted_tmpfs, reopen, store_config

REPO = Path(__file__).resolve().parents[2]
EARLIER = [Message(topic="orders", body=f"earlier {i}".encode(), keys=[f"e{i}"]) for i in range(3)]


@pytest.fixture
def store(tmp_path: Path):
    """A store holding the EARLIER messages; closed (if still open) after the test."""
    s = make_store(tmp_path, max_message_size=1024)
    for m in EARLIER:
        assert s.put_message(m).status is PutStatus.PUT_OK
    yield s
    s.close()


def assert_earlier_intact(s: MessageStore) -> None:
    """The EARLIER messages are all still there, in order, byte for byte."""
    bodies = [r.body for r in s.iter_records() if r.topic == "orders"]
    assert bodies[: len(EARLIER)] == [m.body for m in EARLIER]


# ------------------------------------------------------------------ sizes


def test_body_over_max_message_size_is_message_illegal(store: MessageStore):
    end = store.max_physical_offset
    r = store.put_message(Message(topic="orders", body=b"x" * 1025))
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    assert "1025" in (r.error or "") and "1024" in (r.error or "")
    assert store.max_physical_offset == end
    assert_earlier_intact(store)


def test_body_of_exactly_max_message_size_is_stored(store: MessageStore):
    r = store.put_message(Message(topic="orders", body=b"x" * 1024))
    assert r.status is PutStatus.PUT_OK
    assert_earlier_intact(store)


def test_record_larger_than_a_segment_is_message_illegal(tmp_path: Path):
    s = make_store(tmp_path, commitlog_file_size=8192, compress_msg_body_over=1 << 20)
    try:
        assert s.put_message(EARLIER[0]).status is PutStatus.PUT_OK
        r = s.put_message(Message(topic="orders", body=os.urandom(9000)))
        assert r.status is PutStatus.MESSAGE_ILLEGAL
        assert "exceeds" in (r.error or "")
        assert [x.body for x in s.iter_records()] == [EARLIER[0].body]
    finally:
        s.close()


def test_batch_with_one_oversized_body_stores_nothing(store: MessageStore):
    end = store.max_physical_offset
    rs = store.put_messages(
        [Message(topic="orders", body=b"ok"), Message(topic="orders", body=b"x" * 2000)]
    )
    assert [r.status for r in rs] == [PutStatus.MESSAGE_ILLEGAL] * 2
    assert store.max_physical_offset == end
    assert store.next_queue_offset("orders", 0) == len(EARLIER)


def _props_of_size(n: int) -> dict[str, str]:
    """User properties whose stored string (with UNIQ_KEY) is exactly ``n`` UTF-8 bytes."""
    fixed = len("UNIQ_KEY\x01" + "0" * 32 + "\x02") + len("p\x01\x02")
    return {"p": "v" * (n - fixed)}


def test_properties_over_32767_bytes_are_properties_size_exceeded(tmp_path: Path):
    s = make_store(tmp_path)
    try:
        s.put_messages(EARLIER)
        r = s.put_message(Message(topic="orders", body=b"b", properties=_props_of_size(32768)))
        assert r.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
        assert "32768" in (r.error or "")
        assert_earlier_intact(s)
    finally:
        s.close()


def test_properties_of_exactly_32767_bytes_are_stored(tmp_path: Path):
    s = make_store(tmp_path)
    try:
        r = s.put_message(Message(topic="orders", body=b"b", properties=_props_of_size(32767)))
        assert r.status is PutStatus.PUT_OK
        rec = s.look_message_by_offset(r.physical_offset)
        assert rec is not None
        assert len(rec.properties_string.encode()) == fmt.MAX_PROPERTIES_LENGTH
    finally:
        s.close()


def test_properties_limit_counts_utf8_bytes_not_characters(store: MessageStore):
    r = store.put_message(Message(topic="orders", body=b"b", properties={"p": "é" * 16400}))
    assert r.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    assert_earlier_intact(store)


@pytest.mark.parametrize("key, value", [("a\x01b", "v"), ("k", "a\x02b"), ("", "v")])
def test_property_with_separator_or_empty_name_is_illegal(
    store: MessageStore, key: str, value: str
):
    with pytest.raises(IllegalMessageError):
        store.put_message(Message(topic="orders", body=b"b", properties={key: value}))
    assert_earlier_intact(store)


# ----------------------------------------------------------------- topics

ILLEGAL_TOPICS = [
    "../x",
    "..",
    ".",
    "a/b",
    "/abs",
    "a\\b",
    "",
    "x" * 128,
    "a\x00b",
    "a b",
    "a\n",  # a regex "$" alone accepts a trailing newline
    "tópico",
]
STORE_ENTRIES = {"abort", "checkpoint", "commitlog", "config", "consumequeue", "index", "lock"}


def _outside(tmp_path: Path) -> list[Path]:
    """Entries next to the store (where ``../x`` would land) and next to its parent."""
    return sorted([*tmp_path.iterdir(), *tmp_path.parent.iterdir()])


@pytest.mark.parametrize("topic", ILLEGAL_TOPICS, ids=repr)
def test_illegal_topic_is_refused_without_creating_anything(tmp_path: Path, topic: str):
    s = make_store(tmp_path)
    try:
        s.put_messages(EARLIER)
        outside = _outside(tmp_path)
        with pytest.raises(IllegalTopicError) as e:
            s.put_message(Message(topic=topic, body=b"b"))
        assert repr(topic) in str(e.value)
        assert _outside(tmp_path) == outside
        # Inside the store only the legal topic's queue may appear (dispatch is async).
        assert {p.name for p in s.root.iterdir()} <= STORE_ENTRIES
        queues = s.root / "consumequeue"
        assert not queues.exists() or {p.name for p in queues.iterdir()} <= {"orders"}
        assert_earlier_intact(s)
    finally:
        s.close()


def test_illegal_topic_in_a_batch_stores_nothing(store: MessageStore):
    end = store.max_physical_offset
    with pytest.raises(IllegalTopicError):
        store.put_messages([Message(topic="orders", body=b"ok"), Message(topic="../x", body=b"b")])
    assert store.max_physical_offset == end
    assert_earlier_intact(store)


def test_topic_of_127_chars_is_legal(store: MessageStore):
    assert store.put_message(Message(topic="x" * 127, body=b"b")).status is PutStatus.PUT_OK


# ------------------------------------------------------------------ bodies


@pytest.mark.parametrize("body", [b"", bytearray(), None, "text", 42], ids=repr)
def test_empty_or_non_bytes_body_is_illegal(store: MessageStore, body: object):
    end = store.max_physical_offset
    with pytest.raises(IllegalMessageError):
        store.put_message(Message(topic="orders", body=body))  # type: ignore[arg-type]
    assert store.max_physical_offset == end
    assert_earlier_intact(store)


def test_negative_queue_id_is_illegal(store: MessageStore):
    with pytest.raises(IllegalMessageError):
        store.put_message(Message(topic="orders", body=b"b", queue_id=-1))
    assert_earlier_intact(store)


OUT_OF_RANGE = [
    {"flag": 1 << 40},
    {"flag": -(1 << 31) - 1},
    {"reconsume_times": 1 << 33},
    {"queue_id": 1 << 31},
    {"sys_flag": 1 << 32},
    {"born_timestamp": 1 << 64},
]


@pytest.mark.parametrize("fields", OUT_OF_RANGE, ids=lambda f: next(iter(f)))
def test_number_too_wide_for_its_record_field_is_illegal(store: MessageStore, fields):
    """Found by the broker fuzz test: a send with a 2**40 flag raised struct.error."""
    end = store.max_physical_offset
    with pytest.raises(IllegalMessageError, match="does not fit"):
        store.put_message(Message(topic="orders", body=b"b", **fields))
    assert store.max_physical_offset == end
    assert_earlier_intact(store)


@pytest.mark.parametrize("fields", OUT_OF_RANGE, ids=lambda f: next(iter(f)))
def test_batch_with_a_number_too_wide_stores_nothing(store: MessageStore, fields):
    end = store.max_physical_offset
    before = store.next_queue_offset("orders", 0)
    batch = [Message(topic="orders", body=b"ok"), Message(topic="orders", body=b"b", **fields)]
    with pytest.raises(IllegalMessageError, match="does not fit"):
        store.put_messages(batch)
    assert store.max_physical_offset == end
    assert store.next_queue_offset("orders", 0) == before
    assert store.put_message(Message(topic="orders", body=b"after")).queue_offset == before
    assert_earlier_intact(store)


# -------------------------------------------------------------- full disk

SEGMENT = 8192


def _fill_first_segment(s: MessageStore) -> list:
    """Put 500-byte messages until the next one would need a new segment."""
    results = []
    while s.max_physical_offset + 700 < SEGMENT:
        r = s.put_message(Message(topic="orders", body=bytes(500) + b"%d" % len(results)))
        assert r.status is PutStatus.PUT_OK
        results.append(r)
    return results


@contextlib.contextmanager
def _enospc() -> Iterator[None]:
    """No space: for a segment allocated in full and for a sparse one's reservations."""
    with (
        faults.inject("before_allocate", faults.raise_oserror(errno.ENOSPC)),
        faults.inject("before_reserve", faults.raise_oserror(errno.ENOSPC)),
    ):
        yield


@pytest.fixture
def small(tmp_path: Path):
    s = make_store(tmp_path, commitlog_file_size=SEGMENT, message_index_enable=False)
    yield s
    s.close()


def test_full_disk_at_roll_is_create_mapped_file_failed(small: MessageStore):
    _fill_first_segment(small)
    with _enospc():
        r = small.put_message(Message(topic="orders", body=bytes(500)))
    assert r.status is PutStatus.CREATE_MAPPED_FILE_FAILED
    assert "No space left on device" in (r.error or "")
    assert not r.status.stored


def test_full_disk_keeps_every_stored_message(small: MessageStore):
    stored = _fill_first_segment(small)
    with _enospc():
        for _ in range(3):
            small.put_message(Message(topic="orders", body=bytes(500)))
    assert [r.physical_offset for r in stored] == [
        r.physical_offset
        for r in map(small.look_message_by_offset, (x.physical_offset for x in stored))
        if r
    ]
    assert small.next_queue_offset("orders", 0) == len(stored)
    assert check_consistency(small.root, SEGMENT) == []


def _new_segments_hold_nothing(commitlog: Path) -> bool:
    """Files after the first are absent, or sparse files with no block allocated (a
    sparse segment is created before its first reservation fails)."""
    later = sorted(commitlog.iterdir())[1:]
    return all(p.stat().st_blocks == 0 for p in later)


def test_full_disk_leaves_no_partial_segment_file(small: MessageStore):
    _fill_first_segment(small)
    with _enospc():
        small.put_message(Message(topic="orders", body=bytes(500)))
    names = sorted(p.name for p in (small.root / "commitlog").iterdir())
    assert names[0] == f"{0:020d}" and len(names) <= 2
    assert _new_segments_hold_nothing(small.root / "commitlog")


def test_full_disk_batch_stores_nothing(small: MessageStore):
    _fill_first_segment(small)
    with _enospc():
        rs = small.put_messages([Message(topic="orders", body=bytes(500)) for _ in range(3)])
    assert {r.status for r in rs} == {PutStatus.CREATE_MAPPED_FILE_FAILED}


def test_store_writes_again_once_space_returns(small: MessageStore):
    stored = _fill_first_segment(small)
    with _enospc():
        small.put_message(Message(topic="orders", body=bytes(500)))
    r = small.put_message(Message(topic="orders", body=b"after"))
    assert r.status is PutStatus.PUT_OK
    assert r.physical_offset == SEGMENT  # the blank record ended the full segment
    assert r.queue_offset == len(stored)
    assert check_consistency(small.root, SEGMENT, end=small.max_physical_offset) == []


def test_reopen_after_full_disk_keeps_everything(small: MessageStore):
    stored = _fill_first_segment(small)
    with _enospc():
        small.put_message(Message(topic="orders", body=bytes(500)))
    s = reopen(small)
    try:
        assert [r.physical_offset for r in s.iter_records()] == [r.physical_offset for r in stored]
        assert s.put_message(Message(topic="orders", body=b"after")).queue_offset == len(stored)
    finally:
        s.close()


def test_full_disk_before_the_first_segment(tmp_path: Path):
    s = make_store(tmp_path, message_index_enable=False)
    try:
        with _enospc():
            r = s.put_message(EARLIER[0])
        assert r.status is PutStatus.CREATE_MAPPED_FILE_FAILED
        assert all(p.stat().st_blocks == 0 for p in (s.root / "commitlog").iterdir())
        assert s.put_message(EARLIER[0]).status is PutStatus.PUT_OK
    finally:
        s.close()


TMPFS_CHILD = textwrap.dedent(
    """
    import subprocess, sys
    from pathlib import Path
    from mqstore import Message, PutStatus
    from tests.helpers import make_store, reopen, check_consistency

    mnt = Path(sys.argv[1])
    s = make_store(mnt, commitlog_file_size=256 * 1024, message_index_enable=False)
    stored, failed = [], None
    for i in range(20000):
        r = s.put_message(Message(topic="orders", body=bytes([i % 251]) * 1000 + b"%d" % i))
        if r.status is not PutStatus.PUT_OK:
            failed = r
            break
        stored.append(r)
    assert failed is not None, "the 2 MiB tmpfs never filled up"
    # The disk guard (over 90% used) or, between two checks, the roll's allocation.
    refused = (PutStatus.SERVICE_NOT_AVAILABLE, PutStatus.CREATE_MAPPED_FILE_FAILED)
    assert failed.status in refused, failed
    assert "No space left" in failed.error or "disk full" in failed.error, failed.error
    again = s.put_message(Message(topic="orders", body=b"still full"))
    assert again.status in refused, again
    for r in stored:
        rec = s.look_message_by_offset(r.physical_offset)
        assert rec is not None and rec.queue_offset == r.queue_offset
    s.close()
    subprocess.run(["mount", "-o", "remount,size=4m", str(mnt)], check=True)
    s = reopen(s.cfg)
    assert len(s.iter_records()) == len(stored)
    r = s.put_message(Message(topic="orders", body=b"space is back"))
    assert r.status is PutStatus.PUT_OK and r.queue_offset == len(stored), r
    s.close()
    assert check_consistency(s.root, 256 * 1024) == []
    print("stored", len(stored))
    """
)


DISK_FILLED_BY_OTHERS_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from mqstore import Message, PutStatus
    from tests.helpers import make_store, reopen

    mnt = Path(sys.argv[1])
    # Checkpoint written only at close: its page is first touched on a full disk.
    s = make_store(mnt, message_index_enable=False, flush_interval_consume_queue_ms=60_000)
    bodies = [b"before the disk filled %d" % i for i in range(5)]
    assert all(s.put_message(Message(topic="orders", body=b)).status is PutStatus.PUT_OK
               for b in bodies)
    filler = mnt / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(bytes(4096))
        except OSError:
            pass
    s.close()
    filler.unlink()
    s = reopen(s.cfg)
    assert [r.body for r in s.iter_records()] == bodies
    s.close()
    print("ok")
    """
)


@pytest.fixture
def tmpfs(tmp_path: Path):
    """A 2 MiB tmpfs mounted for the test (root only; skipped where mount is refused)."""
    with mounted_tmpfs(tmp_path, "2m") as mnt:
        yield mnt


def _run_child(code: str, mnt: Path) -> str:
    """Run ``code`` in a child process, so that a SIGBUS (a write into an unallocated
    page of a mapping on a full disk) fails the test instead of killing the run."""
    child = subprocess.run(
        [sys.executable, "-c", code, str(mnt)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, f"child exited {child.returncode}:\n{child.stderr[-3000:]}"
    return child.stdout


def test_full_tmpfs_is_create_mapped_file_failed_and_loses_nothing(tmpfs: Path):
    assert _run_child(TMPFS_CHILD, tmpfs).startswith("stored ")


def test_disk_filled_by_another_writer_does_not_crash_close(tmpfs: Path):
    """Before the checkpoint page was allocated at open, close() died of SIGBUS here."""
    assert _run_child(DISK_FILLED_BY_OTHERS_CHILD, tmpfs).strip().endswith("ok")


# ------------------------------------------------------------------- files


def test_second_open_in_the_same_process_is_store_locked(store: MessageStore):
    with pytest.raises(StoreLockedError) as e:
        MessageStore.open(store.cfg)
    assert str(store.root) in str(e.value)
    assert (
        store.put_message(Message(topic="orders", body=b"still works")).status is PutStatus.PUT_OK
    )
    assert_earlier_intact(store)


def test_second_open_from_another_process_is_store_locked(store: MessageStore):
    code = textwrap.dedent(
        """
        import sys
        from mqstore import MessageStore, StoreConfig, StoreLockedError
        try:
            MessageStore.open(StoreConfig(root_dir=sys.argv[1], commitlog_file_size=int(sys.argv[2])))
        except StoreLockedError as e:
            print("locked:", e)
        else:
            print("opened")
        """
    )
    child = subprocess.run(
        [sys.executable, "-c", code, str(store.root), str(store.cfg.commitlog_file_size)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert child.stdout.startswith("locked:"), child.stdout + child.stderr
    assert str(store.root) in child.stdout
    assert_earlier_intact(store)


def test_store_opens_again_after_the_holder_closes(store: MessageStore):
    store.close()
    s = reopen(store.cfg)
    try:
        assert_earlier_intact(s)
    finally:
        s.close()


def _closed_store(tmp_path: Path) -> tuple[Path, Path]:
    s = make_store(tmp_path)
    s.put_messages(EARLIER)
    s.close()
    return s.root, s.root / "commitlog" / f"{0:020d}"


def test_segment_of_the_wrong_size_is_segment_load_error_under_rocketmqs_policy(
    tmp_path: Path,
):
    _root, seg = _closed_store(tmp_path)
    original = seg.read_bytes()
    seg.write_bytes(original[:1000])
    with pytest.raises(SegmentLoadError) as e:
        MessageStore.open(store_config(tmp_path, recovery_policy=RecoveryPolicy.TRUNCATE))
    assert str(seg) in str(e.value)
    assert "1000" in str(e.value)
    seg.write_bytes(original)  # the operator restores the file: nothing else was touched
    s = MessageStore.open(store_config(tmp_path))
    try:
        assert_earlier_intact(s)
    finally:
        s.close()


def test_failed_open_releases_the_lock(tmp_path: Path):
    _root, seg = _closed_store(tmp_path)
    original = seg.read_bytes()
    seg.write_bytes(original + b"\0")
    with pytest.raises(SegmentLoadError):
        MessageStore.open(store_config(tmp_path))
    seg.write_bytes(original)
    MessageStore.open(store_config(tmp_path)).close()  # not StoreLockedError


def test_stray_file_in_the_commitlog_directory_is_segment_load_error(tmp_path: Path):
    root, _seg = _closed_store(tmp_path)
    stray = root / "commitlog" / "notes.txt"
    stray.write_text("hello")
    with pytest.raises(SegmentLoadError) as e:
        MessageStore.open(store_config(tmp_path))
    assert str(stray) in str(e.value)
    stray.unlink()
    s = MessageStore.open(store_config(tmp_path))
    try:
        assert_earlier_intact(s)
    finally:
        s.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_failed_open_leaves_no_file_descriptors_behind(tmp_path: Path):
    s = make_store(tmp_path, commitlog_file_size=4096)
    for i in range(40):
        s.put_message(Message(topic="orders", body=bytes(300) + b"%d" % i))
    s.close()
    last = sorted((s.root / "commitlog").iterdir())[-1]
    last.write_bytes(b"short")
    cfg = store_config(tmp_path, commitlog_file_size=4096, recovery_policy=RecoveryPolicy.TRUNCATE)
    for _ in range(3):
        with pytest.raises(SegmentLoadError):
            MessageStore.open(cfg)
    # Only descriptors into this store count: other tests' background threads
    # may open or close unrelated descriptors while this one runs.
    assert _fds_under(tmp_path) == []


def _fds_under(root: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root)):
            found.append(target)
    return found


def test_short_segment_is_zero_extended_and_what_precedes_it_served(tmp_path: Path):
    """The default policy (KEEP): a segment cut short (a power loss drops its size
    update) opens; the records before the cut are served."""
    _root, seg = _closed_store(tmp_path)
    original = seg.read_bytes()
    seg.write_bytes(original[:1000])
    s = MessageStore.open(store_config(tmp_path))
    try:
        assert seg.stat().st_size == len(original)
        assert s.max_physical_offset <= 1000
    finally:
        s.close()


def test_missing_middle_segment_is_segment_load_error_under_rocketmqs_policy(tmp_path: Path):
    s = make_store(tmp_path, commitlog_file_size=4096)
    for i in range(30):
        s.put_message(Message(topic="orders", body=bytes(300) + b"%d" % i))
    s.close()
    segs = sorted((s.root / "commitlog").iterdir())
    assert len(segs) >= 3
    segs[1].unlink()
    with pytest.raises(SegmentLoadError) as e:
        MessageStore.open(
            store_config(
                tmp_path, commitlog_file_size=4096, recovery_policy=RecoveryPolicy.TRUNCATE
            )
        )
    assert str(segs[2]) in str(e.value)
    assert "missing" in str(e.value)


def test_sync_store_rejects_bad_input_without_waiting_for_a_flush(tmp_path: Path):
    s = make_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, max_message_size=16)
    try:
        assert (
            s.put_message(Message(topic="orders", body=b"x" * 17)).status
            is PutStatus.MESSAGE_ILLEGAL
        )
        with pytest.raises(IllegalTopicError):
            s.put_message(Message(topic="../x", body=b"b"))
        assert s.put_message(Message(topic="orders", body=b"ok")).status is PutStatus.PUT_OK
    finally:
        s.close()
