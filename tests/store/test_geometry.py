"""Store geometry from the store itself (``mqstore.geometry``), else broker.conf, else flags.

On a copy of the store RocketMQ 4.9.8 wrote (1 MiB segments, 6,000-byte consume-queue
files, 500 x 2,000 index files) and on stores the project writes at small sizes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore import Message, MessageStore, StoreConfig
from mqstore import geometry as geo
from mqstore.config import size_given
from mqstore.errors import GeometryError
from mqstore.index import format as ifmt
from tests.rmq498 import copy_store, manifest


@pytest.fixture
def rmq_store(tmp_path: Path) -> Path:
    """A writable copy of the 4.9.8 store."""
    return copy_store(tmp_path / "rmq")


def _small_store(root: Path, count: int, **sizes: int) -> StoreConfig:
    cfg = StoreConfig(root_dir=root, **sizes)
    with MessageStore.open(cfg) as s:
        for i in range(count):
            r = s.put_message(
                Message(f"T{i % 2}", b"x" * 200, tags="A", keys=f"k{i}", queue_id=i % 2)
            )
            assert r.status.stored
        assert s.wait_dispatched(60)
    return cfg


SMALL = {
    "commitlog_file_size": 64 * 1024,
    "mapped_file_size_consume_queue": 20 * 50,
    "max_hash_slot_num": 37,
    "max_index_num": 120,
}


def test_the_fixture_shows_all_four_sizes(rmq_store: Path):
    g = geo.resolve(rmq_store)
    assert {n: s.value for n, s in g.settings().items()} == {
        "commitlog_file_size": 1_048_576,
        "mapped_file_size_consume_queue": 6_000,
        "max_hash_slot_num": 500,
        "max_index_num": 2_000,
    }
    assert {s.source for s in g.settings().values()} == {geo.Source.FILES}
    assert "6000 bytes (files)" in g.describe()


def test_a_store_written_with_small_sizes_shows_them(tmp_path: Path):
    _small_store(tmp_path / "s", 400, **SMALL)
    found = geo.detect(tmp_path / "s")
    assert {n: v for n, (v, _) in found.items()} == SMALL


def test_open_with_no_size_given_reads_every_message_of_the_fixture(rmq_store: Path):
    cfg = StoreConfig(root_dir=rmq_store)
    assert not size_given(cfg.commitlog_file_size)
    with MessageStore.open(cfg) as s:
        assert (s.cfg.commitlog_file_size, s.cfg.mapped_file_size_consume_queue) == (1 << 20, 6000)
        assert (s.cfg.max_hash_slot_num, s.cfg.max_index_num) == (500, 2000)
        for p in manifest():
            (m,) = s.get_message("g", p.topic, p.queue_id, p.queue_offset, 1).messages
            got = (m.physical_offset, m.tags, m.keys, m.uniq_key, m.body)
            assert got == (p.physical_offset, p.tag, [p.key], p.uniq_key, p.body)


def test_open_refuses_a_store_whose_index_files_do_not_show_their_size(tmp_path: Path):
    cfg = _small_store(tmp_path / "s", 10, **{**SMALL, "max_index_num": 4000})
    for f in (tmp_path / "s" / "index").iterdir():  # entries gone: only the size is left
        f.write_bytes(ifmt.HEADER.pack(0, 0, 0, 0, 0, 1) + bytes(f.stat().st_size - 40))
    with pytest.raises(GeometryError, match="give max_hash_slot_num and max_index_num"):
        MessageStore.open(StoreConfig(root_dir=cfg.root_dir))


def test_given_sizes_are_kept_and_the_rest_come_from_the_files(rmq_store: Path):
    opened, g = geo.for_open(StoreConfig(root_dir=rmq_store, max_index_num=2000))
    assert g.max_index_num.source is geo.Source.FLAGS
    assert g.max_hash_slot_num.source is geo.Source.FILES
    assert opened.commitlog_file_size == 1_048_576


def test_broker_config_that_agrees_is_accepted_and_one_that_disagrees_is_refused(
    rmq_store: Path, tmp_path: Path
):
    good = tmp_path / "good.conf"
    good.write_text("brokerName=b\nmappedFileSizeCommitLog = 1048576\nmaxIndexNum: 2000\n")
    assert geo.resolve(rmq_store, broker_config=good).commitlog_file_size.value == 1_048_576
    bad = tmp_path / "bad.conf"
    bad.write_text(
        "# a broker with RocketMQ's default queues\nmappedFileSizeConsumeQueue=6000000\n"
    )
    with pytest.raises(GeometryError, match="mapped_file_size_consume_queue"):
        geo.resolve(rmq_store, broker_config=bad)


def test_broker_config_gives_sizes_the_files_do_not_show(tmp_path: Path):
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=2097152\nmaxHashSlotNum=10\nmaxIndexNum=40\n")
    g = geo.resolve(tmp_path / "empty", broker_config=conf, flags={"max_index_num": 40})
    assert g.commitlog_file_size == geo.Setting(2_097_152, geo.Source.BROKER_CONFIG, str(conf))
    assert g.max_index_num.source is geo.Source.BROKER_CONFIG
    assert g.mapped_file_size_consume_queue.source is geo.Source.DEFAULT


def test_flags_that_contradict_the_files_are_refused(rmq_store: Path):
    with pytest.raises(GeometryError, match="1048576 from the files"):
        geo.resolve(rmq_store, flags={"commitlog_file_size": 1 << 30})


def test_a_lone_truncated_segment_is_not_taken_for_the_segment_size(tmp_path: Path):
    _small_store(tmp_path / "s", 50, **SMALL)
    seg = tmp_path / "s" / "commitlog" / f"{0:020d}"
    seg.write_bytes(seg.read_bytes()[:1000])
    with pytest.raises(GeometryError, match="cannot be taken as the segment size"):
        geo.detect(tmp_path / "s")


def test_queue_files_of_different_sizes_are_refused(tmp_path: Path):
    _small_store(tmp_path / "s", 50, **SMALL)
    f = tmp_path / "s" / "consumequeue" / "T0" / "0" / f"{0:020d}"
    f.write_bytes(f.read_bytes() + bytes(20))
    with pytest.raises(GeometryError, match="different file sizes"):
        geo.detect(tmp_path / "s")


def test_empty_index_files_of_an_unknown_size_are_refused_not_guessed(tmp_path: Path):
    root = tmp_path / "s"
    (root / "index").mkdir(parents=True)
    header = ifmt.HEADER.pack(0, 0, 0, 0, 0, 1)
    (root / "index" / "20261124162149462").write_bytes(header + bytes(ifmt.file_size(7, 9) - 40))
    with pytest.raises(GeometryError, match="give max_hash_slot_num and max_index_num"):
        geo.for_open(StoreConfig(root_dir=root))
    opened, _ = geo.for_open(StoreConfig(root_dir=root, max_hash_slot_num=7, max_index_num=9))
    assert opened.max_index_num == 9


def test_a_new_store_takes_the_defaults(tmp_path: Path):
    opened, g = geo.for_open(StoreConfig(root_dir=tmp_path / "new"))
    assert opened.commitlog_file_size == 1 << 30
    assert g.commitlog_file_size.source is geo.Source.DEFAULT


def test_a_lone_index_file_not_yet_full_shows_its_split(tmp_path: Path):
    _small_store(tmp_path / "s", 30, **SMALL)  # 60 entries of 120: no full file to go by
    (index,) = (tmp_path / "s" / "index").iterdir()
    assert geo.index_geometry_of(index) == {(37, 120)}


def test_a_lone_segment_with_a_torn_tail_still_shows_its_size(tmp_path: Path):
    cfg = _small_store(tmp_path / "s", 50, **SMALL)
    with MessageStore.open(cfg) as s:
        end = s.max_physical_offset
    seg = tmp_path / "s" / "commitlog" / f"{0:020d}"
    data = bytearray(seg.read_bytes())
    data[end : end + 8] = b"\x7f\xff\xff\xf0\x11\x22\x33\x44"  # a torn, garbage header
    seg.write_bytes(bytes(data))
    (tmp_path / "s" / "abort").write_bytes(b"")  # as after the crash that tore it
    assert geo.detect(tmp_path / "s")["commitlog_file_size"][0] == 64 * 1024
    with MessageStore.open(StoreConfig(root_dir=tmp_path / "s")) as s:
        assert s.max_physical_offset == end  # recovery cut the torn tail
        assert s.max_offset_in_queue("T0", 0) == 25
