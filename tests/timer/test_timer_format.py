"""Timer files' byte layouts (RocketMQ 5's TimerLog, TimerWheel, TimerCheckpoint)."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from mqstore.timer import format as tf

longs = st.integers(-(1 << 63), (1 << 63) - 1)
ints = st.integers(-(1 << 31), (1 << 31) - 1)


@given(longs, st.integers(1, 15), longs, ints, longs, ints, ints)
def test_a_unit_decodes_to_what_was_encoded(prev, magic, write, delay, off, size, th):
    u = tf.Unit(prev, magic, write, delay, off, size, th)
    raw = tf.encode_unit(u)
    assert len(raw) == tf.UNIT_SIZE
    assert tf.decode_unit(raw) == u


def test_a_unit_is_rocketmqs_big_endian_layout():
    raw = tf.encode_unit(tf.Unit(-1, tf.MAGIC_DEFAULT | tf.MAGIC_ROLL, 7, 3000, 64, 200, -5))
    assert struct.unpack(">iqiqiqiiq", raw) == (52, -1, 3, 7, 3000, 64, 200, -5, 0)


def test_zeros_a_blank_and_a_bad_magic_end_the_log():
    assert tf.decode_unit(bytes(52)) is None
    assert tf.decode_unit(tf.encode_blank(100) + bytes(36)) is None
    bad = bytearray(tf.encode_unit(tf.Unit(-1, 1, 0, 0, 0, 0)))
    bad[12:16] = (0x10).to_bytes(4, "big")
    assert tf.decode_unit(bytes(bad)) is None


def test_the_blank_magic_is_javas_int_expression():
    # 0xBBCCDDEE ^ 1880681586 + 8 evaluated by Java 17 (see docs/timer.md)
    assert tf.BLANK_MAGIC == -875286124


@given(st.integers(0, 1 << 40), longs, longs, ints, ints, st.sampled_from([1, 100, 1000]))
def test_a_slot_reads_back_only_for_its_own_round(t, first, last, num, magic, precision):
    time_ms = t // precision * precision
    raw = tf.encode_slot(tf.Slot(time_ms, first, last, num, magic), precision)
    assert tf.decode_slot(raw, 0, time_ms, precision) == tf.Slot(time_ms, first, last, num, magic)
    other = time_ms + 2 * tf.SLOTS_TOTAL * precision  # same index, next round
    assert tf.slot_index(other, precision) == tf.slot_index(time_ms, precision)
    assert tf.decode_slot(raw, 0, other, precision) is tf.EMPTY_SLOT


@given(longs, longs, longs, longs, longs, longs, longs, st.integers(-1, 1 << 60))
def test_a_checkpoint_round_trips_with_the_extension(a, b, c, d, e, f, g, log_from):
    cp = tf.Checkpoint(a, b, c, d, e, f, g, log_from)
    assert tf.decode_checkpoint(tf.encode_checkpoint(cp)) == cp


def test_a_rocketmq_checkpoint_has_no_extension():
    raw = struct.pack(">7q", 5000, 52, 3, 3, 0, 0, 1) + bytes(4096 - 56)
    cp = tf.decode_checkpoint(raw)
    assert (cp.last_read_ms, cp.timer_log_flush_pos, cp.queue_offset, cp.log_from) == (
        5000, 52, 3, -1)  # fmt: skip


@given(st.text(max_size=40))
def test_topic_hash_is_javas_string_hashcode(text):
    h = 0
    for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    assert tf.java_string_hash(text) == (h - (1 << 32) if h >= 1 << 31 else h)
