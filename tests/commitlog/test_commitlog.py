"""CommitLog appends: blank record and roll, batches, queue offsets, raw appends, reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.commitlog import format as fmt
from mqstore.commitlog.commitlog import CommitLog, EncodedMessage, queue_key
from mqstore.commitlog.segments import Segments
from mqstore.message import host_bytes

SIZE = 4096
STORE_HOST = host_bytes(("127.0.0.1", 10911))


def encoded(
    topic: str = "t", body: bytes = b"b" * 100, queue_id: int = 0, sys_flag: int = 0
) -> EncodedMessage:
    tail, version = fmt.RecordEncoder.tail(topic.encode(), b"TAGS\x01A\x02")
    total = fmt.RecordEncoder(STORE_HOST).size(sys_flag, len(body), len(tail))
    return EncodedMessage(
        queue_key(topic, queue_id),
        queue_id,
        0,
        sys_flag,
        1,
        host_bytes(("127.0.0.1", 1)),
        0,
        0,
        body,
        fmt.body_crc(body),
        tail,
        version,
        total,
    )


@pytest.fixture
def log(tmp_path: Path):
    segs = Segments(tmp_path, SIZE)
    cl = CommitLog(segs, STORE_HOST, clock=lambda: 1_700_000_000_000)
    yield cl
    segs.close()


def test_appended_record_decodes_with_its_offsets(log: CommitLog):
    phys, size, _ = log.append(encoded())
    r = log.decode_at(phys, check_crc=True)
    assert isinstance(r, fmt.Record)
    assert (r.record.physical_offset, r.record.queue_offset, r.size) == (0, 0, size)
    assert r.record.store_timestamp == 1_700_000_000_000


def test_queue_offsets_count_per_topic_queue(log: CommitLog):
    offs = [log.append(encoded(queue_id=q))[2] for q in (0, 1, 0, 0, 1)]
    assert offs == [0, 0, 1, 2, 1]


def test_prepared_transaction_record_takes_no_queue_offset(log: CommitLog):
    log.append(encoded())
    _, _, q = log.append(encoded(sys_flag=fmt.TRANSACTION_PREPARED_TYPE))
    assert q == 0
    assert log.append(encoded())[2] == 1


def test_record_that_does_not_fit_leaves_8_byte_blank_and_rolls(log: CommitLog):
    msg = encoded(body=b"x" * 1000)
    n = msg.total
    count = (SIZE - 8) // n
    for _ in range(count):
        log.append(msg)
    used = count * n
    phys, _, _ = log.append(msg)
    assert phys == SIZE
    first = log.segments.files[0]
    assert bytes(first.view[used : used + 8]) == fmt.encode_blank(SIZE - used)
    assert bytes(first.view[used + 8 : SIZE]) == bytes(SIZE - used - 8)
    assert isinstance(fmt.decode(first.view, used), fmt.EndOfSegment)


def test_exact_fit_leaving_eight_bytes_stays_in_segment(log: CommitLog):
    probe = encoded(body=b"")
    body_len = SIZE - 8 - probe.total
    phys, size, _ = log.append(encoded(body=b"z" * body_len))
    assert (phys, size) == (0, SIZE - 8)
    assert log.append(encoded())[0] == SIZE


def test_batch_is_never_split_across_segments(log: CommitLog):
    log.append(encoded(body=b"x" * 3000))
    batch = [encoded(body=b"y" * 300) for _ in range(4)]
    r = log.append_batch(batch)
    assert r.physical_offsets[0] == SIZE
    assert list(r.queue_offsets) == [1, 2, 3, 4]
    assert all(SIZE <= p < 2 * SIZE for p in r.physical_offsets)


def test_batch_over_several_queues_numbers_each_queue_and_skips_prepared(log: CommitLog):
    log.append(encoded(queue_id=0))
    prepared = encoded(queue_id=0, sys_flag=fmt.TRANSACTION_PREPARED_TYPE)
    batch = [encoded(queue_id=0), encoded(queue_id=1), prepared, encoded(queue_id=0)]
    r = log.append_batch(batch)
    assert list(r.queue_offsets) == [1, 0, 0, 2]
    assert (log.append(encoded(queue_id=0))[2], log.append(encoded(queue_id=1))[2]) == (3, 1)


def test_batch_and_single_appends_share_one_numbering_per_queue(log: CommitLog):
    log.append_batch([encoded(queue_id=2)] * 3)
    assert log.append(encoded(queue_id=2))[2] == 3
    assert list(log.append_batch([encoded(queue_id=2)] * 2).queue_offsets) == [4, 5]


def test_read_returns_none_past_written_data(log: CommitLog):
    phys, size, _ = log.append(encoded())
    assert log.read(phys, size) is not None
    assert log.read(phys, size + 1) is None
    assert log.read(10 * SIZE, 4) is None


def test_append_raw_at_requires_the_log_end(log: CommitLog):
    phys, size, _ = log.append(encoded())
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
