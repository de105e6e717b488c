"""``StoreConfig(dispatch_process=True)``: consume queues and index built by a child process.

The child (``mqstore.consumequeue.worker``) writes ``consumequeue/`` and ``index/``; the
store's own queues and index follow its files (``mqstore.consumequeue.process``). Each
test below is one scenario: the files it builds are the thread's, byte for byte;
readers (pulls, key queries, arrival listeners) see what it dispatched; and the
process boundary adds failure modes the thread never had (the child or the parent
SIGKILLed, the child holding the store's lock after its parent died, a crash while
the child's index catch-up is pending, SYNC_FLUSH's flushed-only limit).

Every test that opens a process-mode store starts a child (0.1-0.3 s). Sizes are tiny
so that CommitLog, consume-queue and index files all roll.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore import FlushDiskType, GetStatus, Message, MessageStore, PutStatus, StoreConfig
from mqstore.commitlog import commitlog as commitlog_module
from mqstore.commitlog import format as fmt
from mqstore.commitlog.mapped_file import MappedFile
from mqstore.consumequeue import shared
from mqstore.consumequeue.dispatch import Arrival
from mqstore.consumequeue.process import DispatchProcess
from mqstore.consumequeue.queue import ConsumeQueue
from mqstore.consumequeue.results import StoredMessage
from mqstore.errors import StoreLockedError
from mqstore.message import tags_code
from tests.cq_consistency import check_cq_consistency
from tests.dispatch_child import REPO, ROLLING_SIZES, needs_child
from tests.helpers import check_consistency, pull_all, tree, until

pytestmark = [pytest.mark.integration, needs_child]

TOPICS = ("TopicA", "TopicB", "TopicC")
QUEUES = 4
TAGS = ("red", "green", "blue", None, "red||x")


def config(root: Path, **changes: Any) -> StoreConfig:
    """A process-mode config rooted at ``root`` with tiny files."""
    return StoreConfig(root_dir=root, **{**ROLLING_SIZES, "dispatch_process": True, **changes})


def message(i: int, *, topic: str | None = None, uniq: bool = False) -> Message:
    """The ``i``-th message of the workload: topics, queues, tags and keys vary with ``i``.

    Keys: ``k<i>`` (unique) and ``g<i % 7>`` (shared). With ``uniq`` the UNIQ_KEY is
    derived from ``i`` too, so two stores fed the same sequence write the same bytes.
    """
    props = {"UNIQ_KEY": f"{i:032X}"} if uniq else {}
    if i % 11 == 0:
        props["user"] = f"u{i}"
    body = (b"%06d|" % i) + (b"z" * 5000 if i % 97 == 0 else b"." * (i % 50))
    return Message(
        topic=topic or TOPICS[i % len(TOPICS)],
        body=body,
        tags=TAGS[i % len(TAGS)],
        keys=[f"k{i}", f"g{i % 7}"],
        queue_id=(i // len(TOPICS)) % QUEUES,
        properties=props,
        born_timestamp=1_700_000_000_000 + i if uniq else None,
    )


def put_all(s: MessageStore, msgs: list[Message]) -> list[Any]:
    results = [s.put_message(m) for m in msgs]
    assert [r.status for r in results] == [PutStatus.PUT_OK] * len(msgs)
    return results


def expected_queues(msgs: list[Message]) -> dict[tuple[str, int], list[Message]]:
    by_queue: dict[tuple[str, int], list[Message]] = defaultdict(list)
    for m in msgs:
        by_queue[m.topic, m.queue_id].append(m)
    return by_queue


def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    until(cond, timeout, what=what)


def alive(pid: int) -> bool:
    """Whether any thread of ``pid`` still runs. A zombie nobody reaped (an orphan's
    parent may be a PID 1 that does not reap) counts as gone, but only once every
    thread is: the main thread turns zombie while the others are still exiting,
    holding the process's descriptors (the store's lock among them)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if state not in ("Z", "X"):
            return True
    return False


def child_pid(s: MessageStore) -> int:
    proc = s.logics.process
    assert proc is not None, "the store runs no dispatcher process"
    pid = proc.pid
    assert pid is not None
    return pid


@pytest.fixture
def store_factory() -> Iterator[Callable[[StoreConfig], MessageStore]]:
    """Opens stores and closes whatever a failing test left open."""
    opened: list[MessageStore] = []

    def open_store(cfg: StoreConfig) -> MessageStore:
        s = MessageStore.open(cfg)
        opened.append(s)
        return s

    yield open_store
    for s in opened:
        if not s.closed:
            s.close()


# ---------------------------------------------------------------------------- files


