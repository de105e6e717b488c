"""Open after a clean close reads each queue on first use (issue 14).

A clean close writes the queues' summary (``mqstore.consumequeue.summary``); the next
open takes it back (removing it) and answers the whole-store questions from it, so a
queue's files are read when the queue is found, written, or concerned by a CommitLog
cut or expiry. Without a usable summary (a crash, a replaced directory, a CommitLog
that changed since, a damaged file) every queue is read at open as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from mqstore import Message, MessageStore
from mqstore.consumequeue import summary
from mqstore.consumequeue.format import UNIT_SIZE
from mqstore.consumequeue.store import ConsumeQueueStore
from tests.cq_consistency import check_cq_consistency
from tests.helpers import make_store, reopen

FILE_SIZE = 10 * UNIT_SIZE


def _filled(directory: Path, queues: int, units: int) -> ConsumeQueueStore:
    """Queues T{q // 10}/{q % 10}, ``units`` units each (queue q's unit i points at
    10_000 * q + 100 * i), flushed."""
    store = ConsumeQueueStore(directory, FILE_SIZE)
    for q in range(queues):
        for i in range(units):
            store.put(f"T{q // 10}", q % 10, 10_000 * q + 100 * i, 50, 0, i, 1)
    store.flush(0)
    return store


def _closed_cleanly(tmp_path: Path, queues: int, units: int, log_end: int = 10**9) -> Path:
    """The consume-queue directory of :func:`_filled` queues, closed with a summary."""
    directory = tmp_path / "consumequeue"
    store = _filled(directory, queues, units)
    store.save_summary(log_end)
    store.close()
    return directory


@contextlib.contextmanager
def _opened(directory: Path, *, clean: bool = True) -> Iterator[ConsumeQueueStore]:
    """The queues of ``directory`` loaded as after a clean (or unclean) exit; closed
    after."""
    store = ConsumeQueueStore(directory, FILE_SIZE)
    store.load(clean=clean)
    try:
        yield store
    finally:
        store.close()


def test_a_clean_open_reads_no_queue_until_one_is_used(tmp_path: Path):
    with _opened(_closed_cleanly(tmp_path, 40, 3)) as store:
        assert store.queues == {}
        assert len(store.queue_keys()) == 40
        cq = store.find("T2", 5)
        assert cq is not None
        assert [cq.unit_at(i) for i in range(3)] == [(250_000 + 100 * i, 50, 0) for i in range(3)]
        assert list(store.queues) == [("T2", 5)]


def test_the_summary_answers_the_table_and_the_log_end_of_unread_queues(tmp_path: Path):
    cq_dir = tmp_path / "consumequeue"
    eager = _filled(cq_dir, 30, 4)
    table, top = eager.topic_queue_table(), eager.max_physic_offset
    eager.save_summary(10**9)
    eager.close()
    with _opened(cq_dir) as lazy:
        assert (lazy.topic_queue_table(), lazy.max_physic_offset) == (table, top)
        assert lazy.queues == {}


def test_the_summary_is_removed_at_open_so_a_later_crash_reads_every_queue(tmp_path: Path):
    cq_dir = _closed_cleanly(tmp_path, 20, 2)
    with _opened(cq_dir):
        assert not summary.path_for(cq_dir).exists()
    with _opened(cq_dir) as again:  # no summary now: every queue is read
        assert len(again.queues) == 20


def test_a_summary_is_not_used_after_an_unclean_close(tmp_path: Path):
    cq_dir = _closed_cleanly(tmp_path, 20, 2)
    with _opened(cq_dir, clean=False) as store:
        assert len(store.queues) == 20
        assert not summary.path_for(cq_dir).exists()


def test_a_summary_of_a_replaced_directory_is_not_used(tmp_path: Path):
    cq_dir = _closed_cleanly(tmp_path, 20, 2)
    cq_dir.rename(tmp_path / "old")
    _filled(cq_dir, 5, 1).close()  # a new directory (a reindex swaps one in)
    with _opened(cq_dir) as store:
        assert len(store.queues) == 5


def test_a_damaged_summary_is_not_used(tmp_path: Path):
    cq_dir = _closed_cleanly(tmp_path, 20, 2)
    path = summary.path_for(cq_dir)
    data = bytearray(path.read_bytes())
    data[60] ^= 0xFF
    path.write_bytes(bytes(data))
    with _opened(cq_dir) as store:
        assert len(store.queues) == 20


def test_a_commitlog_end_other_than_the_summarys_reads_every_queue(tmp_path: Path):
    with _opened(_closed_cleanly(tmp_path, 20, 2, log_end=5000)) as store:
        store.check_log_end(5000)
        assert store.queues == {}
        store.check_log_end(4000)
        assert len(store.queues) == 20


def test_a_cut_reads_only_the_queues_pointing_past_it(tmp_path: Path):
    with _opened(_closed_cleanly(tmp_path, 20, 2)) as store:
        store.truncate_dirty(180_000)  # queues 18 and 19 point past it
        assert sorted(store.queues) == [("T1", 8), ("T1", 9)]
        assert "T1-8" not in store.topic_queue_table()  # no units left
        assert store.find("T1", 8).max_offset == 0  # type: ignore[union-attr]
        assert store.find("T1", 7).max_offset == 2  # type: ignore[union-attr]


def test_expiry_reads_only_the_queues_it_concerns_and_deletes_their_files(tmp_path: Path):
    # three files a queue: 10 + 10 + 5 units
    with _opened(_closed_cleanly(tmp_path, 20, 25)) as store:
        deleted = store.delete_expired(30_000 + 1_500)  # below queue 3's 16th unit
        assert sorted(store.queues) == [("T0", q) for q in range(4)]
        assert deleted == 3 * 2 + 1  # queues 0-2 keep their last file; queue 3 loses its first
        assert store.find("T0", 3).min_offset == 15  # type: ignore[union-attr]
        assert store.find("T0", 4).min_offset == 0  # type: ignore[union-attr]


def _topic_store(tmp_path: Path) -> MessageStore:
    return make_store(
        tmp_path, commitlog_file_size=256 * 1024, mapped_file_size_consume_queue=FILE_SIZE
    )


def test_a_store_reopened_cleanly_continues_every_queue_and_stays_consistent(tmp_path: Path):
    s = _topic_store(tmp_path)
    for q in range(200):
        s.put_message(Message(topic=f"T{q // 20}", body=b"a%d" % q, queue_id=q % 20))
    assert s.wait_dispatched(30)
    s = reopen(s)
    assert s.last_exit_ok
    assert s.queues.queues == {}  # nothing read yet
    for q in range(0, 200, 3):
        r = s.put_message(Message(topic=f"T{q // 20}", body=b"b%d" % q, queue_id=q % 20))
        assert r.queue_offset == 1
    assert s.wait_dispatched(30)
    for q in range(200):
        got = s.get_message("g", f"T{q // 20}", q % 20, 0, 10)
        bodies = [m.body for m in got.messages]
        assert bodies == ([b"a%d" % q, b"b%d" % q] if q % 3 == 0 else [b"a%d" % q])
    cfg = s.cfg
    s.close()
    assert check_cq_consistency(cfg.root, cfg) == []


def test_a_crash_after_a_clean_open_recovers_every_queue(tmp_path: Path):
    s = _topic_store(tmp_path)
    for q in range(100):
        s.put_message(Message(topic=f"T{q // 20}", body=b"a", queue_id=q % 20))
    assert s.wait_dispatched(30)
    s = reopen(s)
    for q in range(100):
        s.put_message(Message(topic=f"T{q // 20}", body=b"b", queue_id=q % 20))
    assert s.wait_dispatched(30)
    s.abandon()
    s = reopen(s)
    assert not s.last_exit_ok
    assert len(s.queues.queues) == 100  # read at open: no summary after a crash
    assert all(cq.max_offset == 2 for cq in s.queues.all())
    cfg = s.cfg
    s.close()
    assert check_cq_consistency(cfg.root, cfg) == []
