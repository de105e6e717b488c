"""The dispatcher killed (SIGKILL, a real process) in the middle of a batched index write,
then restarted: its consume queues and index end up as a record-by-record dispatch of the
same log leaves them.

A killed writer leaves what it wrote through its mapping (the page cache keeps it): a
batch's entries, or its entries and the slot heads that point at them, without the
header whose counts cover them. The restarted dispatcher resumes from the header (the
catch-up starts at the last indexed message) and writes those entries again. The
invariant users rely on is that every key finds each of its messages exactly once and
nothing is lost; the test holds the files to the stronger one, byte for byte the
reference (the same entry numbers, chains, counts and times), which implies it.

The process under test is the dispatcher child's own :class:`Worker` (the same objects
``dispatch_process=True`` runs), driven by a small script that SIGKILLs itself at the
``hit``-th pass of a fault point (``mqstore.faults``). The kills land where the
``SIGKILL`` restart test of ``tests/store/test_dispatch_process.py`` once caught one by
chance.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mqstore import Message, MessageStore, PutStatus, StoreConfig
from mqstore.commitlog.segments import Segments
from mqstore.consumequeue.dispatch import Dispatcher, ReputService
from mqstore.consumequeue.store import ConsumeQueueStore
from mqstore.index import format as ifmt
from mqstore.index.service import LONG_MAX, IndexService
from mqstore.schedule import DelayLevels
from tests.dispatch_child import REPO, ROLLING_SIZES, needs_child
from tests.helpers import tree

pytestmark = [pytest.mark.crash, needs_child]

# Few slots: long chains, every batch touches old heads; ~130 messages of 3 keys per
# index file: batches cross files.
SIZES: dict[str, Any] = {**ROLLING_SIZES, "max_hash_slot_num": 16}
MESSAGES = 700
TOPICS = ("TopicA", "TopicB")

CHILD = r"""
import json, os, signal, sys
from pathlib import Path
from mqstore import faults
from mqstore.config import StoreConfig
from mqstore.consumequeue.shared import FILE_NAME, SharedState, Slot
from mqstore.consumequeue.worker import Start, Worker

root, sizes, point, hit, restart = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
cfg = StoreConfig(root_dir=root, **sizes)
state = SharedState(cfg.root / FILE_NAME, create=not restart)
if not restart:
    state.set(Slot.LIMIT, int(sys.argv[6]))
calls = [0]

def kill(**at):
    if point == "before_index_allocate" and at["offset"]:
        return  # only the reservation of a new file's header: before it is written
    calls[0] += 1
    if calls[0] == hit:
        os.kill(os.getpid(), signal.SIGKILL)

if hit:
    faults.register(point, kill)
worker = Worker(Start(cfg, state.get(Slot.DISPATCHED), None, restart), state)
if sys.argv[7] == "small-batches":
    worker.reput.batch_records = None  # batches of PUBLISH_CHUNK records at most
if sys.argv[7] == "records":
    worker.reput.batch = None
    if worker.reput.catch_up is not None:
        worker.reput.catch_up.batch = None
while worker.reput.reput_from < state.get(Slot.LIMIT) or not worker.reput.indexed:
    worker.step()
