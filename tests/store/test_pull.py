"""get_message: every GetStatus and nextBeginOffset case, transfer limits, filtering, bodies.

The table (docs/store.md §3.1) in the order RocketMQ checks it; each test builds the
situation through the public API (or, for the two race windows, by deleting a file
the way cleanup would) and asserts status and ``next_begin_offset`` together.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore import BrokerRole, GetStatus, Message, MessageStore, StoreConfig
from mqstore.commitlog import format as fmt
from mqstore.compression import COMPRESSED_FLAG
from mqstore.message import java_string_hash

CQ_UNITS = 10


def config(tmp_path: Path, **kw) -> StoreConfig:
    kw.setdefault("commitlog_file_size", 64 * 1024)
    kw.setdefault("mapped_file_size_consume_queue", CQ_UNITS * 20)
    kw.setdefault("max_hash_slot_num", 64)
    kw.setdefault("max_index_num", 256)
    return StoreConfig(root_dir=tmp_path / "s", **kw)


def open_store(tmp_path: Path, **kw) -> MessageStore:
    return MessageStore.open(config(tmp_path, **kw))


def put_n(store: MessageStore, n: int, *, topic: str = "T", queue_id: int = 0, tags=None,
          body: bytes = b"x" * 100) -> list:  # fmt: skip
    out = []
    for i in range(n):
        tag = tags(i) if callable(tags) else tags
        out.append(
            store.put_message(
                Message(topic=topic, body=body + b"%d" % i, tags=tag, queue_id=queue_id)
            )
        )
    assert store.wait_dispatched(60)
    return out


def get(
    store: MessageStore,
    offset: int,
    count: int = 32,
    sub: str = "*",
    topic: str = "T",
    qid: int = 0,
):
    return store.get_message("g", topic, qid, offset, count, sub)


# ------------------------------------------------------------ the status table


def test_unknown_queue_is_no_matched_logic_queue_and_restarts_at_zero(tmp_path: Path):
    with open_store(tmp_path) as s:
        put_n(s, 3)
        g = get(s, 5, topic="Other")
        assert (g.status, g.next_begin_offset) == (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0)
        g = get(s, 5, qid=1)
        assert (g.status, g.next_begin_offset, g.min_offset, g.max_offset) == (
            GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)  # fmt: skip


def test_queue_without_units_is_no_message_in_queue(tmp_path: Path):
    with open_store(tmp_path) as s:
        s.queues.find_or_create("T", 0)  # a queue directory whose units were all cut
        g = get(s, 7)
        assert (g.status, g.next_begin_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0)


def test_offset_at_max_is_overflow_one_and_stays(tmp_path: Path):
    with open_store(tmp_path) as s:
        put_n(s, 3)
        g = get(s, 3)
        assert (g.status, g.next_begin_offset, g.max_offset) == (
            GetStatus.OFFSET_OVERFLOW_ONE,
            3,
            3,
        )
        assert g.messages == ()


def test_offset_past_max_is_overflow_badly_and_moves_to_max(tmp_path: Path):
    with open_store(tmp_path) as s:
        put_n(s, 3)
        g = get(s, 50)
        assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 3)


def test_offset_below_min_is_too_small_and_moves_to_min(tmp_path: Path):
    with open_store(tmp_path, commitlog_file_size=4096) as s:
        put_n(s, 60)  # ~16 records per 4 KiB file
        result = s.clean_expired_files(immediately=True)
        assert result.commitlog_files >= 1 and result.consume_queue_files >= 1
        low = s.min_offset_in_queue("T", 0)
        assert low > 0
        g = get(s, 0)
        assert (g.status, g.next_begin_offset, g.min_offset) == (
            GetStatus.OFFSET_TOO_SMALL,
            low,
            low,
        )
        g = get(s, low)
        assert g.status is GetStatus.FOUND and g.messages[0].queue_offset == low


def test_missing_queue_file_is_offset_found_null_and_rolls_to_the_next_file(tmp_path: Path):
    with open_store(tmp_path) as s:
        put_n(s, 25)
        cq = s.consume_queue("T", 0)
        assert cq is not None
        # The window between deleting a queue file and correcting the minimum.
        cq.segments.delete_expired(expired_before_ms=1 << 62, keep_last=1, max_delete=1)
        assert cq.min_offset == 0
        g = get(s, 3)
        assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_FOUND_NULL, CQ_UNITS)


def test_found_moves_past_the_messages_returned(tmp_path: Path):
    with open_store(tmp_path) as s:
        put_n(s, 8)
        g = get(s, 2, count=4)
        assert (g.status, g.next_begin_offset) == (GetStatus.FOUND, 6)
        assert [m.queue_offset for m in g.messages] == [2, 3, 4, 5]
        assert [m.body for m in g.messages] == [b"x" * 100 + b"%d" % i for i in range(2, 6)]


def test_scan_is_limited_to_the_queue_file_holding_the_offset(tmp_path: Path):
    with open_store(tmp_path) as s:
        put_n(s, 25)
        g = get(s, 7)
        assert (g.status, g.next_begin_offset, len(g.messages)) == (GetStatus.FOUND, CQ_UNITS, 3)


def test_nothing_matching_is_no_matched_message_past_every_unit_examined(tmp_path: Path):
    with open_store(tmp_path) as s:
        put_n(s, 25, tags="TagB")
        g = get(s, 2, sub="TagA")
        assert (g.status, g.next_begin_offset, g.messages) == (
            GetStatus.NO_MATCHED_MESSAGE,
            CQ_UNITS,
            (),
        )


def test_filtered_units_before_a_match_are_consumed(tmp_path: Path):
    with open_store(tmp_path) as s:
        put_n(s, 8, tags=lambda i: "TagA" if i in (3, 5) else "TagB")
        g = get(s, 0, count=1, sub="TagA")
        assert (g.status, g.next_begin_offset) == (GetStatus.FOUND, 4)
        g = get(s, 4, count=32, sub="TagA")
        assert [m.queue_offset for m in g.messages] == [5]
        assert g.next_begin_offset == 8


def test_max_filter_size_bounds_the_scan(tmp_path: Path):
    with open_store(
        tmp_path, mapped_file_size_consume_queue=2000 * 20, max_filter_message_size=100
    ) as s:
        put_n(s, 50, tags="TagB")
        g = get(s, 0, count=2, sub="TagA")
        # max(100, 2 * 20) bytes = 5 units past the offset are examined, the 6th breaks
        assert (g.status, g.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 6)


def test_removed_commitlog_data_is_message_was_removing_and_skips_its_file(tmp_path: Path):
    with open_store(tmp_path, commitlog_file_size=4096) as s:
        puts = put_n(s, 40)
        in_first = sum(p.physical_offset < 4096 for p in puts)
        assert in_first > CQ_UNITS
        # CommitLog cleanup ran, queue cleanup not yet.
        s.segments.delete_expired(expired_before_ms=1 << 62, keep_last=1, max_delete=1)
        g = get(s, 0)
        assert (g.status, g.next_begin_offset, g.messages) == (
            GetStatus.MESSAGE_WAS_REMOVING,
            CQ_UNITS,
            (),
        )
        g = get(s, CQ_UNITS)  # units pointing into the deleted file, then live ones
        assert g.status is GetStatus.FOUND
        assert g.messages[0].queue_offset == in_first


# -------------------------------------------------------------- transfer limits


def test_in_memory_pulls_stop_at_32_messages(tmp_path: Path):
    with open_store(tmp_path, mapped_file_size_consume_queue=1000 * 20) as s:
        put_n(s, 50)
        g = get(s, 0, count=100)
        assert (len(g.messages), g.next_begin_offset) == (32, 32)
        assert not g.suggest_pulling_from_slave


def test_on_disk_pulls_stop_at_8_messages(tmp_path: Path):
    with open_store(tmp_path, mapped_file_size_consume_queue=1000 * 20,
                    access_message_in_memory_max_ratio=0) as s:  # fmt: skip
        put_n(s, 50)
        g = get(s, 0, count=100)
        assert (len(g.messages), g.next_begin_offset) == (8, 8)
        assert g.suggest_pulling_from_slave


def test_byte_limits_stop_a_batch_but_never_an_empty_one(tmp_path: Path):
    with open_store(tmp_path, max_transfer_bytes_on_message_in_memory=1000) as s:
        size = put_n(s, 9)[0].size
        g = get(s, 0)
        assert len(g.messages) == 1000 // size
        tiny = MessageStore.get_message(s, "g", "T", 0, 0, 32, "*", max_bytes=1)
        assert len(tiny.messages) == 1  # the first message always fits


def test_request_byte_limit(tmp_path: Path):
    with open_store(tmp_path) as s:
        size = put_n(s, 9)[0].size
        g = s.get_message("g", "T", 0, 0, 32, "*", max_bytes=3 * size)
        assert len(g.messages) == 3 and g.next_begin_offset == 3


# ------------------------------------------------------------ filtering, bodies


def test_colliding_tag_is_returned_raw_but_filtered_from_decoded_pulls(tmp_path: Path):
    assert java_string_hash("Aa") == java_string_hash("BB")
    with open_store(tmp_path) as s:
        put_n(s, 6, tags=lambda i: ("Aa", "BB", "Cc")[i % 3])
        raw = s.get_message_raw("g", "T", 0, 0, 32, "Aa")
        assert raw.queue_offsets == (0, 1, 3, 4)  # the queue filter sees equal codes
        g = get(s, 0, sub="Aa")
        assert [m.queue_offset for m in g.messages] == [0, 3]
        assert {m.tags for m in g.messages} == {"Aa"}
        assert g.next_begin_offset == raw.next_begin_offset == 6


def test_only_bb_matching_exactly_is_no_matched_message(tmp_path: Path):
    with open_store(tmp_path) as s:
        put_n(s, 3, tags="BB")
        g = get(s, 0, sub="Aa")
        assert (g.status, g.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 3)


def test_or_subscription(tmp_path: Path):
    with open_store(tmp_path) as s:
        put_n(s, 6, tags=lambda i: f"Tag{i % 3}")
        g = get(s, 0, sub="Tag0 || Tag2")
        assert [m.queue_offset for m in g.messages] == [0, 2, 3, 5]


def test_compressed_bodies_come_back_decompressed_and_raw_stays_compressed(tmp_path: Path):
    body = b"compress me " * 1000
    with open_store(tmp_path) as s:
        s.put_message(Message(topic="T", body=body))
        assert s.wait_dispatched(60)
        (m,) = get(s, 0).messages
        assert m.body == body and not m.sys_flag & COMPRESSED_FLAG
        raw = s.get_message_raw("g", "T", 0, 0)
        rec = fmt.decode_all(raw.body())[0]
        assert rec.sys_flag & COMPRESSED_FLAG and len(rec.body) < len(body)
        assert rec.decompressed_body() == body


def test_raw_pull_is_the_stored_records_byte_for_byte(tmp_path: Path):
    with open_store(tmp_path) as s:
        puts = put_n(s, 4)
        raw = s.get_message_raw("g", "T", 0, 1, 2)
        assert raw.status is GetStatus.FOUND and raw.message_count == 2
        assert raw.buffer_total_size == puts[1].size + puts[2].size
        start = puts[1].physical_offset
        assert raw.body() == s.commitlog.read(start, raw.buffer_total_size)


def test_decoded_message_fields(tmp_path: Path):
    with open_store(tmp_path) as s:
        r = s.put_message(Message(topic="T", body=b"b", tags="TagA", keys=["k1", "k2"],
                                  properties={"color": "red"}, queue_id=2))  # fmt: skip
        assert s.wait_dispatched(60)
        (m,) = s.get_message("g", "T", 2, 0, 1, "TagA").messages
        assert (m.topic, m.queue_id, m.queue_offset, m.physical_offset) == (
            "T",
            2,
            0,
            r.physical_offset,
        )
        assert (m.tags, m.keys, m.uniq_key, m.msg_id) == (
            "TagA",
            ["k1", "k2"],
            r.uniq_key,
            r.msg_id,
        )
        assert m.properties["color"] == "red" and m.store_timestamp == r.store_timestamp
        assert m.store_host == ("127.0.0.1", 10911)


def test_pulls_on_a_closed_store_raise(tmp_path: Path):
    from mqstore import StoreClosedError

    s = open_store(tmp_path)
    s.close()
    with pytest.raises(StoreClosedError):
        get(s, 0)


# -------------------------------------------------------------- slave correction


def test_slave_without_offset_check_keeps_the_requested_offset(tmp_path: Path):
    with open_store(tmp_path) as s:
        put_n(s, 3)
    with MessageStore.open(config(tmp_path, broker_role=BrokerRole.SLAVE)) as slave:
        g = get(slave, 50)
        assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 50)
        g = get(slave, 5, topic="Other")
        assert (g.status, g.next_begin_offset) == (GetStatus.NO_MATCHED_LOGIC_QUEUE, 5)
    cfg = config(tmp_path, broker_role=BrokerRole.SLAVE, offset_check_in_slave=True)
    with MessageStore.open(cfg) as slave:
        assert get(slave, 50).next_begin_offset == 3


# ------------------------------------------------------------------ offsets API


def test_min_max_offsets_of_unknown_queues_are_zero(tmp_path: Path):
    with open_store(tmp_path) as s:
        assert (s.min_offset_in_queue("T", 0), s.max_offset_in_queue("T", 0)) == (0, 0)
        assert s.offset_by_time("T", 0, 123) == 0
        assert s.earliest_message_time("T", 0) == -1
        assert s.earliest_message_time() == -1


def test_offset_by_time_through_the_store(tmp_path: Path):
    import time

    def next_ms(after: int) -> None:
        deadline = time.monotonic() + 5
        while time.time_ns() // 1_000_000 <= after and time.monotonic() < deadline:
            pass

    with open_store(tmp_path) as s:
        stamps = []
        for i in range(5):
            stamps.append(s.put_message(Message(topic="T", body=b"m%d" % i)).store_timestamp)
            next_ms(stamps[-1])
        assert s.wait_dispatched(60)
        assert s.offset_by_time("T", 0, stamps[0] - 1000) == 0
        assert s.offset_by_time("T", 0, stamps[2]) == 2
        assert s.offset_by_time("T", 0, stamps[4] + 1000) == 5
        assert s.message_store_timestamp("T", 0, 3) == stamps[3]
        assert s.earliest_message_time("T", 0) == stamps[0] == s.earliest_message_time()


@pytest.mark.slow
def test_pull_benchmark_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from mqstore.tools.bench import pull as bench

    out = tmp_path / "bench.json"
    args = [
        "--messages",
        "2000",
        "--lag-rate",
        "2000",
        "--lag-seconds",
        "0.5",
        "--dir",
        str(tmp_path),
        "--json",
        str(out),
    ]
    assert bench.main(args) == 0
    printed = capsys.readouterr().out
    assert "pull_raw_8q" in printed and "dispatch lag" in printed
    assert out.exists()


# ------------------------------------------------------------ limits at their edges


def test_on_disk_byte_limit_stops_a_batch_before_the_count(tmp_path: Path):
    with open_store(tmp_path, mapped_file_size_consume_queue=1000 * 20,
                    access_message_in_memory_max_ratio=0) as s:  # fmt: skip
        size = put_n(s, 20)[0].size  # every record is "on disk": ratio 0
        g = MessageStore.get_message(s, "g", "T", 0, 0, 32, "*", max_bytes=3 * size + 1)
        assert (len(g.messages), g.next_begin_offset) == (3, 3)  # < the 8 on-disk count


def _limits_with_memory(memory_bytes: int):
    from mqstore.consumequeue.get import PullLimits

    return PullLimits(16000, 256 * 1024, 32, 64 * 1024, 8, memory_bytes)


def test_suggest_pulling_from_slave_turns_on_one_byte_past_the_memory_threshold(tmp_path: Path):
    from mqstore.consumequeue.filter import parse_subscription
    from mqstore.consumequeue.get import select

    with open_store(tmp_path, mapped_file_size_consume_queue=1000 * 20) as s:
        put_n(s, 5)
        cq = s.queues.find("T", 0)
        last = cq.unit_at(4)
        behind = s.segments.max_offset - last[0]  # bytes from the last pulled to the end
        sub = parse_subscription("*")
        at = select(cq, s.segments, 0, 32, sub, _limits_with_memory(behind), None)
        past = select(cq, s.segments, 0, 32, sub, _limits_with_memory(behind - 1), None)
        assert len(at.items) == len(past.items) == 5
        assert (at.suggest_pulling_from_slave, past.suggest_pulling_from_slave) == (False, True)


def test_a_pull_from_a_non_zero_offset_across_blank_units_returns_what_follows(tmp_path: Path):
    from mqstore.consumequeue.filter import parse_subscription
    from mqstore.consumequeue.get import select

    with open_store(tmp_path, mapped_file_size_consume_queue=1000 * 20) as s:
        put_n(s, 3)
        other = put_n(s, 1, queue_id=1)[0]
        cq = s.queues.find("T", 0)
        assert cq.put(other.physical_offset, other.size, 0, 8)  # units 3..7 are blank
        g = select(cq, s.segments, 1, 32, parse_subscription("*"),
                   _limits_with_memory(1 << 40), None)  # fmt: skip
        assert g.status is GetStatus.FOUND
        assert g.queue_offsets == [1, 2, 8]
        assert g.next_begin_offset == 9
