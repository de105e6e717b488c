"""A prototype of a fused put fast path, to measure what inlining would buy.

NOT a store implementation (store/ owns the put path): it exists to put a number on
the suggestion "one function for the common message", and checks that it writes the
same record bytes as ``MessageStore.put_message``. The common message: bytes body
under the compression threshold, no user properties, no delay, waits for store OK,
sys_flag 0, queue id >= 0, IPv4 born host, topic seen before, tags/keys without
separators. Anything else, or a segment without room, goes to ``put_message``.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Callable
from typing import Any

from store import Message, MessageStore
from store.commitlog import format as fmt
from store.message_store import PutResult

_tuple_new = tuple.__new__


def make_fused_put(store: MessageStore) -> Callable[[Message], PutResult]:
    """A put function for ``store`` (read-only use of its private parts)."""
    cl = store.commitlog
    segments = cl.segments
    table = cl.topic_queue_table
    lock = cl.put_lock
    hdr = struct.Struct(">iiiiiqqiq8sq8siqi")
    hsize = hdr.size
    pack_into = hdr.pack_into
    store_host = cl.store_host
    store_flag = cl.encoder.store_v6_flag
    host_hex = store._host_hex
    topics = store._topic_bytes
    born_cache = store._born_cache
    next_uniq = store._next_uniq
    wait_for = store.flusher.wait_for
    slow = store.put_message
    crc32 = zlib.crc32
    time_ns = time.time_ns
    over = store.cfg.compress_msg_body_over
    magic = fmt.MAGIC_V1
    fixed = hsize  # header up to BODY; V1 tail adds 1 + topic + 2 + properties

    def put(msg: Message) -> PutResult:
        topic = msg.topic
        tb = topics.get(topic)
        body = msg.body
        born = born_cache.get(msg.born_host)
        keys = msg.keys
        if type(keys) is list and len(keys) == 1 and keys[0]:
            keys = keys[0]
        elif keys is not None and type(keys) is not str:
            return slow(msg)
        tags = msg.tags
        if (
            tb is None
            or born is None
            or len(born) != 8
            or type(body) is not bytes
            or not body
            or len(body) >= over
            or msg.properties
            or msg.delay_level > 0
            or not msg.wait_store_msg_ok
            or msg.sys_flag
            or msg.queue_id < 0
            or not tags
            or not keys
            or len(tb) > fmt.MAX_TOPIC_LENGTH_V1
        ):
            return slow(msg)
        uniq = next_uniq()
        props = f"UNIQ_KEY\x01{uniq}\x02TAGS\x01{tags}\x02KEYS\x01{keys}\x02".encode()
        plen = len(props)
        blen = len(body)
        total = fixed + blen + 3 + len(tb) + plen
        tail = b"".join((bytes((len(tb),)), tb, plen.to_bytes(2, "big"), props))
        crc = crc32(body) & 0x7FFFFFFF
        qid = msg.queue_id
        key = f"{topic}-{qid}"
        lock.acquire()
        mf = segments.last
        if mf is None or total + 8 > mf.file_size - mf.wrote_position:
            lock.release()
            return slow(msg)  # roll: leave it to the real path (it takes the lock)
        try:
            qoff = table.get(key, 0)
            ts = time_ns() // 1_000_000
            pos = mf.wrote_position
            phys = mf.file_from_offset + pos
            mm = mf._mm
            pack_into(
                mm,
                pos,
                total,
                magic,
                crc,
                qid,
                msg.flag,
                qoff,
                phys,
                store_flag,
                ts,
                born,
                ts,
                store_host,
                msg.reconsume_times,
                0,
                blen,
            )
            b = pos + hsize
            mm[b : b + blen] = body
            mm[b + blen : pos + total] = tail
            mf.wrote_position = pos + total
            mf.last_store_timestamp = ts
            table[key] = qoff + 1
        finally:
            lock.release()
        cl.last_store_timestamp = ts
        return _tuple_new(
            PutResult,
            (wait_for(phys + total), phys, qoff, f"{host_hex}{phys:016X}", total, ts, uniq, None),
        )

    return put


def make_fused_batch(store: MessageStore) -> Callable[[list[Message]], list[PutResult]]:
    """A ``put_messages`` for batches of common messages to one topic-queue: framing
    done per message before the lock, then every record ``pack_into`` the mapping in
    one pass under it; results built with ``tuple.__new__``. Others: ``put_messages``.
    """
    cl = store.commitlog
    segments = cl.segments
    table = cl.topic_queue_table
    lock = cl.put_lock
    hdr = struct.Struct(">iiiiiqqiq8sq8siqi")
    hsize = hdr.size
    pack_into = hdr.pack_into
    store_host = cl.store_host
    store_flag = cl.encoder.store_v6_flag
    host_hex = store._host_hex
    next_uniq = store._next_uniq
    crc32 = zlib.crc32
    slow = store.put_messages
    magic = fmt.MAGIC_V1

    def put_batch(msgs: list[Message]) -> list[PutResult]:
        m0 = msgs[0]
        tb = store._topic_bytes.get(m0.topic)
        born = store._born_cache.get(m0.born_host)
        if tb is None or born is None or len(born) != 8 or len(tb) > fmt.MAX_TOPIC_LENGTH_V1:
            return slow(msgs)
        head = (len(tb),)
        framed = []
        for m in msgs:
            keys = m.keys
            if type(keys) is list and len(keys) == 1:
                keys = keys[0]
            body = m.body
            if (
                m.topic != m0.topic
                or m.queue_id != m0.queue_id
                or m.born_host != m0.born_host
                or type(body) is not bytes
                or not body
                or len(body) >= 4096
                or m.properties
                or m.delay_level > 0
                or not m.wait_store_msg_ok
                or m.sys_flag
                or not m.tags
                or not keys
                or type(keys) is not str
            ):
                return slow(msgs)
            uniq = next_uniq()
            props = f"UNIQ_KEY\x01{uniq}\x02TAGS\x01{m.tags}\x02KEYS\x01{keys}\x02".encode()
            tail = b"".join((bytes(head), tb, len(props).to_bytes(2, "big"), props))
            framed.append(
                (m, body, tail, hsize + len(body) + len(tail), crc32(body) & 0x7FFFFFFF, uniq)
            )
        need = sum(f[3] for f in framed)
        key = f"{m0.topic}-{m0.queue_id}"
        out = []
        lock.acquire()
        mf = segments.last
        if mf is None or need + 8 > mf.file_size - mf.wrote_position:
            lock.release()
            return slow(msgs)  # roll: the real path takes the lock itself
        try:
            mm = mf._mm
            ts = time.time_ns() // 1_000_000
            q = table.get(key, 0)
            pos = mf.wrote_position
            base = mf.file_from_offset
            for m, body, tail, total, crc, uniq in framed:
                pack_into(
                    mm,
                    pos,
                    total,
                    magic,
                    crc,
                    m.queue_id,
                    m.flag,
                    q,
                    base + pos,
                    store_flag,
                    ts,
                    born,
                    ts,
                    store_host,
                    m.reconsume_times,
                    0,
                    len(body),
                )
                b = pos + hsize + len(body)
                mm[pos + hsize : b] = body
                mm[b : pos + total] = tail
                out.append((q, base + pos, uniq))
                pos += total
                q += 1
            mf.wrote_position = pos
            mf.last_store_timestamp = ts
            table[key] = q
        finally:
            lock.release()
        cl.last_store_timestamp = ts
        status = store.flusher.wait_for(base + pos)
        return [
            _tuple_new(PutResult, (status, p, q, f"{host_hex}{p:016X}", 0, ts, u, None))
            for q, p, u in out
        ]

    return put_batch


def same_bytes_as_put_message(store: MessageStore, msg: Message) -> None:
    """Write ``msg`` with both paths (same UNIQ_KEY and clock); the records must differ
    only in QUEUEOFFSET and PHYSICALOFFSET.

    Raises:
        AssertionError: the fused path wrote other bytes.
    """
    cl = store.commitlog
    saved: dict[str, Any] = {"uniq": store._next_uniq, "clock": cl._clock}
    store._next_uniq = lambda: "7F00000100002A9F0000000000000001"
    cl._clock = lambda: 1_700_000_000_123
    real_time_ns = time.time_ns
    try:
        time.time_ns = lambda: 1_700_000_000_123_000_000  # the fused path reads time directly
        fused = make_fused_put(store)
        a = store.put_message(msg)
        b = fused(msg)
        ab = store.put_messages([msg, msg])
        bb = make_fused_batch(store)([msg, msg])
    finally:
        time.time_ns = real_time_ns
        store._next_uniq = saved["uniq"]
        cl._clock = saved["clock"]
    ra = bytearray(cl.read(a.physical_offset, a.size) or b"")
    rb = bytearray(cl.read(b.physical_offset, b.size) or b"")
    assert a.size == b.size and ra and rb, (a, b)
    for pos in (fmt.QUEUE_OFFSET_POS, fmt.PHYSICAL_OFFSET_POS):
        ra[pos : pos + 8] = rb[pos : pos + 8] = bytes(8)
    assert ra == rb, "the fused put wrote different bytes"
    for x, y in zip(ab, bb, strict=True):
        rx = bytearray(cl.read(x.physical_offset, a.size) or b"")
        ry = bytearray(cl.read(y.physical_offset, a.size) or b"")
        for pos in (fmt.QUEUE_OFFSET_POS, fmt.PHYSICAL_OFFSET_POS):
            rx[pos : pos + 8] = ry[pos : pos + 8] = bytes(8)
        assert rx == ry == ra, "the fused batch wrote different bytes"
        assert y.queue_offset == x.queue_offset + 2
    assert (b.queue_offset, b.physical_offset) == (a.queue_offset + 1, a.physical_offset + a.size)
