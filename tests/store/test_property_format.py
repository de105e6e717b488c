"""The 4.9 property format (``StoreConfig.property_format="4.9"``): the fixture's 2,000
messages, put through the project at the fixture's geometry, give RocketMQ 4.9.8's own
CommitLog and consume queues, byte for byte but for the store timestamps and host."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore import Message, MessageStore, StoreConfig
from mqstore.commitlog import format as fmt
from mqstore.message import (
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    java_hashmap_order,
    properties_to_string,
    string_to_properties,
)
from mqstore.property_format import PropertyFormat
from tests.helpers import tree
from tests.rmq498 import FIXTURE, manifest

STORE_TS_AND_HOST = slice(56, 72)
"""STORETIMESTAMP (8) and STOREHOST (8) of a v1 record with IPv4 hosts."""


def _records(commitlog: Path) -> dict[int, fmt.RecordInfo]:
    out: dict[int, fmt.RecordInfo] = {}
    for seg in sorted(commitlog.iterdir()):
        data = seg.read_bytes()
        pos = 0
        while pos < len(data):
            info = fmt.scan(memoryview(data), pos)
            if not isinstance(info, fmt.RecordInfo):
                break
            out[int(seg.name) + pos] = info
            pos += info.size
    return out


def _masked(commitlog: Path, records: dict[int, fmt.RecordInfo]) -> dict[str, bytes]:
    files = {}
    for seg in sorted(commitlog.iterdir()):
        data = bytearray(seg.read_bytes())
        base = int(seg.name)
        for phys in (p for p in records if base <= p < base + len(data)):
            at = phys - base
            data[at + STORE_TS_AND_HOST.start : at + STORE_TS_AND_HOST.stop] = bytes(16)
        files[seg.name] = bytes(data)
    return files


@pytest.fixture(scope="module")
def fixture_records() -> dict[int, fmt.RecordInfo]:
    return _records(FIXTURE / "store" / "commitlog")


def test_property_format_names_parse():
    assert PropertyFormat.parse("4.9.8") is PropertyFormat.V4_9
    assert PropertyFormat.parse("5.3.3") is PropertyFormat.V5
    with pytest.raises(ValueError, match=r"4\.9 or 5"):
        PropertyFormat.parse("4.8")


def test_fixture_messages_put_in_the_4_9_format_give_rocketmqs_records(
    tmp_path: Path, fixture_records: dict[int, fmt.RecordInfo]
):
    cfg = StoreConfig(
        root_dir=tmp_path / "s", commitlog_file_size=1 << 20,
        mapped_file_size_consume_queue=6000, max_hash_slot_num=500, max_index_num=2000,
        property_format="4.9",
    )  # fmt: skip
    with MessageStore.open(cfg) as s:
        for p in manifest():
            born = fixture_records[p.physical_offset].born_timestamp
            m = Message(p.topic, p.body, tags=p.tag, keys=p.key, queue_id=p.queue_id,
                        properties={"UNIQ_KEY": p.uniq_key}, born_timestamp=born,
                        born_host=("127.0.0.1", 50000))  # fmt: skip
            r = s.put_message(m)
            assert (r.physical_offset, r.queue_offset) == (p.physical_offset, p.queue_offset)
        assert s.wait_dispatched(30)
    ours = cfg.root / "commitlog"
    assert _masked(ours, _records(ours)) == _masked(
        FIXTURE / "store" / "commitlog", fixture_records
    )
    assert tree(cfg.root / "consumequeue") == tree(FIXTURE / "store" / "consumequeue")


def test_the_default_format_is_5x(tmp_path: Path):
    with MessageStore.open(StoreConfig(root_dir=tmp_path / "s", commitlog_file_size=1 << 16)) as s:
        r = s.put_message(Message("T", b"x", tags="A", keys="k"))
        rec = s.look_message_by_offset(r.physical_offset)
    assert rec is not None and rec.properties_string.endswith("\x02")
    assert rec.properties_string.startswith("UNIQ_KEY\x01")


_NAMES = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    props=st.dictionaries(
        _NAMES, st.text(max_size=8).filter(lambda v: not {"\x01", "\x02"} & set(v)), max_size=110
    ),
    tags=st.sampled_from([None, "", "TagA"]),
    keys=st.sampled_from([None, "k1 k2", ["k1", "k2"], [""], "  "]),
    delay=st.sampled_from([0, 3]),
    wait=st.booleans(),
)
def test_5x_properties_of_any_message_are_its_map_in_hashmap_128_order(
    props: dict[str, str], tags: str | None, keys: str | list[str] | None, delay: int, wait: bool
):
    m = Message("T", b"x", tags=tags, keys=keys, properties=props, delay_level=delay,
                wait_store_msg_ok=wait)  # fmt: skip
    data, uniq = PropertyFormat.V5.properties_of(m)
    items = m.all_properties()
    items.setdefault(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq)
    assert data == properties_to_string(java_hashmap_order(items.items())).encode()


class _Key(str):
    """A str subclass (an enum's or a wrapper's value): stored as a string."""


@pytest.mark.parametrize(
    ("keys", "expected"),
    [([""], None), (["", ""], None), ("a  b", "a  b"), (" a", " a"), ("  ", "  "),
     (["a", "", "b"], "a b"), (_Key("a b"), "a b")],
)  # fmt: skip
def test_keys_store_the_same_property_with_or_without_user_properties(
    tmp_path: Path, keys: str | list[str], expected: str | None
):
    """A string is stored as given (setKeys(String)), a list as its non-empty keys joined by
    a space, all-empty keys not at all: on the fast path and the general path alike."""
    with MessageStore.open(StoreConfig(root_dir=tmp_path / "s", commitlog_file_size=1 << 16)) as s:
        s.put_message(Message("T", b"x"))  # the general path sees the topic: later puts are fast
        plain = s.put_message(Message("T", b"x", keys=keys))
        with_props = s.put_message(Message("T", b"x", keys=keys, properties={"a": "1"}))
        stored = [s.look_message_by_offset(r.physical_offset) for r in (plain, with_props)]
    values = [m.properties.get("KEYS") if m is not None else "missing" for m in stored]
    assert values == [expected, expected]


@pytest.mark.parametrize(
    ("fmt_name", "own", "expected"),
    [("5", {}, "false"), ("5", {"WAIT": "true"}, "false"), ("4.9", {}, None),
     ("4.9", {"WAIT": "true"}, "true")],
)  # fmt: skip
def test_a_message_that_does_not_wait_stores_wait_as_its_broker_version_does(
    fmt_name: str, own: dict[str, str], expected: str | None
):
    """5.x marks it ``WAIT=false``; a 4.9 broker strips WAIT from a single message, so
    only a WAIT the message carries as its own property is stored."""
    m = Message("T", b"x", properties=own, wait_store_msg_ok=False)
    data, _ = PropertyFormat.parse(fmt_name).properties_of(m)
    assert string_to_properties(data.decode()).get("WAIT") == expected
