"""The batched dispatch writes the bytes the per-record dispatch writes.

One CommitLog is written once; it is then dispatched twice into empty consume-queue and
index directories, record by record (the reference) and in batches (tiny ones, so every
boundary case lands inside a batch), and the two results must be byte-identical:
every file under ``consumequeue/`` and ``index/``, the arrivals announced, the index
state (out of space, deferred) and the dispatch progress.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore import Arrival, FlushDiskType, Message, MessageStore, StoreConfig, faults
from mqstore.commitlog import _layout as L
from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt
from mqstore.commitlog.segments import Segments
from mqstore.consumequeue.catch_up import IndexCatchUp
from mqstore.consumequeue.dispatch import Dispatcher, ReputService
from mqstore.consumequeue.dispatch_batch import BatchDispatcher
from mqstore.consumequeue.store import ConsumeQueueStore
from mqstore.index.service import IndexService
from mqstore.schedule import DelayLevels

LOG_FILE = 64 * 1024
CQ_FILE = 20 * 7
PROPERTY = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
"""What the properties share: an example writes a log and dispatches it twice into
directories of its own, which may take longer than Hypothesis' deadline."""
_TX = (
    fmt.TRANSACTION_NOT_TYPE, fmt.TRANSACTION_NOT_TYPE, fmt.TRANSACTION_PREPARED_TYPE,
    fmt.TRANSACTION_COMMIT_TYPE, fmt.TRANSACTION_ROLLBACK_TYPE,
)  # fmt: skip

tokens = st.sampled_from(["k1", "k2", "x", "order-1", "", "k1", "k3", "ключ"])
messages = st.builds(
    lambda topic, qid, tags, keys, delay, tx, v6, body, raw: Message(
        topic=topic,
        body=body,
        tags=tags,
        keys=keys,
        queue_id=qid,
        delay_level=delay,
        sys_flag=tx,
        born_host=("::1", 7) if v6 else ("127.0.0.1", 7),
        **({"properties": {"p": "v"}, "stored_properties": raw} if raw is not None else {}),
    ),
    st.sampled_from(["T", "Other", "t2"]),
    st.integers(0, 2),
    st.sampled_from([None, "TagA", "b", "TagA", "b", "Tä"]),
    st.none() | st.lists(tokens, max_size=3),
    st.sampled_from([0, 0, 0, 1, 2]),
    st.sampled_from(_TX),
    st.sampled_from([False] * 9 + [True]),
    st.binary(min_size=1, max_size=40),
    st.sampled_from([None] * 10 + [
        "KEYS\x01a\x02KEYS\x01b c\x02TAGS\x01t\x02", "TAGS\x01\x02KEYS\x01\x02",
        "\x02\x02UNIQ_KEY\x01u1\x02", "KEYS\x01 a  b \x02UNIQ_KEY\x01u\x01v\x02",
        "DELAY\x011\x02KEYS\x01d\x02",
    ]),
)  # fmt: skip


def write_log(root: Path, msgs: list[Message], times: list[int]) -> tuple[Path, int]:
    """A CommitLog holding ``msgs`` (store times then overwritten with ``times``), and
    where it ends."""
    cfg = StoreConfig(
        root_dir=root,
        commitlog_file_size=LOG_FILE,
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        message_index_enable=False,
    )
    with MessageStore.open(cfg) as s:
        for m in msgs:
            assert s.put_message(m).status.stored
        end = s.commitlog.segments.max_offset
    at = 0
    for path in sorted(cfg.commitlog_path.iterdir()):
        data = path.read_bytes()
        pos = 0
        with open(path, "r+b") as f:
            while pos < len(data):
                r = fmt.scan(data, pos, len(data), check_crc=False)
                if not isinstance(r, fmt.RecordInfo):
                    break
                f.seek(pos + L.store_timestamp_pos(r.sys_flag))
                f.write(times[at % len(times)].to_bytes(8, "big", signed=True))
                at += 1
                pos += r.size
    return cfg.commitlog_path, end


@dataclass
class Outcome:
    files: dict[str, bytes]
    arrivals: list[Arrival]
    state: tuple[Any, ...]


@contextmanager
def dispatching(
    log_dir: Path, out: Path, slots: int, entries: int
) -> Iterator[tuple[Segments, ConsumeQueueStore, IndexService, Dispatcher]]:
    """The log's segments, and a dispatcher into empty consume queues and index under
    ``out``, all closed after."""
    segs = Segments(log_dir, LOG_FILE)
    segs.map_new_files()
    queues = ConsumeQueueStore(out / "consumequeue", CQ_FILE)
    queues.load()
    queues.recover()
    index = IndexService(out / "index", slots, entries, clock=lambda: 1_700_000_000_000)
    index.load(last_exit_ok=True, index_msg_timestamp=0)
    try:
        yield segs, queues, index, Dispatcher(queues, index, DelayLevels.parse("1s 5s 10s"))
    finally:
        index.close()
        queues.close()
        segs.close()


