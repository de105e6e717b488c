"""``tags_column``: a batch's TAGS read in columns are ``tags_of``'s, record by record.

The records' properties sit between other bytes (headers, bodies) as in the CommitLog;
the column may refuse a batch (None) but never answers differently from ``tags_of``.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.consumequeue.tag_columns import tags_column
from mqstore.message import tags_of

_FILLER = st.binary(max_size=40) | st.sampled_from([b"", b"TAGS\x01x\x02", b"\x02TAGS"])
_NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "ATAGS", "TAG", "S", ""])
_VALUES = st.text(alphabet="TAGSab\x01\x02ü ", max_size=8) | st.sampled_from(["TagA", "t"])
_PROPS = st.lists(st.tuples(_NAMES, _VALUES), max_size=4).map(
    lambda kv: "".join(f"{k}\x01{v}\x02" for k, v in kv)
) | st.text(alphabet="TAGS\x01\x02xü", max_size=20)


def _laid_out(
    records: list[tuple[bytes, str]], tail: bytes = b""
) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The records' fillers and properties one after the other, and where each
    properties string starts and ends."""
    out = bytearray()
    starts, ends = [], []
    for filler, props in records:
        out += filler
        starts.append(len(out))
        out += props.encode()
        ends.append(len(out))
    return bytes(out + tail), np.array(starts, np.int64), np.array(ends, np.int64)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_FILLER, _PROPS), min_size=1, max_size=12), _FILLER)
def test_any_batch_gets_tags_of_each_record_or_is_refused(
    records: list[tuple[bytes, str]], tail: bytes
) -> None:
    buf, starts, ends = _laid_out(records, tail)
    got = tags_column(buf, starts, ends)
    if got is not None:
        assert got == [tags_of(props) for _, props in records]


def _producer_props(i: int, tag: str | None) -> str:
    tags = "" if tag is None else f"TAGS\x01{tag}\x02"
    return f"UNIQ_KEY\x01{i:032X}\x02{tags}KEYS\x01order-{i:06d}\x02"


@given(
    st.lists(
        st.tuples(
            st.binary(max_size=300).filter(lambda b: b"TAGS\x01" not in b),
            st.none() | st.text(alphabet="abcXYZ-_ü1", min_size=1, max_size=40),
        ),
        min_size=1,
        max_size=40,
    )
)
@settings(max_examples=50, deadline=None)
def test_one_producers_batch_is_answered_in_columns(
    records: list[tuple[bytes, str | None]],
) -> None:
    props = [(body, _producer_props(i, tag)) for i, (body, tag) in enumerate(records)]
    buf, starts, ends = _laid_out(props)
    assert tags_column(buf, starts, ends) == [tag for _, tag in records]


def test_a_repeated_tags_property_answers_the_last_value() -> None:
    props = [(b"h" * 10, _producer_props(i, "A")) for i in range(5)]
    props.append((b"h" * 10, "TAGS\x01first\x02KEYS\x01k\x02TAGS\x01last\x02"))
    buf, starts, ends = _laid_out(props)
    got = tags_column(buf, starts, ends)
    assert got is None or got == ["A"] * 5 + ["last"]


def test_a_mark_inside_a_body_is_not_taken_for_a_property() -> None:
    props = [(b"TAGS\x01Fake\x02", _producer_props(i, "Real")) for i in range(4)]
    buf, starts, ends = _laid_out(props)
    got = tags_column(buf, starts, ends)
    assert got is None or got == ["Real"] * 4


def test_records_out_of_log_order_are_answered_in_their_order() -> None:
    props = [(b"x", _producer_props(i, tag)) for i, tag in enumerate(["A", "B", "C"])]
    buf, starts, ends = _laid_out(props)
    assert tags_column(buf, starts[::-1].copy(), ends[::-1].copy()) == ["C", "B", "A"]


def test_records_far_apart_are_answered_in_columns() -> None:
    # a queue's records among many others': the span is many times their properties
    tags = [f"Tag{i % 5}" for i in range(40)]
    props = [(b"\x02TAGS\x01other" * 200, _producer_props(i, t)) for i, t in enumerate(tags)]
    buf, starts, ends = _laid_out(props)
    assert tags_column(buf, starts, ends) == tags


def test_a_batch_without_tags_answers_none_for_each() -> None:
    props = [(b"body", _producer_props(i, None)) for i in range(3)]
    buf, starts, ends = _laid_out(props)
    assert tags_column(buf, starts, ends) == [None, None, None]


_ALIKE = [
    "T",
    "ü",
    "Tag",
    "TagAAAAA",
    "TagAAAAA1",
    "TagAAAAA2",
    "TagAAAAAAAAAAAz",
    "TagAAAAAAAAAAAAz",
]
"""Tags that share their first 8 bytes, and widths either side of one and two words."""


@given(
    st.lists(st.sampled_from(_ALIKE), min_size=16, max_size=80),
    st.sampled_from([b"", b"\0" * 16, b"TAGS" * 5]),
)
@settings(max_examples=60, deadline=None)
def test_many_records_with_alike_tags_each_get_their_own(tags: list[str], tail: bytes) -> None:
    props = [(b"body" * (i % 3), _producer_props(i, tag)) for i, tag in enumerate(tags)]
    buf, starts, ends = _laid_out(props, tail)
    assert tags_column(buf, starts, ends) == tags


def test_tags_last_in_the_properties_are_read_up_to_their_end() -> None:
    props = [(b"h", f"KEYS\x01k{i}\x02TAGS\x01{'AB'[i % 2]}") for i in range(20)]
    buf, starts, ends = _laid_out(props)
    assert tags_column(buf, starts, ends) == ["AB"[i % 2] for i in range(20)]


def test_records_with_another_queues_between_are_answered_in_columns() -> None:
    # two queues written in turn: the other queue's TAGS lie in the span, close by
    tags = [f"Tag{i % 3}" for i in range(40)]
    other = b"head" + _producer_props(99, "Other").encode() + b"body"
    props = [(other, _producer_props(i, t)) for i, t in enumerate(tags)]
    buf, starts, ends = _laid_out(props)
    assert tags_column(buf, starts, ends) == tags


def test_a_batch_of_one_tag_gives_it_to_every_record() -> None:
    props = [(b"b" * (i % 7), _producer_props(i, "Only")) for i in range(50)]
    props.append((b"b", _producer_props(50, "Onlz")))  # one differs in its last byte
    buf, starts, ends = _laid_out(props)
    assert tags_column(buf, starts, ends) == ["Only"] * 50 + ["Onlz"]
    assert tags_column(buf, starts[:50].copy(), ends[:50].copy()) == ["Only"] * 50
