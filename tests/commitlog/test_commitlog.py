"""CommitLog appends: blank record and roll, batches, queue offsets, raw appends, reads."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from mqstore.commitlog import format as fmt
from mqstore.commitlog.commitlog import FRAME_TOTAL, CommitLog, Frame, make_frame, queue_key
from mqstore.commitlog.segments import Segments
from mqstore.message import host_bytes

SIZE = 4096
STORE_HOST = host_bytes(("127.0.0.1", 10911))
BORN = host_bytes(("127.0.0.1", 1))
PROPS = b"TAGS\x01A\x02"


def encoded(
    topic: str = "t",
    body: bytes = b"b" * 100,
    queue_id: int = 0,
    sys_flag: int = 0,
    flag: object = 0,
    born_timestamp: int | None = 1,
    store_host: bytes = STORE_HOST,
) -> Frame:
    head, magic = fmt.topic_field(topic.encode())
    tail = head + len(PROPS).to_bytes(2, "big") + PROPS
    store_flag = fmt.STOREHOST_V6_FLAG if len(store_host) == fmt.IPV6_HOST_LEN else 0
    total = fmt.record_length(sys_flag | store_flag, 1, len(body), len(topic), len(PROPS))
    tx = sys_flag & fmt.TRANSACTION_MASK
    prepared = tx in (fmt.TRANSACTION_PREPARED_TYPE, fmt.TRANSACTION_ROLLBACK_TYPE)
    key = None if prepared else queue_key(topic, queue_id)
    return make_frame(
        key=key, queue_id=queue_id, flag=flag, sys_flag=sys_flag,  # type: ignore[arg-type]
        born_timestamp=born_timestamp, born_host=BORN, reconsume_times=0,
        prepared_transaction_offset=0, body=body, crc=fmt.body_crc(body), tail=tail,
        magic=magic, total=total, uniq="U",
    )  # fmt: skip


def with_born_host(frame: Frame, born_host: bytes) -> Frame:
    return (*frame[:5], born_host, *frame[6:])  # type: ignore[return-value]


def one(log: CommitLog, frame: Frame) -> tuple[int, int, int]:
    """(physical offset, size, queue offset) of ``frame`` appended alone."""
    physs, qoffs, _ = log.append((frame,))
    return physs[0], frame[FRAME_TOTAL], qoffs[0]


@pytest.fixture
def log(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    cl = CommitLog(segs, STORE_HOST, clock=lambda: 1_700_000_000_000)
    yield cl
    segs.close()


def test_appended_record_decodes_with_its_offsets(log: CommitLog):
    phys, size, _ = one(log, encoded())
    r = log.decode_at(phys, check_crc=True)
    assert isinstance(r, fmt.Record)
    assert (r.record.physical_offset, r.record.queue_offset, r.size) == (0, 0, size)
    assert r.record.store_timestamp == 1_700_000_000_000


def test_queue_offsets_count_per_topic_queue(log: CommitLog):
    offs = [one(log, encoded(queue_id=q))[2] for q in (0, 1, 0, 0, 1)]
    assert offs == [0, 0, 1, 2, 1]


def test_prepared_transaction_record_takes_no_queue_offset(log: CommitLog):
    one(log, encoded())
    _, _, q = one(log, encoded(sys_flag=fmt.TRANSACTION_PREPARED_TYPE))
    assert q == 0
    assert one(log, encoded())[2] == 1


def test_record_that_does_not_fit_leaves_8_byte_blank_and_rolls(log: CommitLog):
    msg = encoded(body=b"x" * 1000)
    n = msg[FRAME_TOTAL]
    count = (SIZE - 8) // n
    for _ in range(count):
        one(log, msg)
    used = count * n
    phys, _, _ = one(log, msg)
    assert phys == SIZE
    first = log.segments.files[0]
    assert bytes(first.view[used : used + 8]) == fmt.encode_blank(SIZE - used)
    assert bytes(first.view[used + 8 : SIZE]) == bytes(SIZE - used - 8)
    assert isinstance(fmt.decode(first.view, used), fmt.EndOfSegment)


def test_exact_fit_leaving_eight_bytes_stays_in_segment(log: CommitLog):
    probe = encoded(body=b"")
    body_len = SIZE - 8 - probe[FRAME_TOTAL]
    phys, size, _ = one(log, encoded(body=b"z" * body_len))
    assert (phys, size) == (0, SIZE - 8)
    assert one(log, encoded())[0] == SIZE


def test_batch_is_never_split_across_segments(log: CommitLog):
    one(log, encoded(body=b"x" * 3000))
    batch = [encoded(body=b"y" * 300) for _ in range(4)]
    physs, qoffs, _ = log.append(batch)
    assert physs[0] == SIZE
    assert qoffs == [1, 2, 3, 4]
    assert all(SIZE <= p < 2 * SIZE for p in physs)


def test_batch_over_several_queues_numbers_each_queue_and_skips_prepared(log: CommitLog):
    one(log, encoded(queue_id=0))
    prepared = encoded(queue_id=0, sys_flag=fmt.TRANSACTION_PREPARED_TYPE)
    batch = [encoded(queue_id=0), encoded(queue_id=1), prepared, encoded(queue_id=0)]
    assert log.append(batch)[1] == [1, 0, 0, 2]
    assert (one(log, encoded(queue_id=0))[2], one(log, encoded(queue_id=1))[2]) == (3, 1)


def test_batch_and_single_appends_share_one_numbering_per_queue(log: CommitLog):
    log.append([encoded(queue_id=2)] * 3)
    assert one(log, encoded(queue_id=2))[2] == 3
    assert log.append([encoded(queue_id=2)] * 2)[1] == [4, 5]


@pytest.mark.parametrize("store_host", [bytes(8), bytes(range(20))], ids=["ipv4", "ipv6"])
def test_a_batch_is_written_as_the_reference_encoder_writes_its_records(tmp_path, store_host):
    segs = Segments(tmp_path, SIZE)
    log = CommitLog(segs, store_host, clock=lambda: 999)
    try:
        one(log, encoded(store_host=store_host))
        v6 = host_bytes(("::1", 7))
        batch = [
            encoded(queue_id=3, body=b"a" * 5, born_timestamp=None, store_host=store_host),
            with_born_host(encoded(queue_id=3, flag=-7, born_timestamp=500,
                                   store_host=store_host, sys_flag=fmt.BORNHOST_V6_FLAG), v6),
            encoded(queue_id=4, sys_flag=fmt.TRANSACTION_PREPARED_TYPE, store_host=store_host),
        ]  # fmt: skip
        physs, qoffs, ts = log.append(batch)
        store_flag = fmt.STOREHOST_V6_FLAG if len(store_host) == 20 else 0
        want = [
            fmt.encode_raw(
                queue_id=qid, flag=flag, queue_offset=q, physical_offset=p,
                sys_flag=sys_flag | store_flag,
                born_timestamp=ts if born_ts is None else born_ts, born_host=born,
                store_timestamp=ts, store_host=store_host, reconsume_times=0,
                prepared_transaction_offset=0, body=body, crc=crc, topic=b"t",
                properties=PROPS,
            )
            for (_k, qid, flag, sys_flag, born_ts, born, _r, _p, body, crc, *_), p, q in zip(
                batch, physs, qoffs, strict=True
            )
        ]  # fmt: skip
        assert qoffs == [0, 1, 0]
        assert b"".join(want) == log.read(physs[0], sum(map(len, want)))
        assert physs == [physs[0], physs[0] + len(want[0]), physs[1] + len(want[1])]
    finally:
        segs.close()


def test_a_batch_with_a_field_that_does_not_pack_writes_nothing(log: CommitLog):
    one(log, encoded(queue_id=1))
    end = log.max_offset
    with pytest.raises(struct.error):  # a float flag: the second header cannot pack
        log.append([encoded(queue_id=1), encoded(queue_id=1, flag=0.5), encoded(queue_id=1)])
    assert log.max_offset == end
    assert log.read(end, 8) is None
    assert one(log, encoded(queue_id=1))[2] == 1  # the queue offsets did not move


def test_read_returns_none_past_written_data(log: CommitLog):
    phys, size, _ = one(log, encoded())
    assert log.read(phys, size) is not None
    assert log.read(phys, size + 1) is None
    assert log.read(10 * SIZE, 4) is None


def test_append_raw_at_requires_the_log_end(log: CommitLog):
    phys, size, _ = one(log, encoded())
    raw = log.read(phys, size)
    assert raw is not None
    with pytest.raises(ValueError, match="ends at"):
        log.append_raw_at(phys, raw)
    log.append_raw_at(size, raw)
    assert log.max_offset == 2 * size


def test_append_raw_at_refuses_segment_crossing(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    cl = CommitLog(segs, STORE_HOST)
    with pytest.raises(ValueError, match="cross"):
        cl.append_raw_at(0, b"x" * (SIZE + 10))
    segs.close()


def test_empty_log_accepts_raw_bytes_at_a_segment_boundary(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    cl = CommitLog(segs, STORE_HOST)
    cl.append_raw_at(3 * SIZE, b"x" * 20)
    assert (cl.min_offset, cl.max_offset) == (3 * SIZE, 3 * SIZE + 20)
    segs.close()


def test_empty_log_refuses_raw_bytes_inside_a_segment(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    cl = CommitLog(segs, STORE_HOST)
    with pytest.raises(ValueError, match="boundary"):
        cl.append_raw_at(3 * SIZE + 16, b"x" * 20)
    segs.close()