def files_of(out: Path) -> dict[str, bytes]:
    """Every file under ``out``, by relative path."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def dispatch(
    log: tuple[Path, int], out: Path, *, batch: int | None, chunk: int, slots: int, entries: int,
    no_space_after: int | None, replay_from: int = 0, catch_up: bool = False,
) -> Outcome:  # fmt: skip
    """Dispatch the log at ``log_dir`` into ``out`` (``batch``: minimum batch size, None:
    record by record); ``replay_from`` records are dispatched record by record first
    and the whole log again after (a re-dispatch over what is there). ``catch_up``: the
    reput thread builds units only, an :class:`IndexCatchUp` indexes afterwards."""
    log_dir, log_end = log
    with dispatching(log_dir, out, slots, entries) as (segs, queues, index, d):
        heard: list[Arrival] = []
        d.listeners.append(heard.append)
        rs = ReputService(segs, d, reput_from=0, limit=lambda: log_end)
        rs.chunk = chunk
        cu = IndexCatchUp(segs, d, 0) if catch_up else None
        caught: tuple[int, int | None] | None = None
        with faults.inject(
            "before_index_allocate",
            faults.raise_oserror(errno.ENOSPC, after=no_space_after)
            if no_space_after is not None
            else lambda **_: None,
        ):
            if replay_from:
                rs.batch = None
                rs.chunk = replay_from
                rs.do_reput(interruptible=False)
                rs.reput_from, rs.chunk = 0, chunk
            rs.batch = BatchDispatcher(d, batch) if batch is not None else None
            while rs.do_reput():
                pass
            if cu is not None:
                cu.batch = BatchDispatcher(d, batch) if batch is not None else None
                try:
                    while not cu.step(log_end, chunk):
                        pass
                except OSError as e:
                    caught = (cu.position, e.errno)
        index.join_flushers()
        state = (
            rs.reput_from, d.defer_index, d.index_pending_from, d.index_disabled is not None,
            rs.failures.counts(), queues.logics_msg_timestamp,
            [(f.path.name, f.header()) for f in index.files], caught,
            None if cu is None else (cu.position, cu.done),
        )  # fmt: skip
    return Outcome(files_of(out), heard, state)


@settings(PROPERTY, max_examples=100)
@given(
    msgs=st.lists(messages, min_size=1, max_size=60),
    deltas=st.lists(st.sampled_from([0, 1, 999, 1000, 2500, -3000, 60_000]), min_size=1),
    zero_time=st.booleans(),
    batch=st.integers(1, 8),
    chunk=st.sampled_from([3, 17, 1024]),
    slots=st.sampled_from([1, 2, 5, 64]),
    entries=st.sampled_from([2, 3, 6, 200]),
    no_space_after=st.none() | st.integers(0, 6),
    replay_from=st.sampled_from([0, 0, 1, 5]),
    catch_up=st.booleans(),
)
def test_batched_dispatch_writes_the_bytes_of_the_per_record_dispatch(
    tmp_path_factory: Any, msgs: list[Message], deltas: list[int], zero_time: bool, batch: int,
    chunk: int, slots: int, entries: int, no_space_after: int | None, replay_from: int,
    catch_up: bool,
) -> None:  # fmt: skip
    root = tmp_path_factory.mktemp("log")
    t, times = 1_700_000_000_000, []
    for i, dt in enumerate(deltas):
        t += dt
        times.append(0 if zero_time and i == 0 else t)
    log = write_log(root / "store", msgs, times)
    kw = {"chunk": chunk, "slots": slots, "entries": entries, "no_space_after": no_space_after,
          "replay_from": replay_from, "catch_up": catch_up}  # fmt: skip
    one = dispatch(log, root / "one", batch=None, **kw)
    many = dispatch(log, root / "many", batch=batch, **kw)
    assert many.state == one.state
    assert many.arrivals == one.arrivals
    assert many.files.keys() == one.files.keys()
    for name, data in one.files.items():
        assert many.files[name] == data, name


def test_a_backlog_is_dispatched_in_one_batch(tmp_path: Path, monkeypatch: Any) -> None:
    msgs = [Message(topic="T", body=b"b%d" % i, tags="a", keys=[f"k{i}"]) for i in range(300)]
    log = write_log(tmp_path / "store", msgs, [1_700_000_000_000])
    calls: list[int] = []
    real = BatchDispatcher.apply

    def counting(self: BatchDispatcher, b: Any) -> None:
        calls.append(b.count)
        real(self, b)

    monkeypatch.setattr(BatchDispatcher, "apply", counting)
    out = dispatch(log, tmp_path / "out", batch=32, chunk=1024, slots=64, entries=1000,
                   no_space_after=None)  # fmt: skip
    assert calls == [300]
    assert [a.queue_offset for a in out.arrivals] == list(range(300))


def redispatch(
    log: tuple[Path, int], out: Path, *, sink: str, cuts: list[int], batch: int, slots: int,
    entries: int,
) -> Outcome:  # fmt: skip
    """Recovery's re-dispatch of the whole log, in runs of records cut at the record
    numbers in ``cuts``: ``Dispatcher.dispatch_run`` over each run's bytes (``sink``
    "runs"), ``Dispatcher.dispatch_plain`` over each run's bulk scan ("plain"), or a
    ``RecordInfo`` per record ("infos", the reference). ``batch``: the dispatcher's
    minimum batch size."""
    log_dir, log_end = log
    with dispatching(log_dir, out, slots, entries) as (segs, queues, index, d):
        d.batch = BatchDispatcher(d, batch)

        def run(view: memoryview, start: int, end: int) -> None:
            if sink == "runs":
                d.dispatch_run(view, start, end)
            else:
                found = bulk.scan_plain(view, start, end, len(view), check_crc=False)
                assert found.end == end
                d.dispatch_plain(view, found.records, len(found.records))

        n = 0
        for mf in segs.files:
            view, pos, run_start = mf.view, 0, 0
            limit = min(mf.file_size, log_end - mf.file_from_offset)
            while pos < limit:
                r = fmt.scan(view, pos, limit, check_crc=False)
                if not isinstance(r, fmt.RecordInfo):
                    break
                if sink == "infos":
                    d(r, r.size)
                elif n in cuts and pos > run_start:
                    run(view, run_start, pos)
                    run_start = pos
                pos += r.size
                n += 1
            if sink != "infos" and pos > run_start:
                run(view, run_start, pos)
        index.join_flushers()
        state = (queues.logics_msg_timestamp, [(f.path.name, f.header()) for f in index.files])
    return Outcome(files_of(out), [], state)


@settings(PROPERTY, max_examples=50)
@given(
    msgs=st.lists(messages, min_size=1, max_size=80),
    cuts=st.lists(st.integers(0, 80), max_size=4),
    sink=st.sampled_from(["runs", "plain"]),
    batch=st.sampled_from([1, 2, 5, 32]),
    slots=st.sampled_from([1, 5, 64]),
    entries=st.sampled_from([3, 6, 200]),
)
def test_recovery_runs_dispatch_as_record_after_record(
    tmp_path_factory: Any, msgs: list[Message], cuts: list[int], sink: str, batch: int,
    slots: int, entries: int,
) -> None:  # fmt: skip
    root = tmp_path_factory.mktemp("log")
    log = write_log(root / "store", msgs, [1_700_000_000_000, 1_700_000_002_000])
    kw = {"cuts": cuts, "batch": batch, "slots": slots, "entries": entries}
    one = redispatch(log, root / "one", sink="infos", **kw)
    many = redispatch(log, root / "many", sink=sink, **kw)
    assert many.state == one.state
    assert many.files.keys() == one.files.keys()
    for name, data in one.files.items():
        assert many.files[name] == data, name


def test_recovery_batches_stop_at_text_that_is_not_ascii(tmp_path: Path) -> None:
    """Non-ASCII tags and keys between plain records: ``dispatch_plain`` takes them
    record by record, the batches around them as batches, and writes the same bytes."""
    plain = [Message(topic="T", body=b"b", tags="a", keys=[f"k{i}"]) for i in range(40)]
    wide = [Message(topic="T", body=b"w", tags="Tä", keys=["ключ"]),
            Message(topic="T", body=b"v6", tags="a", born_host=("::1", 7))]  # fmt: skip
    log = write_log(tmp_path / "store", [*plain, *wide, *plain], [1_700_000_000_000])
    kw = {"cuts": [], "batch": 32, "slots": 64, "entries": 200}
    one = redispatch(log, tmp_path / "one", sink="infos", **kw)
    many = redispatch(log, tmp_path / "many", sink="plain", **kw)
    assert many.state == one.state
    assert many.files == one.files
