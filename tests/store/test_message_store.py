"""The public MessageStore API: puts, ids, queue offsets across reopen, compression, roles."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from mqstore import (
    BrokerRole,
    Message,
    MessageStore,
    PutStatus,
    StoreClosedError,
    StoreConfig,
)
from mqstore.commitlog import format as fmt
from mqstore.compression import COMPRESSED_FLAG, CompressionType, compression_type_of
from mqstore.message import decode_offset_msg_id


def open_store(root: Path, **kw) -> MessageStore:
    return MessageStore.open(StoreConfig(root_dir=root, commitlog_file_size=1 << 20, **kw))


def test_msg_id_encodes_store_host_and_physical_offset(tmp_path: Path):
    with open_store(tmp_path) as s:
        s.put_message(Message(topic="t", body=b"first"))
        r = s.put_message(Message(topic="t", body=b"second"))
    host, offset = decode_offset_msg_id(r.msg_id)
    assert host == ("127.0.0.1", 10911)
    assert offset == r.physical_offset


def test_stored_record_carries_tags_keys_uniq_key_and_user_properties(tmp_path: Path):
    with open_store(tmp_path) as s:
        r = s.put_message(
            Message(
                topic="t", body=b"b", tags="TagA", keys=["k1", "k2"], properties={"color": "red"}
            )
        )
        rec = s.look_message_by_offset(r.physical_offset)
    assert rec is not None
    assert rec.tags == "TagA"
    assert rec.keys == ["k1", "k2"]
    assert rec.uniq_key == r.uniq_key
    assert rec.properties["color"] == "red"


def test_properties_are_stored_in_java_hashmap_order(tmp_path: Path):
    with open_store(tmp_path) as s:
        r = s.put_message(Message(topic="t", body=b"b", tags="TagA", keys=["KEY1"]))
        rec = s.look_message_by_offset(r.physical_offset)
    assert rec is not None
    assert rec.properties_string == f"UNIQ_KEY\x01{r.uniq_key}\x02TAGS\x01TagA\x02KEYS\x01KEY1\x02"


def test_queue_offsets_continue_after_reopen(tmp_path: Path):
    with open_store(tmp_path) as s:
        for q in (0, 0, 1):
            s.put_message(Message(topic="t", body=b"x", queue_id=q))
    with open_store(tmp_path) as s:
        assert s.put_message(Message(topic="t", body=b"x", queue_id=0)).queue_offset == 2
        assert s.put_message(Message(topic="t", body=b"x", queue_id=1)).queue_offset == 1


def test_batch_put_assigns_consecutive_offsets(tmp_path: Path):
    with open_store(tmp_path) as s:
        rs = s.put_messages([Message(topic="t", body=f"{i}".encode()) for i in range(5)])
    assert [r.status for r in rs] == [PutStatus.PUT_OK] * 5
    assert [r.queue_offset for r in rs] == [0, 1, 2, 3, 4]
    assert all(b.physical_offset > a.physical_offset for a, b in itertools.pairwise(rs))


def test_large_body_is_lz4_compressed_and_reads_back(tmp_path: Path):
    body = b"compressible " * 1000
    with open_store(tmp_path) as s:
        r = s.put_message(Message(topic="t", body=body))
        rec = s.look_message_by_offset(r.physical_offset)
    assert rec is not None
    assert rec.sys_flag & COMPRESSED_FLAG
    assert compression_type_of(rec.sys_flag) is CompressionType.LZ4
    assert len(rec.body) < len(body)
    assert rec.decompressed_body() == body


def test_zlib_compression_when_configured(tmp_path: Path):
    body = b"z" * 5000
    with open_store(tmp_path, compress_type="ZLIB") as s:
        rec = s.look_message_by_offset(s.put_message(Message(topic="t", body=body)).physical_offset)
    assert rec is not None
    assert compression_type_of(rec.sys_flag) is CompressionType.ZLIB
    assert rec.body[:2] == b"\x78\x5e"
    assert rec.decompressed_body() == body


def test_ipv6_born_host_sets_its_flag(tmp_path: Path):
    with open_store(tmp_path) as s:
        r = s.put_message(Message(topic="t", body=b"v6", born_host=("::1", 4000)))
        rec = s.look_message_by_offset(r.physical_offset)
    assert rec is not None
    assert rec.sys_flag & fmt.BORNHOST_V6_FLAG
    assert rec.born_host == ("::1", 4000)


def test_ipv6_store_host_gives_56_char_msg_id(tmp_path: Path):
    with open_store(tmp_path, store_host=("::1", 10911)) as s:
        r = s.put_message(Message(topic="t", body=b"v6"))
        rec = s.look_message_by_offset(r.physical_offset)
    assert len(r.msg_id) == 56
    assert rec is not None
    assert rec.msg_id == r.msg_id


def test_slave_refuses_writes(tmp_path: Path):
    with open_store(tmp_path, broker_role=BrokerRole.SLAVE) as s:
        r = s.put_message(Message(topic="t", body=b"x"))
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert r.error


def test_put_after_close_raises(tmp_path: Path):
    s = open_store(tmp_path)
    s.close()
    with pytest.raises(StoreClosedError):
        s.put_message(Message(topic="t", body=b"x"))


def test_clean_close_removes_abort_file(tmp_path: Path):
    s = open_store(tmp_path)
    assert (tmp_path / "abort").exists()
    s.close()
    assert not (tmp_path / "abort").exists()
    assert (tmp_path / "lock").read_bytes() == b"lock"
    assert (tmp_path / "checkpoint").stat().st_size == 4096


def test_an_open_failing_after_the_flusher_started_stops_it_and_can_be_retried(tmp_path: Path):
    """A failure late in open (here an unreadable ``delayOffset.json``, met when the schedule
    service starts, after the CommitLog flusher) stops every thread the open started, the
    flusher included, and releases the lock: the store opens once the file is fixed."""
    import threading

    from mqstore.remoting.fastjson import FastjsonError
    from tests.helpers import until

    with open_store(tmp_path) as s:
        s.put_message(Message(topic="t", body=b"kept"))
    offsets = tmp_path / "config" / "delayOffset.json"
    offsets.write_text("{not json")
    offsets.with_name("delayOffset.json.bak").unlink(missing_ok=True)
    before = set(threading.enumerate())
    with pytest.raises(FastjsonError):
        open_store(tmp_path)

    def left_running() -> list[str]:
        return [t.name for t in threading.enumerate() if t not in before and t.is_alive()]

    until(lambda: not left_running(), 30, what="the failed open's threads to stop")
    offsets.unlink()
    with open_store(tmp_path) as s:
        assert s.get_message("g", "t", 0, 0, 8).messages[0].body == b"kept"
