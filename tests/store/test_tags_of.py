"""``property_of`` (the dispatcher's fast property lookup) answers as the full RocketMQ parse."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqstore.message import property_of, string_to_properties, tags_of

# Pieces that make the awkward cases likely: separators, the mark, short segments.
pieces = st.sampled_from(["TAGS", "\x01", "\x02", "TAGS\x01", "a", "KEYS", "xy", "", "A\x02B"])
names = st.sampled_from(["TAGS", "KEYS", "A", "xy", "a\x01", "A\x02B", "\x01", ""])


@given(st.lists(pieces | st.text(max_size=4), max_size=12).map("".join), names)
def test_property_of_is_the_parsed_property(props: str, name: str) -> None:
    assert property_of(props, name) == string_to_properties(props).get(name)


def test_the_last_valid_tags_segment_wins() -> None:
    assert tags_of("TAGS\x01a\x02TAGS\x01b\x02") == "b"
    assert tags_of("TAGS\x01a\x02TAGS\x01\x02") == "a"  # an empty value is ignored
    assert tags_of("X\x01TAGS\x01b\x02TAGS\x01a") == "a"
    assert tags_of("TAGS\x01a\x02X\x01TAGS\x01b") == "a"  # the mark inside a value
