"""The reput thread reads the log through the cursor's step (``cursor.step``): it stops
at the committed end without judging what lies past it, goes on there once more is
committed, and skips damage in the middle of its range as the cursor does (to the next
record naming its own position), dispatching the records after it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mqstore import Arrival, Message, MessageStore, StoreConfig
from mqstore.commitlog.segments import Segments
from mqstore.consumequeue.dispatch import Dispatcher, ReputService
from mqstore.consumequeue.store import ConsumeQueueStore
from mqstore.schedule import DelayLevels

FILE = 64 * 1024


def write_log(root: Path, n: int) -> tuple[StoreConfig, list[tuple[int, int]]]:
    """A closed store's CommitLog of ``n`` messages in queue 0; (config, (offset, size)
    of each record)."""
    cfg = StoreConfig(root_dir=root, commitlog_file_size=FILE, message_index_enable=False)
    with MessageStore.open(cfg) as s:
        rs = [s.put_message(Message(topic="T", body=b"m%03d" % i)) for i in range(n)]
    return cfg, [(r.physical_offset, r.size) for r in rs]


def patch(cfg: StoreConfig, offset: int, data: bytes) -> None:
    """Write ``data`` at log ``offset`` (the reput's mapping sees it: shared pages)."""
    fd = os.open(cfg.commitlog_path / f"{offset - offset % FILE:020d}", os.O_RDWR)
    try:
        os.pwrite(fd, data, offset % FILE)
    finally:
        os.close(fd)


def read(cfg: StoreConfig, offset: int, size: int) -> bytes:
    with open(cfg.commitlog_path / f"{offset - offset % FILE:020d}", "rb") as f:
        f.seek(offset % FILE)
        return f.read(size)


@contextmanager
def reput(cfg: StoreConfig, out: Path, limit: list[int]) -> Iterator[tuple[ReputService, list]]:
    """A reput thread's service (not started) over the log into empty queues under
    ``out``, dispatching up to ``limit[0]``; and the queue offsets it announced."""
    segs = Segments(cfg.commitlog_path, FILE)
    segs.map_new_files()
    queues = ConsumeQueueStore(out / "consumequeue", 20 * 100)
    queues.load()
    queues.recover()
    d = Dispatcher(queues, None, DelayLevels.parse("1s"))
    heard: list[int] = []
    d.listeners.append(lambda a: heard.append(a.queue_offset) if isinstance(a, Arrival) else None)
    try:
        yield ReputService(segs, d, reput_from=0, limit=lambda: limit[0]), heard
    finally:
        queues.close()
        segs.close()


@pytest.mark.parametrize("batch", [True, False], ids=["batch", "per-record"])
def test_damage_in_the_middle_of_the_range_is_skipped_and_the_rest_dispatched(
    tmp_path: Path, batch: bool
):
    cfg, recs = write_log(tmp_path / "log", 80)
    bad_at, bad_size = recs[50]
    patch(cfg, bad_at, bytes(8))  # TOTALSIZE and MAGICCODE zeroed: no size to skip by
    end = recs[-1][0] + recs[-1][1]
    with reput(cfg, tmp_path / "out", [end]) as (rs, heard):
        if not batch:
            rs.batch = None
        while rs.do_reput():
            pass
        assert rs.reput_from == end
        assert heard == [q for q in range(80) if q != 50]
        assert rs.skipped_bytes == bad_size


def test_the_reput_stops_at_the_committed_end_and_resumes_there(tmp_path: Path):
    cfg, recs = write_log(tmp_path / "log", 6)
    committed = recs[2][0] + recs[2][1]
    at, size = recs[3]
    whole = read(cfg, at, size)
    patch(cfg, at + size // 2, bytes(size - size // 2))  # the next record half written
    limit = [committed]
    with reput(cfg, tmp_path / "out", limit) as (rs, heard):
        assert rs.do_reput() == 3
        assert (rs.reput_from, heard, rs.skipped_bytes) == (committed, [0, 1, 2], 0)
        patch(cfg, at, whole)  # the write completes and is committed with the rest
        limit[0] = recs[-1][0] + recs[-1][1]
        assert rs.do_reput() == 3
        assert (rs.reput_from, heard, rs.skipped_bytes) == (limit[0], list(range(6)), 0)
