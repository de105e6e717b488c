"""docs/format.md §6, byte for byte: the CQ unit and the index slot/entry positions.

The 209-byte record of the worked example is appended raw at offset 0 of a store with
RocketMQ's default sizes (6,000,000-byte queue files, 5,000,000 slots and 20,000,000
entries per index file: 420,000,040 bytes, created sparse); the dispatcher writes the
files and the test reads them back with plain file reads.

Verdict: 12.1 HOLDS. The CQ unit is ``00..00 | 00 00 00 d1 | 00 00 00 00 00 27 a8 07``;
``TopicTest#KEY1`` goes to slot 1969516 at byte 7,878,104, and a key put first into an
empty file is entry 1 at byte 20,000,060. One precision the example leaves implicit:
a dispatched message indexes ``topic#UNIQ_KEY`` *before* its KEYS (docs/format.md §4.5),
so in a store KEY1 is entry 2 (byte 20,000,080) and its slot holds 2.
"""

from __future__ import annotations

from pathlib import Path

from mqstore import MessageStore, StoreConfig
from mqstore.consumequeue.format import BLANK_UNIT, FILE_SIZE
from mqstore.index import format as ifmt
from mqstore.index.file import IndexFile
from mqstore.message import java_string_hash

# docs/format.md §6 hexdump
EXAMPLE = bytes.fromhex(
    """
00 00 00 d1 da a3 20 a7 69 c8 65 ed 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 01 8b cf e5 68 00 7f 00 00 01 00 00 d4 31 00 00 01 8b cf e5 68 7b
7f 00 00 01 00 00 2a 9f 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 0e 48 65 6c 6c 6f 20 52 6f
63 6b 65 74 4d 51 09 54 6f 70 69 63 54 65 73 74 00 5f 55 4e 49 51 5f 4b 45 59 01 37 46 30 30 30
30 30 31 30 30 30 30 32 41 39 46 30 30 30 30 30 30 30 30 30 30 30 30 30 30 30 30 02 43 4c 55 53
54 45 52 01 44 65 66 61 75 6c 74 43 6c 75 73 74 65 72 02 54 41 47 53 01 54 61 67 41 02 4b 45 59
53 01 4b 45 59 31 02 57 41 49 54 01 74 72 75 65 02
"""
)
CQ_UNIT = bytes.fromhex("0000000000000000000000d1000000000027a807")
UNIQ_KEY = "7F00000100002A9F0000000000000000"
STORE_TS = 1_700_000_000_123
SLOTS, ENTRIES = 5_000_000, 20_000_000


def read_at(path: Path, pos: int, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(pos)
        return f.read(n)


def test_spec_numbers():
    assert len(EXAMPLE) == 209
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("TopicTest#KEY1") == -1656969516
    assert ifmt.key_hash("TopicTest#KEY1") == 1656969516
    assert ifmt.key_hash("TopicTest#KEY1") % SLOTS == 1969516
    assert ifmt.slot_position(1969516) == 7_878_104
    assert ifmt.entry_position(SLOTS, 1) == 20_000_060
    assert ifmt.file_size(SLOTS, ENTRIES) == 420_000_040
    assert BLANK_UNIT.hex() == "00000000000000007fffffff0000000000000000"


def test_dispatched_example_writes_the_spec_cq_unit_and_index_entries(tmp_path: Path):
    cfg = StoreConfig(root_dir=tmp_path / "s", commitlog_file_size=1 << 20)
    assert cfg.consume_queue_file_size == FILE_SIZE == 6_000_000
    with MessageStore.open(cfg) as s:
        s.commitlog.append_raw_at(0, EXAMPLE)
        assert s.wait_dispatched(60)
        assert s.max_offset_in_queue("TopicTest", 0) == 1
        (m,) = s.get_message("g", "TopicTest", 0, 0, 1, "TagA").messages
        assert (m.body, m.store_timestamp, m.msg_id) == (b"Hello RocketMQ", STORE_TS, UNIQ_KEY)
        assert [x.physical_offset for x in s.query_by_key("TopicTest", "KEY1").messages] == [0]
    cq_file = tmp_path / "s" / "consumequeue" / "TopicTest" / "0" / f"{0:020d}"
    assert cq_file.stat().st_size == 6_000_000
    assert read_at(cq_file, 0, 40) == CQ_UNIT + bytes(20)

    (index_file,) = (tmp_path / "s" / "index").iterdir()
    assert len(index_file.name) == 17 and index_file.stat().st_size == 420_000_040
    header = ifmt.Header(*ifmt.HEADER.unpack(read_at(index_file, 0, 40)))
    assert header == ifmt.Header(STORE_TS, STORE_TS, 0, 0, 2, 3)
    # entry 1: TopicTest#UNIQ_KEY (indexed first), entry 2: TopicTest#KEY1
    uniq_hash = ifmt.key_hash("TopicTest#" + UNIQ_KEY)
    assert read_at(index_file, 20_000_060, 20) == ifmt.ENTRY.pack(uniq_hash, 0, 0, 0)
    assert read_at(index_file, ifmt.slot_position(uniq_hash % SLOTS), 4) == (1).to_bytes(4, "big")
    assert read_at(index_file, 20_000_080, 20) == ifmt.ENTRY.pack(1656969516, 0, 0, 0)
    assert read_at(index_file, 7_878_104, 4) == (2).to_bytes(4, "big")


def test_a_key_put_first_is_entry_1_at_the_spec_position(tmp_path: Path):
    f = IndexFile(tmp_path / "20231114221320123", SLOTS, ENTRIES, create=True)
    assert f.put_key("TopicTest#KEY1", 0, STORE_TS)
    f.flush()
    f.close()
    path = tmp_path / "20231114221320123"
    assert read_at(path, 7_878_104, 4) == (1).to_bytes(4, "big")
    entry = read_at(path, 20_000_060, 20)
    assert entry.hex() == "62c3592c00000000000000000000000000000000"
    assert ifmt.Entry(*ifmt.ENTRY.unpack(entry)) == ifmt.Entry(1656969516, 0, 0, 0)
    assert read_at(path, 0, 40) == ifmt.HEADER.pack(STORE_TS, STORE_TS, 0, 0, 1, 2)
