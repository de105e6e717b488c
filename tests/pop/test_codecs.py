"""Receipt handles and revive-topic records: round trips, RocketMQ field names, garbage."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.errors import CorruptRecordError, InvalidReceiptHandleError
from mqstore.pop import wire as pop_wire
from mqstore.pop.receipt import ReceiptHandle, RetryFlag
from mqstore.pop.records import AckMsg, PopCheckPoint, normal_topic, pop_retry_topic

names = st.from_regex(r"[A-Za-z0-9_%-]{1,20}", fullmatch=True)
longs = st.integers(0, 2**62)

handles = st.builds(
    ReceiptHandle, longs, longs, st.integers(0, 2**31), st.integers(0, 999),
    st.sampled_from(RetryFlag), names, st.integers(0, 2**31), longs,
)  # fmt: skip


@given(handles)
def test_receipt_handle_round_trips(h: ReceiptHandle) -> None:
    assert ReceiptHandle.parse(h.encode()) == h


@given(st.text(max_size=60))
def test_garbage_handle_raises_only_invalid_receipt_handle(text: str) -> None:
    with contextlib.suppress(InvalidReceiptHandleError):
        ReceiptHandle.parse(text)


def test_handle_with_an_unknown_retry_flag_is_refused() -> None:
    with pytest.raises(InvalidReceiptHandleError):
        ReceiptHandle.parse("7 1000 30000 3 5 broker-a 2 9")


def test_handle_field_order_is_extra_info_util() -> None:
    h = ReceiptHandle.parse("7 1000 30000 3 1 broker-a 2 9")
    assert (h.ck_start_offset, h.pop_time, h.invisible_time, h.revive_qid) == (7, 1000, 30000, 3)
    assert (h.broker_name, h.queue_id, h.queue_offset) == ("broker-a", 2, 9)
    assert h.real_topic("T", "g") == "%RETRY%g_T"


checkpoints = st.builds(
    PopCheckPoint, names, names, st.integers(0, 127), longs, longs, st.integers(0, 2**31),
    st.lists(st.integers(0, 2**20), min_size=1, max_size=32).map(lambda d: tuple(sorted(d))),
    names, longs, st.integers(0, 2**31 - 1),
)  # fmt: skip


@given(checkpoints)
def test_checkpoint_round_trips(ck: PopCheckPoint) -> None:
    assert PopCheckPoint.from_json(ck.to_json()) == ck


def test_checkpoint_json_uses_rocketmq_field_names() -> None:
    ck = PopCheckPoint("orders", "g", 1, 7, 1000, 30000, (0, 2), "broker-a")
    d = json.loads(ck.to_json())
    assert d == {"so": 7, "pt": 1000, "it": 30000, "rt": 31000, "bm": 0, "n": 2, "q": 1,
                 "t": "orders", "c": "g", "ro": 0, "d": [0, 2], "bn": "broker-a"}  # fmt: skip
    assert ck.offsets == (7, 9)


def test_old_checkpoint_without_diffs_covers_n_offsets() -> None:
    ck = PopCheckPoint.from_json(b'{"so":5,"pt":1,"it":2,"n":3,"q":0,"t":"T","c":"g"}')
    assert ck.offsets == (5, 6, 7)


@given(names, names, st.lists(longs, min_size=1, max_size=5).map(tuple))
def test_ack_round_trips(topic: str, group: str, offsets: tuple[int, ...]) -> None:
    ack = AckMsg(topic, group, 3, 10, 1000, "b", offsets)
    back = AckMsg.from_json(ack.to_json())
    assert back == ack
    assert ack.tag == ("ack" if len(offsets) == 1 else "bAck")
    assert ("ao" in json.loads(ack.to_json())) == (len(offsets) == 1)


@pytest.mark.parametrize("body", [b"", b"[]", b"{", b'{"so":"x"}', b"\xff"])
def test_bad_record_bodies_raise_corrupt_record(body: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        PopCheckPoint.from_json(body)
    with pytest.raises(CorruptRecordError):
        AckMsg.from_json(body)


def test_pop_retry_topic_names() -> None:
    assert pop_retry_topic("T", "g") == "%RETRY%g_T"
    assert normal_topic("%RETRY%g_T", "g") == "T"
    assert normal_topic("T", "g") == "T"


def test_checkpoint_of_the_longest_invisible_time_writes_a_revive_time_java_parses() -> None:
    ck = PopCheckPoint("T", "g", 0, 0, 1_700_000_000_000, 2**63 - 1, (0,), "b")
    rt = json.loads(ck.to_json())["rt"]
    assert -(2**63) <= rt < 0  # wrapped as RocketMQ's long sum: revived at once


@pytest.mark.parametrize(("text", "taken"), [("-100000", -100000), (str(2**63 - 1), 2**63 - 1),
                                             (str(10**20), 0), ("abc", 0), (None, 0)])  # fmt: skip
def test_pop_invisible_time_is_read_as_rocketmq_533_decodes_it(
    text: str | None, taken: int
) -> None:
    ext = {} if text is None else {"invisibleTime": text}
    assert pop_wire.pop_invisible_time(ext) == taken