def test_queue_and_index_files_equal_thread_mode_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same puts into a thread-mode and a process-mode store give the same
    consume-queue files and the same index files (in creation order; their names are
    wall-clock times). Store times come from a deterministic clock and UNIQ_KEYs
    from the messages, so the CommitLogs are equal too and every index byte
    (timestamps included) must match."""
    msgs = [message(i, uniq=True) for i in range(2600)]
    msgs.insert(1000, Message(topic="TopicA", body=b"half", keys=["prep"],
                              sys_flag=fmt.TRANSACTION_PREPARED_TYPE,
                              properties={"UNIQ_KEY": "F" * 32}, born_timestamp=1))  # fmt: skip
    roots = {}
    for mode in (False, True):
        ticks = itertools.count(1_700_000_000_000)
        monkeypatch.setattr(commitlog_module, "_now_ms", lambda t=ticks: next(t))
        cfg = config(tmp_path / f"process={mode}", dispatch_process=mode)
        s = MessageStore.open(cfg)
        try:
            assert (s.logics.process is not None) is mode
            put_all(s, msgs)
        finally:
            s.close()
        roots[mode] = cfg.root

    thread, process = roots[False], roots[True]
    assert tree(thread / "commitlog") == tree(process / "commitlog")  # same input
    thread_cq = tree(thread / "consumequeue")
    assert len(thread_cq) > len(TOPICS) * QUEUES  # queue files rolled
    assert tree(process / "consumequeue") == thread_cq
    t_index = list(tree(thread / "index").values())
    p_index = list(tree(process / "index").values())
    assert len(t_index) > 3  # index files rolled
    assert len(p_index) == len(t_index)
    for i, (a, b) in enumerate(zip(t_index, p_index, strict=True)):
        assert a == b, f"index file #{i} differs"
    assert check_cq_consistency(process, config(process)) == []


# ---------------------------------------------------------------------------- reads


def test_pulls_return_every_message_in_queue_order_with_tag_filtering(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    s = store_factory(config(tmp_path))
    msgs = [message(i) for i in range(1500)]
    put_all(s, msgs)
    assert s.wait_dispatched(60)
    assert s.dispatch_behind_bytes == 0
    want = expected_queues(msgs)
    assert len(want) == len(TOPICS) * QUEUES
    for (topic, qid), queue_msgs in want.items():
        got = pull_all(s, topic, qid)
        assert [m.queue_offset for m in got] == list(range(len(queue_msgs)))
        assert [m.body for m in got] == [m.body for m in queue_msgs]
        assert s.max_offset_in_queue(topic, qid) == len(queue_msgs)
        red_or_blue = pull_all(s, topic, qid, "red || blue")
        assert [m.body for m in red_or_blue] == [
            m.body for m in queue_msgs if m.tags in ("red", "blue")
        ]
        assert red_or_blue  # the filter kept something and dropped something
        assert len(red_or_blue) < len(queue_msgs)


def test_pulls_during_puts_see_a_gapless_growing_queue(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    """A consumer polling while the producer writes (and the child dispatches, across
    queue-file boundaries) gets every message once, in order, never a blank unit."""
    s = store_factory(config(tmp_path))
    n = 2500
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            for i in range(n):
                r = s.put_message(Message(topic="Live", body=b"%d" % i, queue_id=1))
                assert r.status is PutStatus.PUT_OK and r.queue_offset == i
                if i % 100 == 0:
                    time.sleep(0.001)
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=produce)
    t.start()
    got: list[StoredMessage] = []
    deadline = time.monotonic() + 15
    try:
        while len(got) < n and time.monotonic() < deadline and not errors:
            g = s.get_message("g", "Live", 1, len(got), 32)
            if g.status is GetStatus.FOUND:
                got += g.messages
            else:
                time.sleep(0.0005)
    finally:
        t.join()
    assert not errors
    assert [m.queue_offset for m in got] == list(range(n))
    assert [m.body for m in got] == [b"%d" % i for i in range(n)]


def test_queue_that_grew_several_files_between_two_reads_is_read_whole(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    """Read a queue, let the child fill its file and write three more, read again:
    every file in between is followed, not just the newest."""
    s = store_factory(config(tmp_path))
    msgs = [Message(topic="Q", body=b"q%d" % i, queue_id=3) for i in range(350)]
    put_all(s, msgs[:50])
    assert s.wait_dispatched(60)
    assert len(pull_all(s, "Q", 3)) == 50
    put_all(s, msgs[50:])  # units 50..349: the rest of file 0, files 1 and 2, half of 3
    assert s.wait_dispatched(60)
    got = pull_all(s, "Q", 3)
    assert [m.queue_offset for m in got] == list(range(350))
    assert [m.body for m in got] == [m.body for m in msgs]


def test_query_by_key_finds_keys_put_after_open_across_new_index_files(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    """Keys are found whether the store's index mapped their file while the child was
    still filling it (a query in between) or only after several more files."""
    s = store_factory(config(tmp_path))
    first = [message(i) for i in range(60)]  # one partly filled index file
    put_all(s, first)
    assert s.wait_dispatched(60)
    assert [m.body for m in s.query_by_key(first[0].topic, "k0").messages] == [first[0].body]
    more = [message(i) for i in range(60, 1200)]  # several more index files
    put_all(s, more)
    assert s.wait_dispatched(60)
    for i, m in enumerate(first + more):
        found = s.query_by_key(m.topic, f"k{i}").messages
        assert [x.body for x in found] == [m.body], f"k{i}"
    shared_key = s.query_by_key("TopicA", "g3", max_num=64).messages
    want = [m.body for m in first + more if m.topic == "TopicA" and "g3" in m.keys][::-1]
    assert [m.body for m in shared_key] == want[: len(shared_key)]
    assert len(shared_key) == min(len(want), s.cfg.max_msgs_num_batch)


def test_queue_created_after_open_is_discovered(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    """A topic the store had never seen: the child creates its queue files; the store
    finds the queue (even one asked for, and missing, before)."""
    s = store_factory(config(tmp_path))
    put_all(s, [message(i) for i in range(10)])
    assert s.wait_dispatched(60)
    miss = s.get_message("g", "Fresh", 2, 0)
    assert miss.messages == () and s.consume_queue("Fresh", 2) is None
    fresh = [Message(topic="Fresh", body=b"f%d" % i, tags="t", queue_id=2) for i in range(250)]
    put_all(s, fresh)
    put_all(s, [Message(topic="Fresher", body=b"x", queue_id=0)])
    assert s.wait_dispatched(60)
    got = pull_all(s, "Fresh", 2)  # 250 units: three queue files
    assert [m.body for m in got] == [m.body for m in fresh]
    assert [m.queue_offset for m in got] == list(range(250))
    assert (s.min_offset_in_queue("Fresh", 2), s.max_offset_in_queue("Fresh", 2)) == (0, 250)
    topics = {(cq.topic, cq.queue_id) for cq in s.queues.all()}
    assert {("Fresh", 2), ("Fresher", 0)} <= topics
    assert [m.body for m in pull_all(s, "Fresher", 0)] == [b"x"]


def test_queues_and_index_loaded_at_open_are_followed_after_reopen(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    """Reopened in process mode: queues and index files the store loaded itself keep
    growing under the child."""
    cfg = config(tmp_path)
    before = [message(i, topic="TopicA") for i in range(300)]
    s = store_factory(cfg)
    put_all(s, before)
    s.close()
    assert not (cfg.root / "abort").exists()  # the child drained and flushed
    s = store_factory(cfg)
    after = [message(i, topic="TopicA") for i in range(300, 600)]
    put_all(s, after)
    assert s.wait_dispatched(60)
    for (topic, qid), queue_msgs in expected_queues(before + after).items():
        assert [m.body for m in pull_all(s, topic, qid)] == [m.body for m in queue_msgs]
    for i in (0, 299, 300, 599):
        assert [m.body for m in s.query_by_key("TopicA", f"k{i}").messages] == [
            (before + after)[i].body
        ]


def test_unsupported_machine_falls_back_to_the_dispatcher_thread(
    tmp_path: Path,
    store_factory: Callable[[StoreConfig], MessageStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shared, "supported", lambda: False)
    cfg = config(tmp_path)
    s = store_factory(cfg)
    assert s.logics.process is None and s.dispatch_progress is s.reput
    assert not (cfg.root / shared.FILE_NAME).exists()
    put_all(s, [message(i) for i in range(30)])
    assert s.wait_dispatched(60)
    assert [m.body for m in s.query_by_key(TOPICS[0], "k0").messages] == [message(0).body]


def test_close_stops_the_child_and_removes_abort_and_the_shared_page(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    cfg = config(tmp_path)
    s = store_factory(cfg)
    pid = child_pid(s)
    assert (cfg.root / shared.FILE_NAME).exists()
    put_all(s, [message(i) for i in range(200)])
    s.close()
    assert not alive(pid)
    assert not (cfg.root / shared.FILE_NAME).exists()
    assert not (cfg.root / "abort").exists()
    assert check_cq_consistency(cfg.root, cfg) == []


@pytest.mark.crash
def test_close_drains_a_child_several_log_files_behind(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    """The child is stopped (SIGSTOP) while the log rolls over several files, and
    resumed only once ``close`` has asked it to stop: it must still map the new
    files and dispatch all of them before answering, so ``abort`` goes and the
    files are whole."""
    cfg = config(tmp_path)
    s = store_factory(cfg)
    put_all(s, [message(i) for i in range(10)])
    assert s.wait_dispatched(60)
    pid = child_pid(s)
    os.kill(pid, signal.SIGSTOP)
    closer = threading.Thread(target=s.close)
    try:
        put_all(s, [message(i) for i in range(10, 2010)])
        assert s.max_physical_offset > 4 * cfg.commitlog_file_size
        closer.start()
        time.sleep(0.3)  # close() has stopped the watcher and sent "stop"
    finally:
        os.kill(pid, signal.SIGCONT)
    closer.join(60)
    assert not closer.is_alive()
    assert not (cfg.root / "abort").exists()
    assert check_cq_consistency(cfg.root, cfg) == []


def test_expired_files_are_deleted_by_the_child_and_reads_start_at_the_new_minimum(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    """Cleanup deletes CommitLog files in the store; the child then deletes the queue
    and index files pointing only below the log's new start, and reads begin at the
    first message the log still holds."""
    cfg = config(tmp_path)
    s = store_factory(cfg)
    msgs = [Message(topic="E", body=b"e%05d" % i + b"." * 200, keys=[f"e{i}"]) for i in range(2000)]
    results = put_all(s, msgs)
    assert s.wait_dispatched(10)
    cq_dir, index_dir = cfg.root / "consumequeue" / "E" / "0", cfg.root / "index"
    cq_files, index_files = len(os.listdir(cq_dir)), len(os.listdir(index_dir))
    assert s.clean_expired_files(immediately=True).commitlog_files > 0
    low = s.min_physical_offset
    assert low > 0
    wait_for(
        lambda: len(os.listdir(cq_dir)) < cq_files and len(os.listdir(index_dir)) < index_files,
        5,
        "the child to delete expired queue and index files",
    )
    first = s.min_offset_in_queue("E", 0)
    cq = s.queues.find("E", 0)
    assert cq is not None
    view = [(mf.path.name, mf.wrote_position, mf.path.exists()) for mf in cq.segments.files]
    assert first < len(results), f"minimum {first} (log start {low}); files held {view}"
    assert results[first - 1].physical_offset < low <= results[first].physical_offset
    got = pull_all(s, "E", 0)
    assert [m.queue_offset for m in got] == list(range(first, len(msgs)))
    assert [m.body for m in got] == [m.body for m in msgs[first:]]
    assert s.query_by_key("E", "e0").messages == ()
    assert [m.body for m in s.query_by_key("E", "e1999").messages] == [msgs[-1].body]
    put_all(s, [Message(topic="E", body=b"later", keys=["later"])])
    assert s.wait_dispatched(10)
    assert [m.body for m in pull_all(s, "E", 0)][-2:] == [msgs[-1].body, b"later"]


def test_queue_whose_followed_files_all_expired_is_followed_from_its_first_file_left(
    tmp_path: Path,
    store_factory: Callable[[StoreConfig], MessageStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store read a queue to the end of its first file; then the queue grew by
    more files, unread, and cleanup made the child delete the first ones before the
    store looked at the queue again (its own cleanup pass over the queues, which
    usually catches them up first, is held back here: with many queues, or under
    load, the child gets there first). The next read must pick the queue up at the
    first file left, not stall at the gap."""
    cfg = config(tmp_path)
    s = store_factory(cfg)
    msgs = [Message(topic="E", body=b"e%05d" % i + b"." * 300) for i in range(350)]
    results = put_all(s, msgs[:100])  # exactly queue file 0
    assert s.wait_dispatched(60)
    assert len(pull_all(s, "E", 0)) == 100
    results += put_all(s, msgs[100:])  # files 1, 2 and half of 3, not read
    assert s.wait_dispatched(60)
    with monkeypatch.context() as m:
        m.setattr(s.queues, "delete_expired", lambda _min_physical: 0)
        assert s.clean_expired_files(immediately=True).commitlog_files > 0
    low = s.min_physical_offset
    cq_dir = cfg.root / "consumequeue" / "E" / "0"
    wait_for(lambda: not (cq_dir / f"{2000:020d}").exists(), 5, "queue files 0 and 1 to go")
    first = next(i for i, r in enumerate(results) if r.physical_offset >= low)
    assert first >= 200
    got = pull_all(s, "E", 0)
    assert [m.queue_offset for m in got] == list(range(first, 350))
    assert [m.body for m in got] == [m.body for m in msgs[first:]]
    assert (s.min_offset_in_queue("E", 0), s.max_offset_in_queue("E", 0)) == (first, 350)
    put_all(s, [Message(topic="E", body=b"later")])
    assert s.wait_dispatched(60)
    assert pull_all(s, "E", 0)[-1].body == b"later"


