"""mqstore.sql92: RocketMQ's SQL92 filter language, without Java (the differential test
against RocketMQ's own classes is test_java_differential.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.message import properties_to_string, string_to_properties
from mqstore.sql92 import SqlEvaluationError, SqlParseError, compile_filter
from tests.sql92.strategies import expressions, mutated_expressions, props

NUMS = st.integers(-(10**6), 10**6)


@given(st.text(max_size=40) | expressions() | mutated_expressions(), props())
def test_any_text_compiles_or_is_a_parse_error_and_evaluates_or_is_an_evaluation_error(
    text: str, properties: dict[str, str]
) -> None:
    try:
        f = compile_filter(text)
    except SqlParseError:
        return
    try:
        assert f.evaluate(properties) in (True, False, None)
    except SqlEvaluationError:
        assert f.matches(properties) is False


@pytest.mark.parametrize("op", ["=", "<>", ">", ">=", "<", "<="])
@given(n=NUMS)
def test_a_missing_property_is_never_matched(op: str, n: int) -> None:
    assert not compile_filter(f"a {op} {n}").matches({"b": "1"})


@given(v=NUMS, low=NUMS, high=NUMS)
def test_between_is_an_inclusive_range_and_not_between_its_complement(
    v: int, low: int, high: int
) -> None:
    low, high = min(low, high), max(low, high)
    inside = compile_filter(f"a BETWEEN {low} AND {high}").matches({"a": str(v)})
    outside = compile_filter(f"a NOT BETWEEN {low} AND {high}").matches({"a": str(v)})
    assert inside == (low <= v <= high)
    assert outside == (not inside)


@given(v=st.sampled_from(["x", "y", "z", ""]), items=st.lists(st.sampled_from("xyz"), min_size=1))
def test_in_and_not_in_split_present_values_and_both_miss_absent_ones(
    v: str, items: list[str]
) -> None:
    listed = ", ".join(f"'{i}'" for i in items)
    assert compile_filter(f"a IN ({listed})").matches({"a": v}) == (v in items)
    assert compile_filter(f"a NOT IN ({listed})").matches({"a": v}) == (v not in items)
    assert not compile_filter(f"a IN ({listed})").matches({})
    assert not compile_filter(f"a NOT IN ({listed})").matches({})


@given(v=NUMS, n=NUMS)
def test_an_integer_property_compares_numerically_with_long_and_double_literals(
    v: int, n: int
) -> None:
    p = {"a": str(v)}
    assert compile_filter(f"a = {n}").matches(p) == (v == n)
    assert compile_filter(f"a > {n}").matches(p) == (v > n)
    if n > 0:
        assert compile_filter(f"a < {n}.5").matches(p) == (v < n + 0.5)


def test_a_property_that_is_not_a_number_fails_the_whole_expression() -> None:
    # RocketMQ throws NumberFormatException inside the OR: the message is not delivered
    f = compile_filter("a = 5 OR TAGS = 'TagA'")
    with pytest.raises(SqlEvaluationError):
        f.evaluate({"a": "five", "TAGS": "TagA"})
    assert not f.matches({"a": "five", "TAGS": "TagA"})
    assert f.matches({"TAGS": "TagA"})


def test_strings_compare_only_for_equality() -> None:
    assert compile_filter("TAGS = 'TagA'").matches({"TAGS": "TagA"})
    assert compile_filter("TAGS <> 'TagA'").matches({"TAGS": "TagB"})
    assert not compile_filter("a > b").matches({"a": "x", "b": "y"})
    assert compile_filter("a > b").matches({"a": "10", "b": "9"})  # as doubles


def test_is_null_is_true_only_for_a_missing_property() -> None:
    assert compile_filter("a IS NULL").matches({})
    assert not compile_filter("a IS NULL").matches({"a": ""})
    assert compile_filter("a IS NOT NULL").matches({"a": ""})


def test_string_tests_are_5x_keywords_and_false_for_a_missing_property() -> None:
    assert compile_filter("a CONTAINS 'b'").matches({"a": "abc"})
    assert compile_filter("a STARTSWITH 'ab'").matches({"a": "abc"})
    assert compile_filter("a ENDSWITH 'bc'").matches({"a": "abc"})
    assert not compile_filter("a NOT CONTAINS 'b'").matches({})
    assert compile_filter("NOT (a CONTAINS 'b')").matches({})
    # in 4.x CONTAINS is a property name: "a" then trailing text, a boolean cast
    assert compile_filter("a CONTAINS 'b'", string_tests=False).evaluate({"a": "abc"}) is False


def test_true_and_false_literals_stand_alone() -> None:
    assert compile_filter("TRUE").matches({})
    assert not compile_filter("FALSE OR NULL").matches({})


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a >",
        "a > 'x'",
        "a > TRUE",
        "a = NULL",
        "TRUE = 1",
        "a BETWEEN 3 AND 1",
        "a BETWEEN 1 AND NULL",
        "1 IN ('a')",
        "a > 0.0",
        "a = 9223372036854775808",
        "a != 1",
        "a = 'unterminated",
        "5",
        "'abc'",
        "a IS 5",
        "a = 1 NOT b",
        "(a = 1",
    ],
)
def test_rocketmq_refuses_to_compile(text: str) -> None:
    with pytest.raises(SqlParseError):
        compile_filter(text)


@pytest.mark.parametrize(
    ("text", "properties", "expected"),
    [
        ("a = 1 xyz", {"a": "1"}, True),  # no end-of-input rule
        ("NOT a = 1", {"a": "1"}, False),  # (NOT a) = 1: a boolean is not 1
        ("a = TRUE", {"a": "true"}, True),
        ("a = 5.0", {"a": "5"}, True),
        ("a = 2147483648", {"a": "2147483648"}, True),  # a long literal parses a long
        ("a = 1 -- note\n AND b = 2", {"a": "1", "b": "2"}, True),
        ("a = 1 /* c */ OR b = 2", {"b": "2"}, True),
        ("a > -1.5e1", {"a": "-10"}, True),
    ],
)
def test_rocketmq_quirks(text: str, properties: dict[str, str], expected: bool) -> None:
    assert compile_filter(text).matches(properties) is expected


def test_docstring_examples_run() -> None:
    import doctest

    import mqstore.sql92
    import mqstore.sql92.parser

    for module in (mqstore.sql92, mqstore.sql92.parser):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0


@given(expressions(), props())
def test_required_tags_bound_every_matching_message(text: str, properties: dict[str, str]) -> None:
    try:
        f = compile_filter(text)
    except SqlParseError:
        return
    if f.required_tags is not None and f.matches(properties):
        assert properties.get("TAGS") in f.required_tags


@given(expressions(), props())
def test_a_message_the_substring_test_skips_never_matches(
    text: str, properties: dict[str, str]
) -> None:
    try:
        f = compile_filter(text)
    except SqlParseError:
        return
    serialized = properties_to_string(properties)  # what the broker reads back
    if f.matches(string_to_properties(serialized)):
        assert f.may_match(serialized.encode())


@given(expressions(), props(), st.text(alphabet="ab\x01\x02TAGS", max_size=12))
def test_verdict_on_the_serialized_properties_is_the_verdict_on_the_parsed_ones(
    text: str, properties: dict[str, str], junk: str
) -> None:
    try:
        f = compile_filter(text)
    except SqlParseError:
        return
    for serialized in (
        properties_to_string(properties),
        junk,
        junk + properties_to_string(properties),
    ):
        want = f.matches(string_to_properties(serialized))
        assert f.matches_serialized(serialized) is want
        assert f.matches_serialized(serialized) is want  # the remembered verdict


@pytest.mark.parametrize(
    ("serialized", "verdict"),
    [
        ("ba\x01v\x02", False),  # another property ending in the name
        ("a\x01w\x02a\x01v\x02", True),  # the last one wins
        ("a\x01v\x02a\x01\x02", True),  # an empty value is no value
        ("a\x01v\x01x\x02", False),  # the value runs to the separator
        ("a\x01v", True),  # no final separator
    ],
)
def test_verdict_on_serialized_properties_reads_them_as_rocketmq_does(
    serialized: str, verdict: bool
) -> None:
    assert compile_filter("a = 'v'").matches_serialized(serialized) is verdict


@pytest.mark.parametrize(
    ("text", "record", "may"),
    [
        ("hit = 'yes'", "hit\x01no\x02TAGS\x01Hit\x02", False),
        ("hit = 'yes'", "hit\x01yes\x02", True),
        ("a > 5 AND b = 'x'", "a\x019\x02b\x01y\x02", False),
        ("a > 5 OR b = 'x'", "b\x01x\x02", True),
        ("a > 5 OR b = 'x'", "c\x01x\x02", False),
        ("a IN ('p', 'q')", "a\x01q\x02", True),
        ("a <> 'x'", "a\x01y\x02", True),  # no bound: every message is evaluated
        ("NOT (a = 'x')", "a\x01y\x02", True),
        ("a IS NULL", "", True),
    ],
)
def test_substring_test_skips_messages_without_a_required_property(
    text: str, record: str, may: bool
) -> None:
    assert compile_filter(text).may_match(record.encode()) is may


@pytest.mark.parametrize(
    ("text", "tags"),
    [
        ("TAGS = 'A'", {"A"}),
        ("'A' = TAGS AND a > 1", {"A"}),
        ("TAGS IN ('A', 'B') AND (TAGS = 'B' OR TAGS = 'C')", {"B"}),
        ("TAGS = 'A' OR a > 1", None),
        ("TAGS NOT IN ('A')", None),
        ("NOT (TAGS <> 'A')", None),
    ],
)
def test_required_tags_of_tags_clauses(text: str, tags: set[str] | None) -> None:
    want = None if tags is None else frozenset(tags)
    assert compile_filter(text).required_tags == want
