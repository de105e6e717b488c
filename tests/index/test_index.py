"""IndexFile and IndexService: RocketMQ's putKey/selectPhyOffset rules, rolling, queries."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from mqstore import Message, MessageStore, StoreConfig
from mqstore.index import format as ifmt
from mqstore.index.file import IndexFile
from mqstore.index.service import IndexService
from mqstore.message import java_string_hash

LONG_MAX = (1 << 63) - 1


def new_file(
    tmp_path: Path, slots: int = 100, entries: int = 400, name: str = "20240101000000000"
) -> IndexFile:
    return IndexFile(tmp_path / name, slots, entries, create=True)


def test_a_file_of_400_entries_takes_399_keys(tmp_path: Path):
    f = new_file(tmp_path)
    assert all(f.put_key(f"T#k{i}", i * 100, 1000 + i) for i in range(399))
    assert f.is_full
    assert not f.put_key("T#one-more", 99_999, 5000)
    assert f.index_count == 400


def test_header_tracks_begin_end_and_counts(tmp_path: Path):
    f = new_file(tmp_path)
    f.put_key("T#a", 100, 5000)
    f.put_key("T#b", 200, 6000)
    f.put_key("T#a", 300, 7000)  # same slot as the first: no new slot in use
    assert f.header() == ifmt.Header(5000, 7000, 100, 300, 2, 4)
    f.flush()
    f.close()
    again = IndexFile(tmp_path / "20240101000000000", 100, 400, create=False)
    assert again.header() == ifmt.Header(5000, 7000, 100, 300, 2, 4)


def test_time_diff_is_seconds_since_begin_and_the_first_entry_gets_zero(tmp_path: Path):
    f = new_file(tmp_path)
    f.put_key("T#a", 0, 1_700_000_000_500)
    f.put_key("T#b", 1, 1_700_000_002_499)
    entries = f.entries()
    assert [e.time_diff for e in entries] == [0, 1]  # 1999 ms -> 1 s (truncated)


def test_lookup_walks_the_chain_newest_first(tmp_path: Path):
    f = new_file(tmp_path)
    for i in range(5):
        f.put_key("T#key", i * 10, 1000)
        f.put_key(f"T#other{i}", i * 10 + 1, 1000)
    assert f.select_phy_offsets("T#key", 10, 0, LONG_MAX) == [40, 30, 20, 10, 0]
    assert f.select_phy_offsets("T#key", 2, 0, LONG_MAX) == [40, 30]
    assert f.select_phy_offsets("T#missing", 10, 0, LONG_MAX) == []


def test_colliding_keys_are_both_returned_by_the_file(tmp_path: Path):
    assert java_string_hash("T#Aa") == java_string_hash("T#BB")
    f = new_file(tmp_path)
    f.put_key("T#Aa", 1, 1000)
    f.put_key("T#BB", 2, 1000)
    assert f.select_phy_offsets("T#Aa", 10, 0, LONG_MAX) == [2, 1]  # hashes only


def test_time_range_of_a_lookup(tmp_path: Path):
    f = new_file(tmp_path)
    f.put_key("T#k", 1, 10_000)
    f.put_key("T#k", 2, 20_000)
    f.put_key("T#k", 3, 30_000)
    assert f.select_phy_offsets("T#k", 10, 15_000, 25_000) == [2]
    assert f.select_phy_offsets("T#k", 10, 0, 9_999) == []


def test_min_value_hash_maps_to_zero():
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert ifmt.key_hash("polygenelubricants") == 0


def test_slot_of_a_colliding_chain_survives_an_invalid_slot_value(tmp_path: Path):
    f = new_file(tmp_path, slots=1)  # every key in one slot
    f.put_key("T#a", 1, 1000)
    f.put_key("T#b", 2, 1000)
    assert f.select_phy_offsets("T#a", 10, 0, LONG_MAX) == [1]
    assert f.select_phy_offsets("T#b", 10, 0, LONG_MAX) == [2]


# -------------------------------------------------------------------- service


def service(tmp_path: Path, entries: int = 5, **kw) -> IndexService:
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000, 7))
    svc = IndexService(tmp_path / "index", 16, entries, clock=lambda: next(clock), **kw)
    svc.load(last_exit_ok=True, index_msg_timestamp=0)
    return svc


def test_service_indexes_uniq_key_then_keys_and_rolls_full_files(tmp_path: Path):
    full: list[int] = []
    svc = service(tmp_path, on_file_full=full.append)
    for i in range(6):  # 2 keys per message, 4 per file
        svc.build("T", i * 100, 1000 + i, f"U{i}", [f"k{i}", ""])
    svc.join_flushers()
    assert len(svc.files) == 3
    second = svc.files[1]
    assert (second.begin_phy_offset, second.begin_timestamp) == (200, 1002)
    assert full == [1001, 1003]
    assert svc.query("T", "k0", 10, 0, LONG_MAX).phy_offsets == (0,)
    assert svc.query("T", "U5", 10, 0, LONG_MAX).phy_offsets == (500,)
    svc.close()


def test_service_skips_messages_already_indexed(tmp_path: Path):
    svc = service(tmp_path, entries=100)
    svc.build("T", 100, 1000, "U1", ["k1"])
    svc.build("T", 200, 1001, "U2", ["k2"])
    svc.build("T", 100, 1000, "U1", ["k1"])  # re-dispatch after a restart
    svc.build("T", 200, 1001, "U2", ["k2"])
    assert svc.files[0].index_count == 5
    svc.close()


def test_service_completes_a_message_cut_between_two_keys(tmp_path: Path):
    svc = service(tmp_path, entries=100)
    svc.build("T", 100, 1000, "U1", [])  # as if the crash came before k1
    svc.build("T", 100, 1000, "U1", ["k1"])
    assert svc.query("T", "k1", 10, 0, LONG_MAX).phy_offsets == (100,)
    assert svc.query("T", "U1", 10, 0, LONG_MAX).phy_offsets == (100,)
    svc.close()


def test_service_reload_and_crash_destroys_files_newer_than_the_checkpoint(tmp_path: Path):
    svc = service(tmp_path)
    for i in range(5):
        svc.build("T", i * 100, 1000 + i, None, [f"k{i}"])
    svc.flush()
    svc.close()
    again = IndexService(tmp_path / "index", 16, 5)
    assert again.load(last_exit_ok=True, index_msg_timestamp=0) is None
    assert len(again.files) == 2
    again.close()
    crashed = IndexService(tmp_path / "index", 16, 5)
    # the first file filled at time 1003; the second (from 1004) is newer
    assert crashed.load(last_exit_ok=False, index_msg_timestamp=1003) == 400
    assert len(crashed.files) == 1
    crashed.close()


def test_service_deletes_files_whose_messages_are_gone(tmp_path: Path):
    svc = service(tmp_path)
    for i in range(9):
        svc.build("T", i * 100, 1000 + i, None, [f"k{i}"])
    assert len(svc.files) == 3
    assert svc.delete_expired(350) == 1  # file 1 ends at 300
    assert svc.delete_expired(10_000) == 1  # the last file always stays
    assert len(svc.files) == 1
    svc.close()


# ------------------------------------------------------------------ the store


def open_store(tmp_path: Path) -> MessageStore:
    return MessageStore.open(StoreConfig(root_dir=tmp_path / "s", commitlog_file_size=1 << 16,
                                         max_hash_slot_num=8, max_index_num=32))  # fmt: skip


def test_query_by_key_filters_hash_collisions_by_the_real_key(tmp_path: Path):
    with open_store(tmp_path) as s:
        a = s.put_message(Message(topic="T", body=b"a", keys=["Aa"]))
        b = s.put_message(Message(topic="T", body=b"b", keys=["BB"]))
        s.put_message(Message(topic="U", body=b"c", keys=["Aa"]))
        assert s.wait_dispatched(60)
        assert s.index is not None
        raw = s.index.query("T", "Aa", 10, 0, LONG_MAX).phy_offsets
        assert set(raw) == {a.physical_offset, b.physical_offset}
        assert [m.body for m in s.query_by_key("T", "Aa").messages] == [b"a"]
        assert [m.body for m in s.query_by_key("T", "BB").messages] == [b"b"]


def test_query_by_uniq_key_and_by_each_key_token(tmp_path: Path):
    with open_store(tmp_path) as s:
        r = s.put_message(Message(topic="T", body=b"x", keys="one two"))
        assert s.wait_dispatched(60)
        for key in ("one", "two", r.uniq_key):
            assert [m.physical_offset for m in s.query_by_key("T", key).messages] == [
                r.physical_offset
            ]
        assert s.query_by_key("T", "three").messages == ()


def test_query_by_key_returns_newest_first_up_to_max_num_across_files(tmp_path: Path):
    with open_store(tmp_path) as s:
        puts = [s.put_message(Message(topic="T", body=b"%d" % i, keys=["same"])) for i in range(40)]
        assert s.wait_dispatched(60)
        assert s.index is not None and len(s.index.files) > 2
        got = s.query_by_key("T", "same", max_num=50)
        assert [m.physical_offset for m in got.messages] == [
            p.physical_offset for p in reversed(puts)
        ]
        assert len(s.query_by_key("T", "same", max_num=5).messages) == 5


def test_query_by_key_time_range(tmp_path: Path):
    with open_store(tmp_path) as s:
        r = s.put_message(Message(topic="T", body=b"x", keys=["k"]))
        assert s.wait_dispatched(60)
        ts = r.store_timestamp
        assert len(s.query_by_key("T", "k", begin=ts - 5000, end=ts + 5000).messages) == 1
        assert s.query_by_key("T", "k", begin=ts + 5000, end=ts + 9000).messages == ()


def test_index_disabled(tmp_path: Path):
    cfg = StoreConfig(
        root_dir=tmp_path / "s", commitlog_file_size=1 << 16, message_index_enable=False
    )
    with MessageStore.open(cfg) as s:
        s.put_message(Message(topic="T", body=b"x", keys=["k"]))
        assert s.wait_dispatched(60)
        assert s.query_by_key("T", "k").messages == ()
    assert not (tmp_path / "s" / "index").exists() or not any((tmp_path / "s" / "index").iterdir())


def test_empty_newest_index_file_left_by_a_crash_is_dropped_and_reindexed(tmp_path):
    from mqstore import Message, MessageStore, StoreConfig

    cfg = StoreConfig(
        root_dir=tmp_path, commitlog_file_size=1 << 20, max_hash_slot_num=64, max_index_num=200
    )
    s = MessageStore.open(cfg)
    for i in range(10):
        s.put_message(Message(topic="t", body=b"x", keys=[f"k{i}"]))
    assert s.wait_dispatched(timeout=60)
    s.abandon()
    (tmp_path / "index" / "99991231235959999").write_bytes(b"")
    with MessageStore.open(cfg) as s2:
        assert s2.wait_dispatched(timeout=60)
        assert [m.body for m in s2.query_by_key("t", "k3").messages] == [b"x"]
    assert not (tmp_path / "index" / "99991231235959999").exists()


@given(st.text(max_size=300) | st.text(st.characters(max_codepoint=127), max_size=5000))
def test_key_hash_is_abs_java_hash_code(key: str) -> None:
    h = java_string_hash(key)
    assert ifmt.key_hash(key) == (0 if h == -(1 << 31) else abs(h))


def test_put_hashes_writes_what_put_key_by_key_writes(tmp_path: Path) -> None:
    one = IndexFile(tmp_path / "a", 16, 30, create=True)
    many = IndexFile(tmp_path / "b", 16, 30, create=True)
    for i in range(12):  # three keys per message; the file fills mid-message
        keys = [f"T#k{i}", f"T#u{i}", f"T#k{i % 3}"]
        fitted = [one.put_key(k, i * 100, 1_700_000_000_000 + i * 700) for k in keys]
        n = many.put_hashes([ifmt.key_hash(k) for k in keys], i * 100, 1_700_000_000_000 + i * 700)
        assert n == sum(fitted)
    one.flush()
    many.flush()
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