def test_queue_files_deleted_between_listing_and_mapping_are_skipped(
    tmp_path: Path,
    store_factory: Callable[[StoreConfig], MessageStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child deletes expired queue files (oldest first) while the store follows a
    queue it has not read yet: a file it listed is gone when it maps it. Cleanup and
    reads go on from the first file left (this was a FileNotFoundError out of
    ``clean_expired_files``)."""
    cfg = config(tmp_path)
    s = store_factory(cfg)
    msgs = [Message(topic="E", body=b"e%05d" % i + b"." * 300) for i in range(350)]
    results = put_all(s, msgs)  # queue files 0, 1, 2 and half of 3, not read
    assert s.wait_dispatched(60)
    _child_deletes_files_0_and_1_as_file_1_is_mapped(monkeypatch, cfg)
    assert s.clean_expired_files(immediately=True).commitlog_files > 0  # follows E/0 first
    _assert_read_from_the_first_file_left(s, results, msgs)


def test_queue_file_followed_partly_then_deleted_is_skipped(
    tmp_path: Path,
    store_factory: Callable[[StoreConfig], MessageStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store followed a queue into the middle of its second file; the queue grew
    by more files and the child deleted the first two (expired) while the second was
    unmapped (evicted from the pool). Following it again must resume at the first
    file left (this was a FileNotFoundError out of ``clean_expired_files`` on a
    loaded machine, where the store follows queues while they are still written)."""
    cfg = config(tmp_path)
    s = store_factory(cfg)
    msgs = [Message(topic="E", body=b"e%05d" % i + b"." * 300) for i in range(350)]
    results = put_all(s, msgs[:150])  # queue file 0 and half of file 1
    assert s.wait_dispatched(60)
    assert s.max_offset_in_queue("E", 0) == 150  # followed into file 1
    results += put_all(s, msgs[150:])  # the rest of file 1, file 2, half of file 3
    assert s.wait_dispatched(60)
    seen = _child_deletes_files_0_and_1_as_file_1_is_mapped(monkeypatch, cfg)
    assert s.clean_expired_files(immediately=True).commitlog_files > 0
    assert seen() == 1  # the race happened once, on the partly followed file
    _assert_read_from_the_first_file_left(s, results, msgs)


def _child_deletes_files_0_and_1_as_file_1_is_mapped(
    monkeypatch: pytest.MonkeyPatch, cfg: StoreConfig
) -> Callable[[], int]:
    """Queue E/0's first two files are deleted (the child's cleanup winning the race)
    the first time the store maps the second: it is unmapped first, as the mapping
    pool leaves a file it evicted (or has not mapped yet). Returns how many times
    that happened, as a callable read after the fact."""
    cq_dir = cfg.root / "consumequeue" / "E" / "0"
    expired = [cq_dir / f"{0:020d}", cq_dir / f"{2000:020d}"]
    mapping = ConsumeQueue._view
    fired: list[Path] = []

    def child_deletes_first(self: ConsumeQueue, mf: MappedFile) -> memoryview:
        if mf.path == expired[1] and not fired:
            fired.append(mf.path)
            mf.unmap()
            for path in expired:
                path.unlink(missing_ok=True)
        return mapping(self, mf)

    monkeypatch.setattr(ConsumeQueue, "_view", child_deletes_first)
    return lambda: len(fired)


def _assert_read_from_the_first_file_left(
    s: MessageStore, results: list[Any], msgs: list[Message]
) -> None:
    """E/0 reads on from the first unit whose record the CommitLog still holds."""
    low = s.min_physical_offset
    first = next(i for i, r in enumerate(results) if r.physical_offset >= low)
    assert first >= 200
    got = pull_all(s, "E", 0)
    assert [m.queue_offset for m in got] == list(range(first, 350))
    assert [m.body for m in got] == [m.body for m in msgs[first:]]


# -------------------------------------------------------------------- arrivals


def test_arrival_listeners_fire_for_each_message_in_queue_order(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    """Each queued message is announced once, in queue order, with its tags code and
    store time, and is already pullable when announced (long polling relies on it).
    A PREPARED transaction message gets no unit and no announcement."""
    s = store_factory(config(tmp_path))
    arrivals: list[Arrival] = []
    pullable: list[bool] = []

    def listener(a: Arrival) -> None:
        arrivals.append(a)
        pullable.append(s.max_offset_in_queue(a.topic, a.queue_id) > a.queue_offset)

    s.add_arrival_listener(listener)
    msgs = [message(i) for i in range(800)]
    results = put_all(s, msgs[:400])
    half = s.put_message(Message(topic="TopicA", body=b"half", queue_id=0,
                                 sys_flag=fmt.TRANSACTION_PREPARED_TYPE))  # fmt: skip
    assert half.status is PutStatus.PUT_OK
    results += put_all(s, msgs[400:])
    wait_for(lambda: len(arrivals) >= len(msgs), 10, "arrivals")
    assert s.wait_dispatched(60)
    time.sleep(0.05)  # nothing more may come
    assert len(arrivals) == len(msgs)
    assert all(pullable)
    by_queue: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
    for a in arrivals:
        by_queue[a.topic, a.queue_id].append((a.queue_offset, a.tags_code, a.store_timestamp))
    want: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
    for m, r in zip(msgs, results, strict=True):
        want[m.topic, m.queue_id].append((r.queue_offset, tags_code(m.tags), r.store_timestamp))
    assert by_queue == want


# -------------------------------------------------------------------- crashes


@pytest.mark.crash
def test_child_sigkilled_mid_stream_is_restarted_and_nothing_is_lost_or_doubled(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    """SIGKILL the child while a producer keeps putting: the watcher starts another,
    which resumes from the published progress (cutting its predecessor's unpublished
    units, catching the index up). Every message is pullable exactly once at its queue
    offset, every key is found, and the closed files pass the consistency check and
    read the same in thread mode."""
    cfg = config(tmp_path)
    s = store_factory(cfg)
    proc = s.logics.process
    assert proc is not None
    sent: list[tuple[Message, Any]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            for i in itertools.count():
                if stop.is_set() or i >= 10_000:
                    return
                m = message(i)
                r = s.put_message(m)
                assert r.status is PutStatus.PUT_OK
                sent.append((m, r))
                if i % 10 == 0:
                    time.sleep(0.01)  # ~1000 puts/s: a backlog, not a flood
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=produce)
    t.start()
    try:
        wait_for(lambda: len(sent) >= 500 and proc.reput_from > 0, 20, "puts")
        killed = []
        for n in (1, 2):  # the second kill lands while the new child works off the backlog
            killed.append(child_pid(s))
            os.kill(killed[-1], signal.SIGKILL)
            wait_for(lambda n=n: proc.restarts >= n and proc.pid not in (None, *killed), 15,
                     "restart")  # fmt: skip
        at_restart = len(sent)
        wait_for(lambda: len(sent) >= at_restart + 300, 20, "puts after the restarts")
    finally:
        stop.set()
        t.join()
    assert not errors
    assert s.wait_dispatched(60)
    assert proc.restarts == 2
    assert not any(alive(pid) for pid in killed)

    msgs = [m for m, _ in sent]
    for (topic, qid), queue_msgs in expected_queues(msgs).items():
        got = pull_all(s, topic, qid)
        assert [m.queue_offset for m in got] == list(range(len(queue_msgs))), (topic, qid)
        assert [m.body for m in got] == [m.body for m in queue_msgs], (topic, qid)
    for i, m in enumerate(msgs):
        assert [x.body for x in s.query_by_key(m.topic, f"k{i}").messages] == [m.body], i
    s.close()
    assert not (cfg.root / "abort").exists()
    assert check_cq_consistency(cfg.root, cfg) == []
    # A thread-mode store built from a copy of the log alone writes the same files.
    rebuilt = cfg.with_(root_dir=tmp_path / "rebuilt", dispatch_process=False)
    shutil.copytree(cfg.root / "commitlog", rebuilt.root / "commitlog")
    store_factory(rebuilt).close()
    assert tree(rebuilt.root / "consumequeue") == tree(cfg.root / "consumequeue")
    assert list(tree(rebuilt.root / "index").values()) == list(tree(cfg.root / "index").values())
    s = store_factory(cfg.with_(dispatch_process=False))
    for (topic, qid), queue_msgs in expected_queues(msgs).items():
        assert [m.body for m in pull_all(s, topic, qid)] == [m.body for m in queue_msgs]


PARENT = r"""
import json, os, sys, threading
from mqstore import Message, MessageStore, StoreConfig
root, sizes, mode = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
store = MessageStore.open(StoreConfig(root_dir=root, dispatch_process=True, **sizes))
out = sys.stdout.fileno()
os.write(out, f"child {store.logics.process.pid}\n".encode())
if mode == "idle":
    threading.Event().wait()
i = 0
while True:
    topic, qid = f"T{i % 3}", (i // 3) % 4
    r = store.put_message(Message(topic=topic, body=b"%d|" % i + b"p" * (i % 300),
                                  keys=[f"k{i}"], queue_id=qid))
    if r.status.name == "PUT_OK":
        os.write(out, f"A {i} {topic} {qid} {r.queue_offset} {r.physical_offset}\n".encode())
    i += 1
"""


def spawn_parent(root: Path, mode: str) -> tuple[subprocess.Popen[bytes], int]:
    """A process that opens a process-mode store at ``root``; returns it and its child's pid.

    Its stderr goes to a file: the child inherits it, and a pipe would stay open
    (blocking ``communicate``) for as long as the child lives.
    """
    root.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"parent-{mode}.err", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", PARENT, str(root), json.dumps(ROLLING_SIZES), mode],
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=REPO,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(b"child "):
        proc.kill()
        proc.wait(30)
        text = (root.parent / f"parent-{mode}.err").read_text(errors="replace")
        raise AssertionError(f"the parent did not start: {line!r} {text[-2000:]}")
    return proc, int(line.split()[1])


def kill_quietly(pid: int) -> None:
    """SIGCONT + SIGKILL ``pid`` if it still runs (a stopped child never stays behind)."""
    if alive(pid):
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return


@pytest.mark.crash
def test_parent_sigkilled_child_exits_and_acked_messages_survive(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    """SIGKILL the producing parent: its child sees its command pipe close and exits
    at once; reopened (thread mode), every acknowledged message is there, intact and
    pullable at its queue offset, the files are consistent, and puts continue."""
    root = tmp_path / "store"
    parent, pid = spawn_parent(root, "put")
    acks: list[tuple[int, str, int, int, int]] = []
    try:
        assert parent.stdout is not None
        while len(acks) < 3000:
            line = parent.stdout.readline()
            assert line, "the parent died"
            _a, i, topic, qid, qoff, phys = line.split()
            acks.append((int(i), topic.decode(), int(qid), int(qoff), int(phys)))
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        try:
            wait_for(lambda: not alive(pid), 5, "the orphaned child to exit")
        finally:
            kill_quietly(pid)
            rest = parent.stdout.read() if parent.stdout is not None else b""
            parent.communicate(timeout=30)
    for line in rest.splitlines(keepends=True):
        if line.endswith(b"\n"):  # a line cut by the kill was no acknowledgement
            _a, i, topic, qid, qoff, phys = line.split()
            acks.append((int(i), topic.decode(), int(qid), int(qoff), int(phys)))

    cfg = config(root, dispatch_process=False)
    s = store_factory(cfg)
    assert not s.last_exit_ok
    assert check_consistency(root, cfg.commitlog_file_size, end=s.max_physical_offset) == []
    for i, topic, qid, qoff, phys in acks:
        body = b"%d|" % i + b"p" * (i % 300)
        rec = s.look_message_by_offset(phys)
        assert rec is not None, f"acked message {i} lost"
        assert (rec.topic, rec.queue_id, rec.queue_offset, rec.body) == (topic, qid, qoff, body)
        g = s.get_message("g", topic, qid, qoff, 1)
        assert [(m.queue_offset, m.body) for m in g.messages] == [(qoff, body)]
    last = max(a for a in acks if a[1:3] == ("T0", 0))
    r = s.put_message(Message(topic="T0", body=b"after", queue_id=0))
    assert r.status is PutStatus.PUT_OK and r.queue_offset > last[3]
    assert [m.body for m in s.query_by_key("T0", f"k{last[0]}").messages] == [
        b"%d|" % last[0] + b"p" * (last[0] % 300)
    ]
    s.close()
    assert check_cq_consistency(root, cfg) == []


@pytest.mark.crash
def test_child_holds_the_store_lock_until_it_exits(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    """The parent is SIGKILLed while its child is stopped: the child still holds the
    store's lock, so no other process may open the store (it would write the same
    queue files). Once the child runs again it sees the parent gone and exits; then
    the store opens."""
    root = tmp_path / "store"
    parent, pid = spawn_parent(root, "idle")
    try:
        os.kill(pid, signal.SIGSTOP)
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        with pytest.raises(StoreLockedError):
            MessageStore.open(config(root))
        os.kill(pid, signal.SIGCONT)
        wait_for(lambda: not alive(pid), 5, "the child to exit after SIGCONT")
    finally:
        if parent.poll() is None:
            parent.kill()
        kill_quietly(pid)
        parent.communicate(timeout=30)
    s = store_factory(config(root))
    assert s.put_message(Message(topic="T", body=b"x")).status is PutStatus.PUT_OK
    assert s.wait_dispatched(60)
    assert [m.body for m in pull_all(s, "T", 0)] == [b"x"]


@pytest.mark.crash
def test_keys_put_before_an_abandon_are_found_while_the_child_catches_the_index_up(
    tmp_path: Path,
    store_factory: Callable[[StoreConfig], MessageStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A crash (``abandon``) leaves index files newer than the checkpoint, which the
    next open destroys; the reopened store hands the rebuild to its child. A key query
    right after open waits for that catch-up and finds every key. (One large index
    file that never filled: the checkpoint covers none of it, so all of it is
    rebuilt, which takes the child a while.)"""
    handed: list[int | None] = []
    real_start = DispatchProcess.start

    def spy(self: DispatchProcess, reput_from: int, index_from: int | None) -> None:
        handed.append(index_from)
        real_start(self, reput_from, index_from)

    monkeypatch.setattr(DispatchProcess, "start", spy)
    cfg = config(tmp_path, max_index_num=20_000)
    s = store_factory(cfg)
    msgs = [message(i) for i in range(5000)]
    put_all(s, msgs)
    assert s.wait_dispatched(60)
    pid = child_pid(s)
    s.abandon()
    assert not alive(pid)
    s = store_factory(cfg)
    assert handed == [None, 0]  # the child rebuilds the whole index
    last = msgs[-1]  # indexed last: the first query must wait for all of the rebuild
    assert [x.body for x in s.query_by_key(last.topic, f"k{len(msgs) - 1}").messages] == [last.body]
    for i in range(0, len(msgs), 3):
        m = msgs[i]
        assert [x.body for x in s.query_by_key(m.topic, f"k{i}").messages] == [m.body], i
    assert s.dispatch_progress.indexed
    r = s.put_message(Message(topic="TopicB", body=b"new", keys=["fresh"]))
    assert r.status is PutStatus.PUT_OK
    assert s.wait_dispatched(60)
    assert [x.body for x in s.query_by_key("TopicB", "fresh").messages] == [b"new"]
    s.close()
    assert check_cq_consistency(cfg.root, cfg) == []


EIO_WORKER = r"""
import errno, runpy, sys
from mqstore import faults

def eio(**context):
    raise OSError(errno.EIO, "injected EIO", context.get("what"))

faults.register("before_fdatasync", eio)
sys.argv = ["mqstore.consumequeue.worker"]
runpy.run_module("mqstore.consumequeue.worker", run_name="__main__")
"""


@pytest.mark.crash
def test_child_whose_queue_sync_fails_poisons_the_store_and_is_not_restarted(
    tmp_path: Path,
    store_factory: Callable[[StoreConfig], MessageStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child's consume-queue sync fails (EIO injected in the child): it exits with
    its flush-failed status, the store is poisoned (puts refused until reopened)
    instead of the child being restarted, and a reopen recovers."""
    script = tmp_path / "eio_worker.py"
    script.write_text(EIO_WORKER)
    wrapper = tmp_path / "python-eio"  # run as "<wrapper> -m mqstore.consumequeue.worker"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}"\n')
    wrapper.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(wrapper))
    cfg = config(
        tmp_path / "store", flush_interval_consume_queue_ms=20, flush_consume_queue_least_pages=0
    )
    s = store_factory(cfg)
    monkeypatch.undo()  # only the first child runs with the fault
    proc = s.logics.process
    assert proc is not None
    put_all(s, [message(i) for i in range(20)])
    wait_for(lambda: s.poisoned is not None, 10, "the store to be poisoned")
    assert "could not sync consume queues (exit 3)" in str(s.poisoned)
    assert proc.pid is None
    r = s.put_message(message(20))
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE
    time.sleep(1.2)  # longer than the restart back-off
    assert proc.restarts == 0 and proc.pid is None
    s.close()
    assert (cfg.root / "abort").exists()  # not a clean shutdown
    s = store_factory(cfg.with_(dispatch_process=False))
    assert s.wait_dispatched(60)
    assert sum(s.max_offset_in_queue(t, q) for t in TOPICS for q in range(QUEUES)) == 20
    s.close()
    assert check_cq_consistency(cfg.root, cfg) == []


# ------------------------------------------------------------------- SYNC_FLUSH


def test_sync_flush_acknowledged_message_becomes_pullable(
    tmp_path: Path, store_factory: Callable[[StoreConfig], MessageStore]
) -> None:
    s = store_factory(config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH))
    for i in range(60):
        m = message(i)
        r = s.put_message(m)
        assert r.status is PutStatus.PUT_OK
        assert s.wait_dispatched(60)
        g = s.get_message("g", m.topic, m.queue_id, r.queue_offset, 1)
        assert [x.body for x in g.messages] == [m.body]


def test_sync_flush_unflushed_message_is_not_dispatched(
    tmp_path: Path,
    store_factory: Callable[[StoreConfig], MessageStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under SYNC_FLUSH the child's limit is the flushed offset: a written but
    unflushed message (a put that did not wait) is not pullable until the flush."""
    s = store_factory(config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH))
    put_all(s, [Message(topic="S", body=b"first")])
    assert s.wait_dispatched(60)
    release = threading.Event()
    real_flush = s.segments.flush

    def held_flush(*args: Any, **kwargs: Any) -> Any:
        release.wait(10)
        return real_flush(*args, **kwargs)

    monkeypatch.setattr(s.segments, "flush", held_flush)
    try:
        r = s.put_message(Message(topic="S", body=b"second", wait_store_msg_ok=False))
        assert r.status is PutStatus.PUT_OK
        assert s.max_physical_offset > s.flushed_physical_offset
        assert not s.wait_dispatched(0.3)
        assert [m.body for m in pull_all(s, "S", 0)] == [b"first"]
        proc = s.logics.process
        assert proc is not None
        assert proc.state.get(shared.Slot.LIMIT) <= r.physical_offset
    finally:
        release.set()
    assert s.wait_dispatched(60)
    assert [m.body for m in pull_all(s, "S", 0)] == [b"first", b"second"]
