"""Subscription parsing and the two tag filters (hash code on the queue, exact on the message)."""

from __future__ import annotations

from mqstore.consumequeue.filter import parse_subscription
from mqstore.message import java_string_hash


def test_star_and_empty_match_everything():
    for expr in ("*", "", None, "  *  "):
        sub = parse_subscription(expr)
        assert sub.matches_all
        assert sub.matches_code(12345) and sub.matches_tags(None)


def test_tags_are_split_on_double_bar_and_trimmed():
    sub = parse_subscription(" TagA ||TagB||  ||TagC ")
    assert sub.tags == {"TagA", "TagB", "TagC"}
    assert sub.codes == {java_string_hash(t) for t in ("TagA", "TagB", "TagC")}


def test_separators_only_match_nothing():
    sub = parse_subscription("||")
    assert not sub.matches_all
    assert not sub.matches_code(0) and not sub.matches_tags("x")


def test_code_match_uses_the_low_32_bits():
    sub = parse_subscription("TagA")
    code = java_string_hash("TagA")
    assert sub.matches_code(code)
    assert sub.matches_code(code + (7 << 32))  # high bits ignored, as (int) tagsCode
    assert not sub.matches_code(code + 1)


def test_negative_hash_codes_match_sign_extended_units():
    tag = "TopicTest#KEY1"  # hashCode is negative
    assert java_string_hash(tag) < 0
    sub = parse_subscription(tag)
    assert sub.matches_code(java_string_hash(tag))  # as stored: sign-extended to a long
    assert sub.matches_code(java_string_hash(tag) & 0xFFFFFFFF)


def test_colliding_tags_pass_the_code_filter_but_not_the_exact_one():
    assert java_string_hash("Aa") == java_string_hash("BB")
    sub = parse_subscription("Aa")
    assert sub.matches_code(java_string_hash("BB"))
    assert sub.matches_tags("Aa") and not sub.matches_tags("BB")


def test_untagged_messages_do_not_match_a_tag_subscription():
    sub = parse_subscription("TagA")
    assert not sub.matches_code(0) and not sub.matches_tags(None)