print("stopped", worker.stop(), flush=True)
"""


def config(root: Path) -> StoreConfig:
    return StoreConfig(root_dir=root, **SIZES)


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CommitLog of :data:`MESSAGES` messages, three keys each (UNIQ_KEY, one unique
    key, one of seven shared ones), two topics, four queues, over several segments."""
    root = tmp_path_factory.mktemp("log")
    s = MessageStore.open(config(root).with_(message_index_enable=False))
    try:
        for i in range(MESSAGES):
            r = s.put_message(
                Message(
                    topic=TOPICS[i % 2],
                    body=b"%d|" % i + b"." * (i % 90),
                    tags=("a", "b", None)[i % 3],
                    keys=[f"k{i}", f"g{i % 7}"],
                    queue_id=(i // 2) % 4,
                )
            )
            assert r.status is PutStatus.PUT_OK
        (root / "end").write_text(str(s.max_physical_offset))
    finally:
        s.close()
    return root / "commitlog"


def copy_log(log_dir: Path, root: Path) -> StoreConfig:
    cfg = config(root)
    shutil.copytree(log_dir, cfg.commitlog_path)
    return cfg


def log_end(log_dir: Path) -> int:
    """Where the log's last record ends (its segments load as full)."""
    return int((log_dir.parent / "end").read_text())


def run_child(
    cfg: StoreConfig,
    end: int,
    *,
    point: str = "",
    hit: int = 0,
    restart: bool,
    path: str = "batches",
) -> bool:
    """Run the dispatcher child's Worker to the end of the log (``path``: "batches" as
    it runs; "small-batches": batches end every PUBLISH_CHUNK records, so most puts go to
    a file that already holds entries; "records": one by one); True if it was killed (at
    the ``hit``-th pass of ``point``) instead of finishing."""
    argv = [sys.executable, "-c", CHILD, str(cfg.root), json.dumps(SIZES), point, str(hit)]
    argv += ["1" if restart else "0", str(end), path]
    proc = subprocess.run(argv, check=False, cwd=REPO, capture_output=True, timeout=120)
    if proc.returncode == -9:
        return True
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.strip() == b"stopped True", proc.stdout
    return False


def reference(log_dir: Path, root: Path) -> StoreConfig:
    """The same log dispatched record by record in this process (no batches)."""
    cfg = copy_log(log_dir, root)
    segs = Segments(cfg.commitlog_path, cfg.commitlog_file_size)
    segs.load()
    queues = ConsumeQueueStore(cfg.consume_queue_path, cfg.consume_queue_file_size)
    queues.load()
    index = IndexService.for_store(cfg, lambda _ts: None)
    assert index is not None
    index.load(last_exit_ok=True, index_msg_timestamp=0)
    d = Dispatcher(queues, index, DelayLevels.parse(cfg.message_delay_level))
    end = log_end(log_dir)
    reput = ReputService(segs, d, reput_from=0, limit=lambda: end)
    reput.batch = None
    assert reput.do_reput() == MESSAGES
    queues.flush(0)
    index.flush()
    queues.close()
    index.close()
    segs.close()
    return cfg


def lookups(cfg: StoreConfig) -> dict[str, list[int]]:
    """Every key's CommitLog offsets as the index returns them (sorted)."""
    index = IndexService.for_store(cfg, lambda _ts: None)
    assert index is not None
    index.load(last_exit_ok=True, index_msg_timestamp=0)
    try:
        out = {}
        for topic in TOPICS:
            for key in [f"k{i}" for i in range(MESSAGES)] + [f"g{j}" for j in range(7)]:
                found = index.query(topic, key, 1 << 20, 0, LONG_MAX).phy_offsets
                out[f"{topic}#{key}"] = sorted(found)
        return out
    finally:
        index.close()


@pytest.fixture(scope="module")
def expected(log_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> StoreConfig:
    return reference(log_dir, tmp_path_factory.mktemp("reference"))


def assert_same_as_reference(cfg: StoreConfig, ref: StoreConfig) -> None:
    want = lookups(ref)
    got = lookups(cfg)
    # What users see first: each key finds each of its messages exactly once.
    assert sum(len(v) for v in want.values()) >= 2 * MESSAGES
    for key, offsets in want.items():
        assert got[key] == offsets, key
    assert tree(cfg.consume_queue_path) == tree(ref.consume_queue_path)
    got_index = list(tree(cfg.index_path).values())
    want_index = list(tree(ref.index_path).values())
    assert len(want_index) > 3  # index files rolled
    assert len(got_index) == len(want_index)
    for i, (a, b) in enumerate(zip(got_index, want_index, strict=True)):
        assert ifmt.HEADER.unpack_from(a) == ifmt.HEADER.unpack_from(b), f"index file #{i}"
        assert a == b, f"index file #{i} differs"


def test_unkilled_child_writes_the_reference_files(
    log_dir: Path, expected: StoreConfig, tmp_path: Path
) -> None:
    cfg = copy_log(log_dir, tmp_path)
    assert not run_child(cfg, log_end(log_dir), restart=False)
    assert_same_as_reference(cfg, expected)


@pytest.mark.parametrize("hit", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("point", ["index_entries_written", "index_slots_written"])
def test_child_killed_mid_index_batch_restarts_to_the_reference_files(
    log_dir: Path, expected: StoreConfig, tmp_path: Path, point: str, hit: int
) -> None:
    """Killed after a batch's entries (or its entries and slot heads) were written and
    before the header covering them; the restarted child catches the index up from
    the header and must leave every byte as the record-by-record reference."""
    cfg = copy_log(log_dir, tmp_path)
    end = log_end(log_dir)
    assert run_child(cfg, end, point=point, hit=hit, restart=False, path="small-batches")
    assert not run_child(cfg, end, restart=True)
    assert_same_as_reference(cfg, expected)


@pytest.mark.parametrize("hit", [4])
def test_child_with_its_own_batch_size_killed_mid_index_batch(
    log_dir: Path, expected: StoreConfig, tmp_path: Path, hit: int
) -> None:
    """The child as it runs (batches of up to BATCH_RECORDS) killed between a batch's
    slot heads and its header."""
    cfg = copy_log(log_dir, tmp_path)
    end = log_end(log_dir)
    assert run_child(cfg, end, point="index_slots_written", hit=hit, restart=False)
    assert not run_child(cfg, end, restart=True)
    assert_same_as_reference(cfg, expected)


@pytest.mark.parametrize("hit", [2, 40, 150])
def test_child_dispatching_record_by_record_killed_between_slots_and_header(
    log_dir: Path, expected: StoreConfig, tmp_path: Path, hit: int
) -> None:
    """The same kill in the per-record path (one message's keys, then its header),
    which had the same flaw: batches only made the window wider."""
    cfg = copy_log(log_dir, tmp_path)
    end = log_end(log_dir)
    assert run_child(cfg, end, point="index_slots_written", hit=hit, restart=False,
                     path="records")  # fmt: skip
    assert not run_child(cfg, end, restart=True, path="records")
    assert_same_as_reference(cfg, expected)


@pytest.mark.parametrize(("first", "second"), [(3, 1), (5, 2)])
def test_child_killed_again_during_its_index_catch_up(
    log_dir: Path, expected: StoreConfig, tmp_path: Path, first: int, second: int
) -> None:
    """The restarted child is killed between slots and header in its own catch-up's
    batch, then restarted again."""
    cfg = copy_log(log_dir, tmp_path)
    end = log_end(log_dir)
    point = "index_slots_written"
    assert run_child(cfg, end, point=point, hit=first, restart=False, path="small-batches")
    assert run_child(cfg, end, point=point, hit=second, restart=True)
    assert not run_child(cfg, end, restart=True)
    assert_same_as_reference(cfg, expected)


@pytest.mark.parametrize("hit", [2, 3])
def test_child_killed_before_a_new_index_files_header_restarts_to_the_reference_files(
    log_dir: Path, expected: StoreConfig, tmp_path: Path, hit: int
) -> None:
    """Killed after sizing a new index file and before writing its header: the file
    holds no entry and must not be taken for one whose last message is at offset 0
    (the catch-up would index the whole log again into it)."""
    cfg = copy_log(log_dir, tmp_path)
    end = log_end(log_dir)
    assert run_child(cfg, end, point="before_index_allocate", hit=hit, restart=False)
    assert not run_child(cfg, end, restart=True)
    assert_same_as_reference(cfg, expected)


STORE = r"""
import json, os, signal, sys
from mqstore import MessageStore, StoreConfig, faults

root, sizes, point, hit = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
calls = [0]

def kill(**_):
    calls[0] += 1
    if calls[0] == hit:
        os.kill(os.getpid(), signal.SIGKILL)

faults.register(point, kill)
store = MessageStore.open(StoreConfig(root_dir=root, **sizes))
store.wait_dispatched(60)
store.close()
"""


@pytest.mark.parametrize("hit", [2, 3, 4])
def test_store_killed_mid_index_batch_of_its_reput_thread_reopens_to_the_reference_files(
    log_dir: Path, expected: StoreConfig, tmp_path: Path, hit: int
) -> None:
    """The default store (dispatcher thread) opened over a log with no queues or index
    dispatches it in batches (inside ``open``, before the abort file exists); killed
    between a batch's slot heads and its header, then opened again: the reference
    files."""
    cfg = copy_log(log_dir, tmp_path)
    argv = [sys.executable, "-c", STORE, str(cfg.root), json.dumps(SIZES)]
    proc = subprocess.run(
        [*argv, "index_slots_written", str(hit)],
        check=False, cwd=REPO, capture_output=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr.decode()
    s = MessageStore.open(cfg)
    assert s.wait_dispatched(30)
    s.close()
    assert_same_as_reference(cfg, expected)
